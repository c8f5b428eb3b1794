import type { ExtendedSequenceNumber } from './extended-sequence-number.js';
import type { HashKeyRange } from './hash-key.js';
import type { Lease, LeaseHandoff, LeaseInit } from './lease.js';

/**
 * Why a conditional write did not apply. A lost race is an ordinary outcome in a fleet, so it is a
 * value, never an exception.
 * - `already-exists`: `create` found a lease with that key.
 * - `not-found`: the lease does not exist (deleted, or never created).
 * - `counter-mismatch`: someone else wrote the lease since the caller read it.
 * - `handoff-mismatch`: the counter matched, but the lease's hand-off state is not what the call needs
 *   (`requestHandoff`: the owner is not `from`, or another hand-off is in progress; `completeHandoff`:
 *   no hand-off is in progress).
 */
export type LostRaceReason = 'already-exists' | 'not-found' | 'counter-mismatch' | 'handoff-mismatch';

export type LeaseWriteResult =
  | { readonly ok: true; readonly lease: Lease }
  | { readonly ok: false; readonly reason: LostRaceReason };

/**
 * One lease's outcome in a batched write. Besides a write or a lost race, a single lease's write can
 * fail (throttled, timed out) while the others apply: `failed` means this lease's write may or may not
 * have applied, so the caller must not assume either.
 */
export type LeaseBatchWriteResult =
  | LeaseWriteResult
  | { readonly ok: false; readonly reason: 'failed'; readonly error: unknown };

/** Options every store call takes. */
export interface StoreCallOptions {
  /**
   * Aborts the call: the store stops waiting for it (and cancels it where its client can) and rejects
   * with the signal's reason. A write already sent may still apply.
   */
  readonly signal?: AbortSignal;
}

/** Options of `workers.list`. */
export interface WorkerListOptions extends StoreCallOptions {
  /**
   * false: list the workers without their metadata (each record's `metadata` is empty), which the
   * store then does not read: a worker's metadata can hold kilobytes (its per-lease figures), and the
   * runtime lists every worker every rebalance interval but needs only ids and heartbeats. Default true.
   * A store that predates the option returns the metadata anyway.
   */
  readonly metadata?: boolean;
}

export interface LeaseRenewal {
  readonly leaseKey: string;
  /** The counter the caller last saw. */
  readonly leaseCounter: number;
}

export interface CheckpointUpdate {
  readonly checkpoint: ExtendedSequenceNumber;
  /** A prepared checkpoint to keep beside the committed one; null or absent clears it. */
  readonly pendingCheckpoint?: ExtendedSequenceNumber | null;
}

/** The only unconditional lease writes: facts about the shard, not about who holds it. */
export interface LeaseMetaUpdate {
  readonly childShardIds?: readonly string[];
  readonly hashKeyRange?: HashKeyRange;
}

/** A worker's entry in the registry. */
export interface WorkerRecord {
  readonly workerId: string;
  /**
   * Increments on every heartbeat. Liveness is judged by an observer seeing this value change on its
   * own monotonic clock, never by comparing `lastHeartbeatAt` across machines.
   */
  readonly heartbeat: number;
  /** The writer's wall clock at its last heartbeat, for people reading the registry. */
  readonly lastHeartbeatAt: Date;
  readonly metadata: Readonly<Record<string, string>>;
}

/** Left on a store whose leases were copied elsewhere, so workers still pointed at it stop. */
export interface MigrationMarker {
  /** A description of the new store, shown in the error a stale worker raises. */
  readonly migratedTo: string;
  readonly migratedAt: Date;
}

/** A stored lease row that could not be read, as a scan reports it. */
export interface UnreadableLeaseRow {
  readonly leaseKey: string;
  readonly problem: string;
}

/** Everything an application's lease table holds, as tools read it. */
export interface LeaseTableScan {
  /** The readable leases, in lease-key order. */
  readonly leases: readonly Lease[];
  /** Rows that exist but could not be read (`leases.list` skips them). */
  readonly unreadable: readonly UnreadableLeaseRow[];
  /**
   * Rows the table holds that are not leases, counted by kind (the Java KCL 3.x keeps its worker
   * metrics and coordinator state in the lease table); absent where a table holds only leases.
   */
  readonly otherRows?: Readonly<Record<string, number>>;
}

