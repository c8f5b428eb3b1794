import type { ExtendedSequenceNumber } from './extended-sequence-number.js';
import type { HashKeyRange } from './hash-key.js';
import type { Lease, LeaseInit } from './lease.js';

/**
 * Why a conditional write did not apply. A lost race is an ordinary outcome in a fleet, so it is a
 * value, never an exception.
 * - `already-exists`: `createLeaseIfAbsent` found a lease with that key.
 * - `not-found`: the lease does not exist (deleted, or never created).
 * - `counter-mismatch`: someone else wrote the lease since the caller read it.
 */
export type LostRaceReason = 'already-exists' | 'not-found' | 'counter-mismatch';

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

/** What a store can do beyond the contract's minimum. The runtime branches on these, never on a store's name. */
export interface LeaseStoreCapabilities {
  /** `renewLeases` renews any number of leases in one round trip (otherwise it loops over `renewLease`). */
  readonly batchRenew: boolean;
  /** `getLease` and `listLeases` read the latest committed state (always true for SQL, opt-in on DynamoDB). */
  readonly consistentReads: boolean;
}

/**
 * The lease store contract, version 1.
 *
 * A store instance is bound to one application. Many applications may share one physical table; a
 * store never reads, counts or writes another application's rows.
 *
 * Every mutating lease operation except `updateLeaseMeta` and `deleteLease` is conditional on the
 * counter the caller last saw and increments it. A lost race resolves to `{ ok: false, reason }`; only
 * infrastructure failures reject, with a `LeaseStoreError` whose `retryable` says whether to try again.
 */
export interface LeaseStore {
  readonly specificationVersion: 'v1';
  readonly applicationName: string;
  readonly capabilities: LeaseStoreCapabilities;
  /** Names the backing store and table, for logs and error messages. Contains no secrets. */
  readonly description: string;

  /** Creates the tables (or checks they exist) idempotently. Safe to run from many workers at once. */
  ensureSchema(): Promise<void>;

  /** Creates the lease unless one with its key exists (`already-exists`). */
  createLeaseIfAbsent(lease: LeaseInit): Promise<LeaseWriteResult>;
  getLease(leaseKey: string): Promise<Lease | null>;
  /** Every lease of this application, in lease-key order (`compareLeaseKeys`: UTF-8 byte order). */
  listLeases(): Promise<Lease[]>;

  /** Increments the counter, proving the owner is alive. */
  renewLease(leaseKey: string, leaseCounter: number): Promise<LeaseWriteResult>;
  /**
   * Renews several leases; one result per lease, in the order given. A lease whose own write failed
   * gets a `failed` result while the others report theirs: the call rejects only when it cannot
   * report per lease (the whole request failed). See `capabilities.batchRenew`.
   */
  renewLeases(renewals: readonly LeaseRenewal[]): Promise<LeaseBatchWriteResult[]>;
  /** Sets the owner (counting an owner switch when it changes) and increments the counter. */
  takeLease(leaseKey: string, leaseCounter: number, owner: string): Promise<LeaseWriteResult>;
  /** Clears the owner and increments the counter, so another worker can take the lease at once. */
  releaseLease(leaseKey: string, leaseCounter: number): Promise<LeaseWriteResult>;
  /** Writes the checkpoint (and pending checkpoint), resets the owner-switch count, increments the counter. */
  updateCheckpoint(
    leaseKey: string,
    leaseCounter: number,
    update: CheckpointUpdate,
  ): Promise<LeaseWriteResult>;
  /** Records child shard ids and/or the hash key range. Unconditional; the counter is unchanged. Null if absent. */
  updateLeaseMeta(leaseKey: string, update: LeaseMetaUpdate): Promise<Lease | null>;
  /** Unconditional. Deleting an absent lease is not an error. */
  deleteLease(leaseKey: string): Promise<void>;

  /** Records that the worker is alive, incrementing its heartbeat. */
  heartbeatWorker(workerId: string, metadata?: Readonly<Record<string, string>>): Promise<WorkerRecord>;
  listWorkers(): Promise<WorkerRecord[]>;
  /** Removes the worker from the registry (on a graceful stop). Removing an absent worker is not an error. */
  removeWorker(workerId: string): Promise<void>;

  getMigrationMarker(): Promise<MigrationMarker | null>;
  /** Sets the marker, or clears it with null. */
  setMigrationMarker(marker: MigrationMarker | null): Promise<void>;
}
