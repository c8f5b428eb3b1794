import type { LeaseStore, Logger, WorkerSession } from '@kcl/core';

export interface SessionLivenessOptions {
  /** A store with `capabilities.sessionLiveness` (deadlines already applied). */
  readonly store: LeaseStore;
  readonly workerId: string;
  readonly logger: Logger;
  /** Workers newly found dead: their leases may be taken at once. */
  readonly onDead: (workerIds: readonly string[]) => void;
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

  constructor(options: SessionLivenessOptions) {
    this.#options = options;
  }

  /** The workers judged dead (seen holding a session, then without one), until seen holding one again. */
  dead(): ReadonlySet<string> {
    return this.#dead;
  }

  /** True while this worker holds its session. */
  get attached(): boolean {
    return this.#session !== null;
  }

  /** Attaches this worker's session; rejects (retryably while an earlier session of this worker id still holds the lock). */
  async attach(signal?: AbortSignal): Promise<void> {
    const attach = this.#options.store.workers.attachSession;
    if (attach === undefined) return;
    this.#session = await attach.call(
      this.#options.store.workers,
      this.#options.workerId,
      signal ? { signal } : {},
    );
    this.#lostLogged = false;
  }

  /**
   * One check (a single statement): which of `candidates` — the owners and registered workers of the
   * last listing — and this worker hold a session. Without a session of its own, this worker attaches
   * one instead.
   */
  async check(candidates: Iterable<string>): Promise<void> {
    const { store, workerId, logger } = this.#options;
    if (this.#session === null) {
      await this.attach().catch((error: unknown) => {
        logger.warn('attaching the liveness session failed; retrying at the next check', { error });
      });
      return;
    }
    const others = new Set(candidates);
    others.delete(workerId);
    const live = await store.workers.liveSessions?.([...others, workerId]);
    if (live === undefined) return;
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
        this.#dead.add(other);
        newlyDead.push(other);
      }
    }
    // Forget workers no longer listed anywhere (bounded memory).
    for (const known of [...this.#seenLive]) if (!others.has(known)) this.#seenLive.delete(known);
    for (const known of [...this.#dead]) if (!others.has(known)) this.#dead.delete(known);
    if (newlyDead.length > 0) {
      logger.info('workers lost their database session; taking their leases without waiting for expiry', {
        workerIds: newlyDead,
      });
      this.#options.onDead(newlyDead);
    }
  }

  /** Releases this worker's session (a stop). Idempotent. */
  async close(): Promise<void> {
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
    await this.close();
    this.#seenLive.clear();
    this.#dead.clear();
  }
}
