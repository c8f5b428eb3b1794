import type { LeaseStore, Logger, WorkerSession } from '@kcl/core';

export interface SessionLivenessOptions {
  /** A store with `capabilities.sessionLiveness` (deadlines already applied). */
  readonly store: LeaseStore;
  readonly workerId: string;
  /** How often `check` is called (`livenessCheckIntervalMs`). */
  readonly checkIntervalMs: number;
  readonly logger: Logger;
  /** Workers newly found dead: their leases may be taken at once. */
  readonly onDead: (workerIds: readonly string[]) => void;
}

/**
 * About how often (ms) the statement on this worker's own session runs. In between, the listing that
 * asks after the others includes this worker, so a lock it lost shows there at once; the statement on
 * the session keeps its idle connection from being closed by a server or proxy idle limit, and tells
 * its own lock from one another process holds under the same worker id (the same id run twice, or two
 * ids sharing a lock key) — which is why it also runs before anyone is judged dead.
 */
export const OWN_SESSION_CHECK_MS = 10_000;

/** Every how many checks the statement on the worker's own session runs (at least every check). */
export function ownSessionCheckEvery(checkIntervalMs: number): number {
  return Math.max(1, Math.floor(OWN_SESSION_CHECK_MS / checkIntervalMs));
}

/**
 * Worker liveness tied to database sessions (ARCHITECTURE §3): this worker holds a session of its own,
 * and each check asks the store which of the other workers still hold theirs. A worker seen holding
 * its session and then found without it is dead — its process ended (the database ended the session
 * when the socket closed), or its connection was cut — and its leases may be taken without waiting for
 * them to expire. Nobody is judged while this worker's own session is gone (a database restart ends
 * every session at once): after it attached again, the others must be seen holding theirs again first.
 * This only makes takeovers sooner; counter fencing keeps them safe, so a live worker wrongly judged
 * dead loses the leases taken from it at its next write, never a record.
 */
export class SessionLiveness {
  readonly #options: SessionLivenessOptions;
  #session: WorkerSession | null = null;
  /** Workers seen holding a session since this worker's own session was attached. */
  readonly #seenLive = new Set<string>();
  readonly #dead = new Set<string>();
  #lostLogged = false;
  /** Failed attaches in a row (logged at the first and then every 30th). */
  #attachFailures = 0;
  /** Set by `close`: a session attached after it is closed at once. */
  #closed = false;
  /** Of the workers last watched (see `check`), those that held a session. */
  #watchedLive: ReadonlySet<string> = new Set();
  /** Checks left before the next statement on this worker's own session (1 or less: at the next). */
  #checksUntilOwn = 0;

  constructor(options: SessionLivenessOptions) {
    this.#options = options;
  }

  /** The workers judged dead (seen holding a session, then without one), until seen holding one again. */
  dead(): ReadonlySet<string> {
    return this.#dead;
  }

  /**
   * Of the workers `check` was last asked to watch, those seen holding a session: never judged, only
   * reported (a worker found dead that attached again is alive).
   */
  watchedLive(): ReadonlySet<string> {
    return this.#watchedLive;
  }

  /** True while this worker holds its session. */
  get attached(): boolean {
    return this.#session !== null;
  }

