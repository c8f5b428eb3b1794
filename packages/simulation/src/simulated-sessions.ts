import type { LeaseStore } from '@kcl/core';
import { interceptLeaseStore, LeaseStoreError } from '@kcl/core';
import type { MemoryLeaseTable } from '@kcl/testkit';
import type { SimulationClock } from './simulation-clock.js';

/** One stretch of time during which a worker id's lock was held (by any session of it). */
interface Presence {
  readonly from: number;
  to: number | null;
}

/**
 * One simulated process as the database sees its sessions: the sessions it attached end when it dies
 * (at once when its socket closes, later when its machine vanishes without closing it).
 */
export class SessionProcess {
  readonly workerId: string;
  /** The session tokens this process attached. */
  readonly tokens = new Set<symbol>();
  /** Once it died: when the database ends its sessions (monotonic ms). */
  endsAt: number | null = null;

  constructor(workerId: string) {
    this.workerId = workerId;
  }
}

/**
 * The database side of session liveness for a memory lease table (`createMemoryLeaseStore({ sessions:
 * true })`): what ends sessions — a process dying, a machine vanishing, a cut connection, a database
 * restart — and when each worker id's lock was held, so a takeover "because the owner's session is
 * gone" can be checked against what the database really said.
 */
export class SimulatedSessions {
  readonly #sessions: Map<string, symbol>;
  readonly #clock: SimulationClock;
  readonly #presences = new Map<string, Presence[]>();
  /** Set while a token is swapped in place (a cut connection the database has not noticed yet). */
  #swapping = false;
  #down = false;
  restarts = 0;
  cuts = 0;

  constructor(table: MemoryLeaseTable, applicationName: string, clock: SimulationClock) {
    this.#clock = clock;
    this.#sessions = table.application(applicationName).sessions;
    const sessions = this.#sessions;
    const set = sessions.set.bind(sessions);
    const remove = sessions.delete.bind(sessions);
    sessions.set = (workerId: string, token: symbol) => {
      const held = sessions.has(workerId);
      set(workerId, token);
      if (!held && !this.#swapping) this.#presenceBegins(workerId);
      return sessions;
    };
    sessions.delete = (workerId: string) => {
      const deleted = remove(workerId);
      if (deleted) this.#presenceEnds(workerId);
      return deleted;
    };
  }

  /** Whether the database is down (every call fails). */
  get down(): boolean {
    return this.#down;
  }

  /** Whether some session holds the worker id's lock, as `liveSessions` would say. */
  held(workerId: string): boolean {
    return this.#sessions.has(workerId);
  }

  /**
   * The shared store as the database serves it: while the database restarts, every call fails (a
   * retryable outage). Wraps the store every worker reaches.
   */
  databaseLayer(store: LeaseStore): LeaseStore {
    return interceptLeaseStore(store, (operation, options, call) => {
      if (this.#down) {
        return Promise.reject(
          new LeaseStoreError(
            'simulated database',
            `${operation}: the database is restarting (the connection was refused)`,
            { retryable: true, code: 'LEASE_STORE_UNAVAILABLE' },
          ),
        );
      }
      return call(options);
    });
  }

  /** A process of `workerId`; `processLayer` records the sessions it attaches. */
  process(workerId: string): SessionProcess {
    return new SessionProcess(workerId);
  }

  /**
   * One process's store (inside its crash layer): each session it attaches is remembered, and one that
   * the database answered after the process died ends as the process's other sessions do.
   */
  processLayer(process: SessionProcess, store: LeaseStore): LeaseStore {
    return interceptLeaseStore(store, async (operation, options, call) => {
      const result = await call(options);
      if (operation === 'workers.attachSession') {
        const token = this.#sessions.get(process.workerId);
        if (token !== undefined) {
          process.tokens.add(token);
          if (process.endsAt !== null) this.#endAt(process.workerId, token, process.endsAt);
        }
      }
      return result;
    });
  }

  /**
   * The process died: the database ends its sessions after `afterMs` (0: at once — the kernel closed
   * its socket; more: its machine vanished and the database notices only when TCP gives up).
   */
  processDied(process: SessionProcess, afterMs: number): void {
    process.endsAt = this.#clock.monotonicNow() + afterMs;
    for (const token of process.tokens) this.#endAt(process.workerId, token, process.endsAt);
  }

  /**
   * The connection of the session holding `workerId`'s lock is cut while its process runs: the worker's
   * session is gone at once (its checks say so); the database ends the lock after `noticedAfterMs`
   * (0: at once; until then `liveSessions` still lists the worker and it cannot attach again). False
   * when no session held the lock.
   */
  cut(workerId: string, noticedAfterMs: number): boolean {
    if (!this.#sessions.has(workerId)) return false;
    this.cuts += 1;
    if (noticedAfterMs <= 0) {
      this.#sessions.delete(workerId);
      return true;
    }
    // The lock stays held by a server-side session nobody can reach any more.
    const orphan = Symbol(`${workerId} (cut)`);
    this.#swapping = true;
    try {
      this.#sessions.set(workerId, orphan);
    } finally {
      this.#swapping = false;
    }
    this.#endAt(workerId, orphan, this.#clock.monotonicNow() + noticedAfterMs);
    return true;
  }

  /** A database restart: every session ends at once, and every call fails for `downMs`. Returns how many ended. */
  restart(downMs: number): number {
    this.restarts += 1;
    const ended = [...this.#sessions.keys()];
    for (const workerId of ended) this.#sessions.delete(workerId);
    this.#down = true;
    void this.#clock.sleep(downMs).then(() => {
      this.#down = false;
    });
    return ended.length;
  }

  /** Brings the database back at once (the end of a run's chaos). */
  up(): void {
    this.#down = false;
  }

  /**
   * Whether `taker` could have judged `owner` dead at `at`: an end of `owner`'s lock while one of
   * `taker`'s own sessions held its lock (the taker saw it held, then gone — a judgement needs both,
   * with the taker's session in place), and the lock held again no earlier than `staleMs` before `at`
   * (a judgement lasts until a later check sees the lock held again; checks take time and can fail).
   */
  couldJudgeDead(taker: string, owner: string, at: number, staleMs: number): boolean {
    const own = (this.#presences.get(taker) ?? []).filter(
      (presence) => presence.from <= at && (presence.to === null || presence.to >= at - staleMs),
    );
    const theirs = this.#presences.get(owner) ?? [];
    for (const [index, presence] of theirs.entries()) {
      const endedAt = presence.to;
      if (endedAt === null || endedAt > at) continue;
      const heldAgainAt = theirs[index + 1]?.from ?? null;
      if (heldAgainAt !== null && heldAgainAt < at - staleMs) continue;
      if (own.some((mine) => mine.from <= endedAt && (mine.to === null || endedAt < mine.to))) return true;
    }
    return false;
  }

  #endAt(workerId: string, token: symbol, atMs: number): void {
    const end = (): void => {
      if (this.#sessions.get(workerId) === token) this.#sessions.delete(workerId);
    };
    const delay = atMs - this.#clock.monotonicNow();
    if (delay <= 0) end();
    else void this.#clock.sleep(delay).then(end);
  }

  #presenceBegins(workerId: string): void {
    const presences = this.#presences.get(workerId) ?? [];
    presences.push({ from: this.#clock.monotonicNow(), to: null });
    this.#presences.set(workerId, presences);
  }

  #presenceEnds(workerId: string): void {
    const last = this.#presences.get(workerId)?.at(-1);
    if (last !== undefined && last.to === null) last.to = this.#clock.monotonicNow();
  }
}