/** What a store can do beyond the contract's minimum. The runtime branches on these, never on a store's name. */
export interface LeaseStoreCapabilities {
  /** `renewMany` renews any number of leases in one round trip (otherwise it loops over `renew`). */
  readonly batchRenew: boolean;
  /** `get` and `list` read the latest committed state (always true for SQL, opt-in on DynamoDB). */
  readonly consistentReads: boolean;
  /**
   * The store can tie a worker's liveness to a database session: `workers.attachSession` and
   * `workers.liveSessions` exist exactly when this is true (PostgreSQL and MySQL/MariaDB; not SQLite
   * or DynamoDB). A store written against an older core may lack the field: read it as false.
   */
  readonly sessionLiveness: boolean;
  /**
   * The store can write a checkpoint in the same database transaction as the application's own writes
   * (`leases.checkpointInTransaction` exists exactly when this is true): `@kcl/store-sql` on every
   * database; not DynamoDB, the memory store or the migrating store. Absent reads as false.
   */
  readonly transactionalCheckpoint?: boolean;
}

/**
 * What the application's part of a transactional checkpoint decided: the checkpoint to write in the
 * same transaction, and the value to hand back to the caller.
 */
export interface TransactionalCheckpointDecision<T> {
  readonly update: CheckpointUpdate;
  readonly value: T;
}

/**
 * The application's part of a transactional checkpoint: runs its writes on `transaction` (a handle of
 * the store's database, e.g. a Kysely `Transaction` for `@kcl/store-sql`) and says which checkpoint
 * to write. Throwing rolls the whole transaction back.
 */
export type TransactionalCheckpointWork<T> = (
  transaction: unknown,
) => Promise<TransactionalCheckpointDecision<T>>;

export type TransactionalCheckpointResult<T> =
  | { readonly ok: true; readonly lease: Lease; readonly value: T }
  | { readonly ok: false; readonly reason: LostRaceReason };

/**
 * The hot path: what a worker does to leases while it runs. Every write but `updateMeta` and `delete`
 * is conditional on the counter the caller last saw and increments it; a lost race resolves to
 * `{ ok: false, reason }`; only infrastructure failures reject, with a `LeaseStoreError` whose
 * `retryable` says whether to try again.
 */
