import type { HashKeyRange, Lease, LeaseHandoff, MigrationMarker, WorkerRecord } from '@kcl/core';
import { ExtendedSequenceNumber, hashKeyRange, uniqueSorted } from '@kcl/core';
import { invalidLeaseRow, invalidStoredValue } from './sql-errors.js';
import type { SqlRow } from './sql-types.js';

/** The lease table's columns, in the order the store writes and selects them. */
export const LEASE_COLUMNS = [
  'application_name',
  'lease_key',
  'lease_owner',
  'lease_counter',
  'checkpoint_sequence_number',
  'checkpoint_sub_sequence_number',
  'pending_checkpoint_sequence_number',
  'pending_checkpoint_sub_sequence_number',
  'owner_switches_since_checkpoint',
  'parent_shard_ids',
  'child_shard_ids',
  'hash_key_range_start',
  'hash_key_range_end',
  'stream_identifier',
  'handoff_from',
  'handoff_to',
  'handoff_deadline_ms',
] as const;

export type LeaseColumn = (typeof LEASE_COLUMNS)[number];

/** The values of one lease row, ready to be bound as parameters. */
export type LeaseRowValues = Readonly<Record<LeaseColumn, string | number | null>>;

export const WORKER_COLUMNS = [
  'application_name',
  'worker_id',
  'heartbeat',
  'last_heartbeat_at_ms',
  'metadata',
] as const;

export type WorkerColumn = (typeof WORKER_COLUMNS)[number];

export interface WorkerRowValues {
  readonly application_name: string;
  readonly worker_id: string;
  readonly last_heartbeat_at_ms: number;
  /** JSON text of the metadata object, or null to keep the stored metadata (`{}` for a new worker). */
  readonly metadata: string | null;
}

/** What a new worker's row holds when its first heartbeat carries no metadata. */
export const EMPTY_METADATA_JSON = '{}';

/**
 * The row that stores `lease`. Sequence numbers and hash keys are kept as decimal text (they exceed
 * every SQL integer type), shard id sets as JSON arrays of strings, sorted, a hand-off deadline as
 * epoch milliseconds.
 */
export function leaseToRowValues(applicationName: string, lease: Lease): LeaseRowValues {
  return {
    application_name: applicationName,
    lease_key: lease.leaseKey,
    lease_owner: lease.owner,
    lease_counter: lease.leaseCounter,
    checkpoint_sequence_number: lease.checkpoint.sequenceNumber,
    checkpoint_sub_sequence_number: lease.checkpoint.subSequenceNumber,
    pending_checkpoint_sequence_number: lease.pendingCheckpoint?.sequenceNumber ?? null,
    pending_checkpoint_sub_sequence_number: lease.pendingCheckpoint?.subSequenceNumber ?? null,
    owner_switches_since_checkpoint: lease.ownerSwitchesSinceCheckpoint,
    parent_shard_ids: shardIdsToJson(lease.parentShardIds),
    child_shard_ids: shardIdsToJson(lease.childShardIds),
    hash_key_range_start: lease.hashKeyRange?.startingHashKey.toString() ?? null,
    hash_key_range_end: lease.hashKeyRange?.endingHashKey.toString() ?? null,
    stream_identifier: lease.streamIdentifier,
    handoff_from: lease.handoff?.from ?? null,
    handoff_to: lease.handoff?.to ?? null,
    handoff_deadline_ms: lease.handoff?.deadline?.getTime() ?? null,
  };
}

export function shardIdsToJson(shardIds: readonly string[]): string {
  return JSON.stringify(uniqueSorted(shardIds));
}

/** What reading one stored lease row found: the lease, or why the row cannot be read. */
export type LeaseRowReading =
  | { readonly ok: true; readonly lease: Lease }
  | {
      readonly ok: false;
      readonly leaseKey: string;
      readonly problem: string;
      /** The parse error behind the problem, if any. */
      readonly cause?: unknown;
    };

/** Thrown by a column reader inside `readLeaseRow`, which turns it into an unreadable reading. */
class UnreadableColumn {
  constructor(
    readonly problem: string,
    readonly cause: unknown,
  ) {}
}

type Fail = (problem: string, cause?: unknown) => never;

const failColumn: Fail = (problem, cause) => {
  throw new UnreadableColumn(problem, cause);
};

/**
 * The lease a stored row holds, or the problem that keeps it from being read (never both, never a
 * guess): a scan reports such a row, `leaseFromRow` throws for it.
 */
export function readLeaseRow(row: SqlRow): LeaseRowReading {
  const leaseKey = row.lease_key;
  if (typeof leaseKey !== 'string') {
    return { ok: false, leaseKey: String(leaseKey), problem: `lease_key is ${describe(leaseKey)}, not text` };
  }
  try {
    return { ok: true, lease: decodeLease(row, leaseKey) };
  } catch (error) {
    if (!(error instanceof UnreadableColumn)) throw error;
    return {
      ok: false,
      leaseKey,
      problem: error.problem,
      ...(error.cause === undefined ? {} : { cause: error.cause }),
    };
  }
}