  /**
   * Attaches this worker's session. Never rejects: a worker without a session works as one on a store
   * without sessions (nobody judges it; its leases expire), and the next check tries again — after an
   * earlier session of this worker id that the database has not seen end yet, a lock key shared with
   * another worker id, or no connection to spare. True when attached.
   */
  async attach(signal?: AbortSignal): Promise<boolean> {
    const { store, workerId, logger } = this.#options;
    const attach = store.workers.attachSession;
    if (attach === undefined || this.#closed) return false;
    try {
      const session = await attach.call(store.workers, workerId, signal === undefined ? {} : { signal });
      if (this.#closed) {
        await session.close().catch(() => undefined);
        return false;
      }
      this.#session = session;
      this.#checksUntilOwn = 0;
      this.#lostLogged = false;
      this.#attachFailures = 0;
      return true;
    } catch (error) {
      if (this.#attachFailures % 30 === 0) {
        logger.warn('could not attach the liveness session; trying again at each check', {
          attempts: this.#attachFailures + 1,
          error,
        });
      }
      this.#attachFailures += 1;
      return false;
    }
  }

  /**
   * A worker judged dead wrote one of its leases after all (the counter moved while it owned it), or its
   * registry row moved (a heartbeat, or a restart under its id registering again): it lives, without a
   * session or before attaching one. Not judged again until seen holding one.
   */
  revive(workerId: string, evidence: 'writes' | 'registry' = 'writes'): void {
    if (!this.#dead.delete(workerId)) return;
    this.#seenLive.delete(workerId);
    this.#options.logger.info(
      evidence === 'writes'
        ? 'a worker judged dead by its session still writes its leases; not judged again until it holds a session'
        : 'a worker judged dead by its session heartbeats or registered again (alive, or restarted under its id); not judged again until it holds a session',
      { workerId },
    );
  }

  /**
   * One check: a statement asking which of `candidates` — the lease owners and hand-off requesters of
   * the last listing — and this worker hold a session, followed about every `OWN_SESSION_CHECK_MS`, and
   * before anyone is judged dead, by one on this worker's own session (see there). `watched` workers
   * are asked after in the same statement but never judged (`watchedLive`). Without a session of its
   * own, this worker attaches one instead.
   */
  async check(candidates: Iterable<string>, watched: Iterable<string> = []): Promise<void> {
    const { store, workerId, logger } = this.#options;
    const session = this.#session;
    if (session === null) {
      await this.attach();
      return;
    }
    const others = new Set(candidates);
    others.delete(workerId);
    const asked = new Set([...others, ...watched, workerId]);
    const live = await store.workers.liveSessions?.([...asked]);
    if (live === undefined || this.#session !== session) return;
    this.#watchedLive = new Set([...watched].filter((other) => live.has(other)));
    if (!live.has(workerId)) {
      await this.#lost();
      return;
    }
    const newlyDead: string[] = [];
    for (const other of others) {
      if (live.has(other)) {
        this.#seenLive.add(other);
        this.#dead.delete(other);
      } else if (this.#seenLive.has(other) && !this.#dead.has(other)) {
        newlyDead.push(other);
      }
    }
    // Forget workers that own no lease any more (bounded memory).
    for (const known of [...this.#seenLive]) if (!others.has(known)) this.#seenLive.delete(known);
    for (const known of [...this.#dead]) if (!others.has(known)) this.#dead.delete(known);
    this.#checksUntilOwn -= 1;
    if (this.#checksUntilOwn <= 0 || newlyDead.length > 0) {
      // Before anyone is judged: the listing showed this worker's lock held, but perhaps by another
      // process under its id. A lock held on its own connection now was held at the listing (a lost
      // one is never regained on that connection); only then may the others' absence be judged.
      const held = await session.check();
      if (this.#session !== session) return;
      if (!held) {
        await this.#lost();
        return;
      }
      this.#checksUntilOwn = ownSessionCheckEvery(this.#options.checkIntervalMs);
    }
    for (const dead of newlyDead) this.#dead.add(dead);
    if (newlyDead.length > 0) {
      logger.info('workers lost their database session; taking their leases without waiting for expiry', {
        workerIds: newlyDead,
      });
      this.#options.onDead(newlyDead);
    }
  }

  /** Releases this worker's session (a stop); no session is attached after it. Idempotent. */
  async close(): Promise<void> {
    this.#closed = true;
    const session = this.#session;
    this.#session = null;
    await session?.close().catch(() => undefined);
  }

  async #lost(): Promise<void> {
    if (!this.#lostLogged) {
      this.#options.logger.warn(
        'this worker lost its database session (a database restart or a cut connection); attaching again, judging nobody until then',
        { workerId: this.#options.workerId },
      );
      this.#lostLogged = true;
    }
    const session = this.#session;
    this.#session = null;
    await session?.close().catch(() => undefined);
    this.#seenLive.clear();
    this.#dead.clear();
    // Attached again at once where the database lets it (a restart that is over, a cut connection).
    await this.attach();
  }
}