export interface LeaseRepository {
  /** Every lease of this application, in lease-key order (`compareLeaseKeys`: UTF-8 byte order). */
  list(options?: StoreCallOptions): Promise<Lease[]>;
  get(leaseKey: string, options?: StoreCallOptions): Promise<Lease | null>;
  /** Creates the lease unless one with its key exists (`already-exists`). */
  create(lease: LeaseInit, options?: StoreCallOptions): Promise<LeaseWriteResult>;
  /** Increments the counter, proving the owner is alive. A hand-off in progress stays, and is returned. */
  renew(leaseKey: string, leaseCounter: number, options?: StoreCallOptions): Promise<LeaseWriteResult>;
  /**
   * Renews several leases; one result per lease, in the order given. A lease whose own write failed
   * gets a `failed` result while the others report theirs: the call rejects only when it cannot
   * report per lease (the whole request failed). See `capabilities.batchRenew`.
   */
  renewMany(renewals: readonly LeaseRenewal[], options?: StoreCallOptions): Promise<LeaseBatchWriteResult[]>;
  /**
   * Sets the owner (counting an owner switch when it changes from another owner), clears any hand-off
   * and increments the counter.
   */
  take(
    leaseKey: string,
    leaseCounter: number,
    owner: string,
    options?: StoreCallOptions,
  ): Promise<LeaseWriteResult>;
  /**
   * Clears the owner (evicts it) and any hand-off and increments the counter, so another worker can take
   * the lease at once.
   */
  release(leaseKey: string, leaseCounter: number, options?: StoreCallOptions): Promise<LeaseWriteResult>;
  /**
   * Asks the owner to hand the lease over (cooperative hand-off): records `handoff` on the lease when its
   * counter is `leaseCounter`, its owner is `handoff.from` and no hand-off is in progress. The counter is
   * not incremented, so the owner's renewals go on undisturbed and return the lease with the request;
   * `take` (a steal) and `release` still apply and clear it, which is how a hand-off that does not
   * complete in time falls back. Rejects `from === to` and empty names with a `ConfigurationError`.
   */
  requestHandoff(
    leaseKey: string,
    leaseCounter: number,
    handoff: LeaseHandoff,
    options?: StoreCallOptions,
  ): Promise<LeaseWriteResult>;
  /**
   * The owner ends a hand-off it was asked for, once its processor has checkpointed: the lease goes to
   * `handoff.to`, the hand-off is cleared, the owner switch is counted and the counter incremented.
   * Conditional on the counter and on a hand-off being in progress (`handoff-mismatch` otherwise).
   */
  completeHandoff(
    leaseKey: string,
    leaseCounter: number,
    options?: StoreCallOptions,
  ): Promise<LeaseWriteResult>;
  /**
   * Writes the checkpoint (and pending checkpoint), resets the owner-switch count, increments the
   * counter. A hand-off in progress stays.
   */
  checkpoint(
    leaseKey: string,
    leaseCounter: number,
    update: CheckpointUpdate,
    options?: StoreCallOptions,
  ): Promise<LeaseWriteResult>;
  /**
   * Exactly-once processing (present exactly when `capabilities.transactionalCheckpoint` is true):
   * opens a transaction on the store's database, runs `work` in it, then writes the checkpoint `work`
   * decided in the same transaction — as `checkpoint` does, conditional on `leaseCounter` and
   * incrementing it — and commits. When the counter does not match (another worker took the lease) or
   * the lease is gone, the transaction is rolled back, so none of `work`'s writes persist, and the
   * lost race is the result. When `work` throws, or `options.signal` has aborted by the time `work`
   * resolves, the transaction is rolled back and the call rejects with that error. The lease row is
   * written last, so it is locked only between that write and the commit.
   */
  checkpointInTransaction?<T>(
    leaseKey: string,
    leaseCounter: number,
    work: TransactionalCheckpointWork<T>,
    options?: StoreCallOptions,
  ): Promise<TransactionalCheckpointResult<T>>;
  /** Records child shard ids and/or the hash key range. Unconditional; the counter is unchanged. Null if absent. */
  updateMeta(leaseKey: string, update: LeaseMetaUpdate, options?: StoreCallOptions): Promise<Lease | null>;
  /** Unconditional. Deleting an absent lease is not an error. */
  delete(leaseKey: string, options?: StoreCallOptions): Promise<void>;
}

/**
 * A worker's liveness session (`workers.attachSession`): a lock, keyed by the application and the
 * worker id, held by a database session that the store keeps open for the worker alone. The database
 * ends the session — and so releases the lock — when the connection ends: the worker's process died
 * (its operating system closes the socket at once), the database restarted, an administrator ended
 * the session, or the network cut the connection (noticed only once TCP gives up on it, which can
 * take long when the peer vanished without closing it).
 *
 * A session therefore says "the process that attached me may be gone" sooner than lease expiry does,
 * but it is not a lease: it can be lost while its worker lives on (a network blip, a database restart),
 * and it can outlive a dead worker for as long as the database has not noticed the connection ended.
 * Callers use it only to act sooner (take a dead worker's leases before they expire); counter fencing
 * stays the safety mechanism, so a worker that was wrongly thought dead loses at most the leases taken
 * from it, never a record.
 */