/**
 * The lease a stored row holds. Throws `LeaseDataError` naming the lease key when any column cannot
 * be read, so a damaged row is reported instead of misread.
 */
export function leaseFromRow(row: SqlRow, store: string): Lease {
  if (typeof row.lease_key !== 'string') {
    throw invalidStoredValue(
      store,
      `a lease row has a lease_key that is not text (${describe(row.lease_key)})`,
    );
  }
  const reading = readLeaseRow(row);
  if (reading.ok) return reading.lease;
  throw invalidLeaseRow(store, reading.leaseKey, reading.problem, reading.cause);
}

function decodeLease(row: SqlRow, leaseKey: string): Lease {
  const owner = row.lease_owner;
  if (owner !== null && typeof owner !== 'string')
    failColumn(`lease_owner is ${describe(owner)}, not text or NULL`);
  const streamIdentifier = row.stream_identifier;
  if (streamIdentifier !== null && typeof streamIdentifier !== 'string') {
    failColumn(`stream_identifier is ${describe(streamIdentifier)}, not text or NULL`);
  }

  const leaseCounter =
    readCount(row.lease_counter) ?? failColumn(`lease_counter is ${describe(row.lease_counter)}`);
  const ownerSwitches =
    readCount(row.owner_switches_since_checkpoint) ??
    failColumn(`owner_switches_since_checkpoint is ${describe(row.owner_switches_since_checkpoint)}`);

  const checkpoint = readPosition(
    row.checkpoint_sequence_number,
    row.checkpoint_sub_sequence_number,
    'checkpoint',
    failColumn,
  );
  let pendingCheckpoint: ExtendedSequenceNumber | null = null;
  if (
    row.pending_checkpoint_sequence_number !== null ||
    row.pending_checkpoint_sub_sequence_number !== null
  ) {
    pendingCheckpoint = readPosition(
      row.pending_checkpoint_sequence_number,
      row.pending_checkpoint_sub_sequence_number ?? 0,
      'pending checkpoint',
      failColumn,
    );
  }

  return Object.freeze({
    leaseKey,
    owner: owner as string | null,
    leaseCounter,
    checkpoint,
    pendingCheckpoint,
    ownerSwitchesSinceCheckpoint: ownerSwitches,
    parentShardIds: Object.freeze(readShardIds(row.parent_shard_ids, 'parent_shard_ids', failColumn)),
    childShardIds: Object.freeze(readShardIds(row.child_shard_ids, 'child_shard_ids', failColumn)),
    hashKeyRange: readHashKeyRange(row.hash_key_range_start, row.hash_key_range_end, failColumn),
    streamIdentifier: streamIdentifier as string | null,
    handoff: readHandoff(row.handoff_from, row.handoff_to, row.handoff_deadline_ms, failColumn),
  });
}

/** The worker a registry row holds. */
export function workerFromRow(row: SqlRow, store: string): WorkerRecord {
  const workerId = row.worker_id;
  if (typeof workerId !== 'string') {
    throw invalidStoredValue(store, `a worker row has a worker_id that is not text (${describe(workerId)})`);
  }
  const fail = (problem: string, cause?: unknown): never => {
    throw invalidStoredValue(store, `worker ${JSON.stringify(workerId)} cannot be read: ${problem}`, cause);
  };
  const heartbeat = readCount(row.heartbeat) ?? fail(`heartbeat is ${describe(row.heartbeat)}`);
  const lastHeartbeatAtMs =
    readInteger(row.last_heartbeat_at_ms) ??
    fail(`last_heartbeat_at_ms is ${describe(row.last_heartbeat_at_ms)}`);
  return Object.freeze({
    workerId,
    heartbeat,
    lastHeartbeatAt: new Date(lastHeartbeatAtMs),
    metadata: readMetadata(row.metadata, fail),
  });
}

/** The marker of an application-state row, or null when none is set. */
export function migrationMarkerFromRow(row: SqlRow, store: string): MigrationMarker | null {
  if (row.migrated_to === null || row.migrated_to === undefined) return null;
  const fail = (problem: string): never => {
    throw invalidStoredValue(store, `the migration marker cannot be read: ${problem}`);
  };
  if (typeof row.migrated_to !== 'string') fail(`migrated_to is ${describe(row.migrated_to)}`);
  const migratedAtMs =
    readInteger(row.migrated_at_ms) ?? fail(`migrated_at_ms is ${describe(row.migrated_at_ms)}`);
  return Object.freeze({ migratedTo: row.migrated_to as string, migratedAt: new Date(migratedAtMs) });
}

/** A metadata object as JSON text. */
export function metadataToJson(metadata: Readonly<Record<string, string>>): string {
  return JSON.stringify(metadata);
}

