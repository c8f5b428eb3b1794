import type { StoreCallOptions, WorkerRegistry, WorkerSession } from '@kcl/core';
import { KclError } from '@kcl/core';
import { classifySqlError, sessionHeldError, storeClosedError, toLeaseStoreError } from './sql-errors.js';
import type { SqlSessionFlavor, SqlSessionHandle, SqlSessionScope } from './sql-flavor.js';
import { MAX_WORKER_ID_LENGTH } from './sql-schema.js';
import type { SqlStoreContext } from './sql-store-context.js';
import { checkKey, runSql } from './sql-store-context.js';

/** The session calls of the worker registry, and what the store's `close()` needs of them. */
export interface SqlWorkerSessions {
  readonly calls: Required<Pick<WorkerRegistry, 'attachSession' | 'liveSessions'>>;
  /** Closes every session still open and refuses new ones. */
  closeAll(): Promise<void>;
}

/**
 * Worker sessions on PostgreSQL and MySQL/MariaDB. A session takes a connection out of the store's
 * pool (`db.connection()`) and keeps it for as long as the session is open, holding the worker's lock
 * on it; nothing else runs on that connection, and the pool has one connection less meanwhile.
 */
export function createSqlWorkerSessions(
  context: SqlStoreContext,
  flavor: SqlSessionFlavor,
): SqlWorkerSessions {
  const scope: SqlSessionScope = { tables: context.tables, applicationName: context.applicationName };
  const open = new Set<SqlWorkerSession>();
  let closed = false;
  return {
    calls: {
      attachSession: async (workerId: string, options?: StoreCallOptions) => {
        checkKey(context, 'the worker id', workerId, MAX_WORKER_ID_LENGTH);
        if (closed) throw storeClosedError(context.store, 'attaching a worker session');
        return attach(context, flavor, scope, workerId, options?.signal, open, () => closed);
      },
      liveSessions: async (workerIds: readonly string[], _options?: StoreCallOptions) => {
        if (!Array.isArray(workerIds)) throw new TypeError('liveSessions takes an array of worker ids');
        for (const workerId of workerIds) checkKey(context, 'a worker id', workerId, MAX_WORKER_ID_LENGTH);
        const distinct = [...new Set(workerIds)];
        if (distinct.length === 0) return new Set<string>();
        return runSql(context, `reading the sessions of ${distinct.length} workers`, () =>
          flavor.live(context.db, scope, distinct),
        );
      },
    },
    async closeAll() {
      closed = true;
      await Promise.all([...open].map((session) => session.close()));
    },
  };
}

/**
 * Takes a connection, takes the worker's lock on it and resolves with the session once it holds it;
 * the connection goes back to the pool when the session ends. A lock held elsewhere rejects with
 * `WORKER_SESSION_HELD` (the connection goes back at once, holding nothing).
 */
function attach(
  context: SqlStoreContext,
  flavor: SqlSessionFlavor,
  scope: SqlSessionScope,
  workerId: string,
  signal: AbortSignal | undefined,
  open: Set<SqlWorkerSession>,
  storeClosed: () => boolean,
): Promise<WorkerSession> {
  if (signal?.aborted === true) return Promise.reject(signal.reason as unknown);
  const operation = `attaching a session for worker ${JSON.stringify(workerId)}`;
  return new Promise<WorkerSession>((resolve, reject) => {
    let attached = false;
    context.db
      .connection()
      .execute(async (connection) => {
        const handle = await flavor.lock(connection, scope, workerId);
        if (handle === null) throw sessionHeldError(context.store, workerId);
        const session = new SqlWorkerSession(context, workerId, handle);
        // Aborted (a caller's deadline passed) or the store closed while the lock was being taken:
        // nobody will ever close this session, so it ends here.
        if (signal?.aborted === true || storeClosed()) {
          await session.close();
          await session.ended;
          throw signal?.aborted === true
            ? signal.reason
            : storeClosedError(context.store, 'attaching a worker session');
        }
        open.add(session);
        attached = true;
        resolve(session);
        // The connection stays out of the pool until the session ends (closed, or found lost).
        await session.ended;
        open.delete(session);
      })
      .catch((error: unknown) => {
        if (attached) return;
        reject(
          KclError.is(error) || error === signal?.reason
            ? error
            : toLeaseStoreError(error, {
                store: context.store,
                operation,
                tables: context.tables,
              }),
        );
      });
  });
}

type SessionState = 'open' | 'lost' | 'closed';

/** One attached session: its lock's handle on the connection it holds. */
class SqlWorkerSession implements WorkerSession {
  readonly workerId: string;
  /** Resolves once the session has let go of its connection (which then goes back to the pool). */
  readonly ended: Promise<void>;
  readonly #context: SqlStoreContext;
  readonly #handle: SqlSessionHandle;
  #state: SessionState = 'open';
  #end!: () => void;
  #closing: Promise<void> | null = null;

  constructor(context: SqlStoreContext, workerId: string, handle: SqlSessionHandle) {
    this.workerId = workerId;
    this.#context = context;
    this.#handle = handle;
    this.ended = new Promise((resolve) => {
      this.#end = resolve;
    });
  }

  async check(_options?: StoreCallOptions): Promise<boolean> {
    if (this.#state !== 'open') return false;
    let held: boolean;
    try {
      held = await this.#handle.holds();
    } catch (error) {
      if (this.#state !== 'open') return false;
      if (classifySqlError(error) !== 'unavailable') {
        throw toLeaseStoreError(error, {
          store: this.#context.store,
          operation: `checking the session of worker ${JSON.stringify(this.workerId)} (${this.#handle.label})`,
          tables: this.#context.tables,
        });
      }
      held = await this.#settle();
    }
    if (!held && this.#state === 'open') {
      // The connection broke or the server ended the session: nothing is left to release.
      this.#state = 'lost';
      this.#context.logger.warn(
        `the session of worker ${JSON.stringify(this.workerId)} ended: its connection was lost or the server ended it`,
        { workerId: this.workerId, session: this.#handle.label },
      );
      this.#end();
    }
    return held && this.#state === 'open';
  }

  close(): Promise<void> {
    if (this.#state !== 'open') return this.#closing ?? this.ended;
    this.#state = 'closed';
    this.#closing = this.#release().finally(() => this.#end());
    return this.#closing;
  }

  /**
   * Releases the lock so the connection can go back to the pool. When the release does not confirm it
   * (an error that left the connection up, say), the server ends the session instead: a pooled
   * connection must never keep a worker's lock.
   */
  async #release(): Promise<void> {
    try {
      if (await this.#handle.unlock()) return;
    } catch (error) {
      if (classifySqlError(error) === 'unavailable') {
        await this.#settle();
        return;
      }
    }
    await this.#handle.endSession().catch(() => undefined);
    await this.#settle();
  }

  /**
   * After the connection failed: one more statement on it, so the driver sees it gone before it goes
   * back to the pool. (pg fails the statement that receives the server's "terminating connection"
   * at once, but marks the client unusable only when the socket closes a moment later; a client
   * released in between would go back to the pool and fail the next caller's query.) Whether the lock
   * is still held, in the unlikely case the connection turns out fine.
   */
  #settle(): Promise<boolean> {
    return this.#handle.holds().catch(() => false);
  }
}