export interface WorkerSession {
  readonly workerId: string;
  /**
   * Whether the session still holds its lock: one round trip to the database (on the session's own
   * connection where the store has one). Resolves false — it never rejects for this — when the session
   * is gone: closed, its connection lost or ended by the server; once false, always false (attach a new
   * session). Rejects only when it cannot tell for another reason (a wrapper's deadline, say).
   */
  check(options?: StoreCallOptions): Promise<boolean>;
  /**
   * Releases the lock and the session's connection. Idempotent; never rejects for a session that is
   * already gone. After it resolves, `liveSessions` no longer lists the worker (unless another session
   * of the same worker id holds the lock).
   */
  close(): Promise<void>;
}

/** Which workers are alive, and what they publish about themselves. */
export interface WorkerRegistry {
  /** Records that the worker is alive, incrementing its heartbeat; `metadata` replaces the last one. */
  heartbeat(
    workerId: string,
    metadata?: Readonly<Record<string, string>>,
    options?: StoreCallOptions,
  ): Promise<WorkerRecord>;
  /** Every worker of this application, in worker id order; `options.metadata: false` leaves metadata out. */
  list(options?: WorkerListOptions): Promise<WorkerRecord[]>;
  /** Removes the worker (on a graceful stop). Removing an absent worker is not an error. */
  remove(workerId: string, options?: StoreCallOptions): Promise<void>;
  /**
   * Opens a liveness session for `workerId` (present exactly when `capabilities.sessionLiveness` is
   * true; see `WorkerSession`). The session holds a connection of its own for as long as it is open —
   * never one that other calls of the store share — so each attached worker costs the database one
   * connection. One session per worker id: when another session holds the worker's lock (the same worker
   * id running twice, or a restarted worker whose previous session the database has not seen end yet),
   * it rejects with a retryable `LeaseStoreError` of code `WORKER_SESSION_HELD`; try again later. A call
   * whose signal aborts leaves no session behind (one attached meanwhile is closed).
   */
  attachSession?(workerId: string, options?: StoreCallOptions): Promise<WorkerSession>;
  /**
   * Which of `workerIds` have a session holding their lock right now, on the store's ordinary
   * connections (one statement). A worker is absent when it never attached a session (a store or a
   * release without sessions), closed it, or its session ended: only a worker seen present and then
   * absent is a sign of death, and a present one is not proof of life (see `WorkerSession`). Present
   * exactly when `capabilities.sessionLiveness` is true.
   */
  liveSessions?(workerIds: readonly string[], options?: StoreCallOptions): Promise<ReadonlySet<string>>;
}

/** What tools and the start of a worker need: the schema, migration markers, whole-table scans. */
export interface LeaseStoreAdministration {
  /** Creates the tables (or checks they exist, and upgrades them) idempotently. Safe from many workers at once. */
  ensureSchema(options?: StoreCallOptions): Promise<void>;
  getMigrationMarker(options?: StoreCallOptions): Promise<MigrationMarker | null>;
  /** Sets the marker, or clears it with null. */
  setMigrationMarker(marker: MigrationMarker | null, options?: StoreCallOptions): Promise<void>;
  /** Every row of this application, the unreadable ones reported instead of failing the scan. */
  scan(options?: StoreCallOptions): Promise<LeaseTableScan>;
}

/**
 * The lease store contract, version 2: one object with a role per kind of caller, the way Kysely
 * separates a driver from its introspector. A store package's factory returns all roles; a caller uses
 * the role it needs (the runtime: `leases` and `workers`; tools: `admin`).
 *
 * A store instance is bound to one application. Many applications may share one physical table; a
 * store never reads, counts or writes another application's rows. `close()` releases what the store
 * opened itself (connections it created from a URL); a client or database handed to its factory stays
 * the caller's to close.
 */
export interface LeaseStore {
  readonly specificationVersion: 'v2';
  readonly applicationName: string;
  readonly capabilities: LeaseStoreCapabilities;
  /** Names the backing store and table, for logs and error messages. Contains no secrets. */
  readonly description: string;
  readonly leases: LeaseRepository;
  readonly workers: WorkerRegistry;
  readonly admin: LeaseStoreAdministration;
  /** Releases what the store opened itself. Idempotent. */
  close(): Promise<void>;
}