function readPosition(
  sequenceNumber: unknown,
  subSequenceNumber: unknown,
  what: string,
  fail: Fail,
): ExtendedSequenceNumber {
  if (typeof sequenceNumber !== 'string') {
    return fail(`the ${what} sequence number is ${describe(sequenceNumber)}, not text`);
  }
  const sub = readInteger(subSequenceNumber);
  if (sub === null) return fail(`the ${what} sub-sequence number is ${describe(subSequenceNumber)}`);
  try {
    return ExtendedSequenceNumber.of(sequenceNumber, sub);
  } catch (error) {
    return fail(`the ${what} ${JSON.stringify(sequenceNumber)}/${sub} is not a position`, error);
  }
}

function readShardIds(value: unknown, column: string, fail: Fail): string[] {
  if (typeof value !== 'string') return fail(`${column} is ${describe(value)}, not JSON text`);
  let parsed: unknown;
  try {
    parsed = JSON.parse(value);
  } catch (error) {
    return fail(`${column} is not JSON: ${JSON.stringify(truncate(value))}`, error);
  }
  if (!Array.isArray(parsed) || !parsed.every((item) => typeof item === 'string')) {
    return fail(`${column} is not a JSON array of strings: ${JSON.stringify(truncate(value))}`);
  }
  return [...uniqueSorted(parsed as string[])];
}

function readHashKeyRange(start: unknown, end: unknown, fail: Fail): HashKeyRange | null {
  if (start === null && end === null) return null;
  if (typeof start !== 'string' || typeof end !== 'string') {
    return fail(`the hash key range is ${describe(start)} … ${describe(end)}: both or neither must be set`);
  }
  try {
    return Object.freeze(hashKeyRange(start, end));
  } catch (error) {
    return fail(`the hash key range ${JSON.stringify(start)} … ${JSON.stringify(end)} is invalid`, error);
  }
}

function readHandoff(from: unknown, to: unknown, deadline: unknown, fail: Fail): LeaseHandoff | null {
  if (from === null && to === null && deadline === null) return null;
  if (typeof from !== 'string' || typeof to !== 'string') {
    return fail(
      `the hand-off is from ${describe(from)} to ${describe(to)} (deadline ${describe(deadline)}): handoff_from and handoff_to must both be set, or all three NULL`,
    );
  }
  if (deadline === null) return Object.freeze({ from, to, deadline: null });
  const deadlineMs = readInteger(deadline);
  const date = deadlineMs === null ? null : new Date(deadlineMs);
  if (date === null || Number.isNaN(date.getTime())) {
    return fail(`handoff_deadline_ms is ${describe(deadline)}, not a time in epoch milliseconds`);
  }
  return Object.freeze({ from, to, deadline: date });
}

function readMetadata(value: unknown, fail: Fail): Record<string, string> {
  if (typeof value !== 'string') return fail(`metadata is ${describe(value)}, not JSON text`);
  let parsed: unknown;
  try {
    parsed = JSON.parse(value);
  } catch (error) {
    return fail(`metadata is not JSON: ${JSON.stringify(truncate(value))}`, error);
  }
  if (
    parsed === null ||
    typeof parsed !== 'object' ||
    Array.isArray(parsed) ||
    !Object.values(parsed).every((item) => typeof item === 'string')
  ) {
    return fail(`metadata is not a JSON object of strings: ${JSON.stringify(truncate(value))}`);
  }
  return Object.freeze({ ...(parsed as Record<string, string>) });
}

/**
 * An integer column as a safe JavaScript integer. Drivers return BIGINT as a number (better-sqlite3,
 * mysql2), a decimal string (pg) or a bigint (some configurations); anything else is not a count.
 */
function readInteger(value: unknown): number | null {
  if (typeof value === 'number') return Number.isSafeInteger(value) ? value : null;
  if (typeof value === 'bigint') {
    return value >= BigInt(Number.MIN_SAFE_INTEGER) && value <= BigInt(Number.MAX_SAFE_INTEGER)
      ? Number(value)
      : null;
  }
  if (typeof value === 'string' && /^-?[0-9]+$/.test(value)) {
    const parsed = Number(value);
    return Number.isSafeInteger(parsed) ? parsed : null;
  }
  return null;
}

function readCount(value: unknown): number | null {
  const integer = readInteger(value);
  return integer !== null && integer >= 0 ? integer : null;
}

function describe(value: unknown): string {
  if (value === null) return 'NULL';
  if (value === undefined) return 'missing';
  if (typeof value === 'string') return JSON.stringify(truncate(value));
  if (typeof value === 'number' || typeof value === 'bigint' || typeof value === 'boolean')
    return String(value);
  return `a ${typeof value}`;
}

function truncate(value: string): string {
  return value.length > 80 ? `${value.slice(0, 77)}...` : value;
}
