import type { Lease } from '@kcl/core';
import { ConfigurationError, ExtendedSequenceNumber, shardIdOfLeaseKey } from '@kcl/core';
import { leaseKeyForShard } from '@kcl/shard-graph';

/** Where `kcl reset --to` moves checkpoints. */
export type ResetTarget =
  | { readonly kind: 'TRIM_HORIZON' }
  | { readonly kind: 'LATEST' }
  | { readonly kind: 'timestamp'; readonly timestamp: Date }
  | { readonly kind: 'sequence'; readonly sequenceNumber: string };

/** An ISO 8601 date and time with its offset from UTC (`Z` or `±hh:mm`). */
const TIME_WITH_OFFSET = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2})$/i;

/**
 * Whether `value` reads as a date and time without an offset from UTC: `Date.parse` would take it as
 * this machine's local time, which is seldom what an operator replaying from a log line means.
 */
export function isTimeWithoutOffset(value: string): boolean {
  const trimmed = value.trim();
  return /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}/.test(trimmed) && !TIME_WITH_OFFSET.test(trimmed);
}

/**
 * Reads `--to`: TRIM_HORIZON, LATEST, an ISO 8601 time with a date, a time and an offset
 * (`2026-03-01T12:00:00Z`, `2026-03-01T13:00:00+01:00`), or a sequence number (digits). Null when it
 * is none of them (a time without an offset included).
 */
export function parseResetTarget(value: string): ResetTarget | null {
  const upper = value.trim().toUpperCase();
  if (upper === 'TRIM_HORIZON') return { kind: 'TRIM_HORIZON' };
  if (upper === 'LATEST') return { kind: 'LATEST' };
  if (/^[0-9]+$/.test(value.trim())) return { kind: 'sequence', sequenceNumber: value.trim() };
  if (TIME_WITH_OFFSET.test(value.trim())) {
    const time = Date.parse(value.trim());
    if (Number.isFinite(time) && time > 0) return { kind: 'timestamp', timestamp: new Date(time) };
  }
  return null;
}

export function describeResetTarget(target: ResetTarget): string {
  switch (target.kind) {
    case 'TRIM_HORIZON':
    case 'LATEST':
      return target.kind;
    case 'timestamp':
      return target.timestamp.toISOString();
    case 'sequence':
      return `sequence number ${target.sequenceNumber}`;
  }
}

/** The checkpoint a reset writes. */
export function checkpointOfTarget(target: ResetTarget): ExtendedSequenceNumber {
  switch (target.kind) {
    case 'TRIM_HORIZON':
      return ExtendedSequenceNumber.TRIM_HORIZON;
    case 'LATEST':
      return ExtendedSequenceNumber.LATEST;
    case 'timestamp':
      return ExtendedSequenceNumber.atTimestamp(target.timestamp);
    case 'sequence':
      // The checkpoint is the last record processed: reading resumes after it.
      return ExtendedSequenceNumber.of(target.sequenceNumber);
  }
}

export interface PlannedReset {
  readonly leaseKey: string;
  readonly owner: string | null;
  readonly leaseCounter: number;
  readonly from: string;
  readonly to: string;
  /** `reset`: written; `unchanged`: already there and not held; `skipped`: left alone, `reason` says why. */
  readonly action: 'reset' | 'unchanged' | 'skipped';
  readonly reason: string | null;
}

export interface ResetPlan {
  readonly target: string;
  readonly leases: readonly PlannedReset[];
  /** Selected shards that have no lease. */
  readonly missing: readonly string[];
  /**
   * Parent shards of replayed leases that have no lease any more (cleaned up after they finished): a
   * replay (TRIM_HORIZON or a time) cannot reach their records, so it does not replay them. Their
   * shard ids, in order; empty for LATEST and a sequence number.
   */
  readonly parentsWithoutLease: readonly string[];
  /** The warning to show when `parentsWithoutLease` is not empty; null otherwise. */
  readonly parentsWarning: string | null;
}

/**
 * Which checkpoints a reset changes. Every lease of the selection is reset — finished (SHARD_END)
 * ones too when replaying (TRIM_HORIZON, a time), so the children wait for their parents again and
 * records stay in order across a reshard. LATEST leaves finished shards finished (there is nothing
 * after their end to skip to). A sequence number belongs to one shard: it needs exactly one `--shard`
 * matching exactly one lease (a bare shard id can match a lease of each stream of a multi-stream
 * application); otherwise a `ConfigurationError` lists the matching lease keys.
 */
export function planReset(
  leases: readonly Lease[],
  target: ResetTarget,
  shards: readonly string[] = [],
): ResetPlan {
  const selected = new Set(shards);
  const matches = (lease: Lease): boolean =>
    selected.size === 0 || selected.has(lease.leaseKey) || selected.has(shardIdOfLeaseKey(lease.leaseKey));
  const checkpoint = checkpointOfTarget(target);
  const chosen = leases.filter(matches);
  if (target.kind === 'sequence' && chosen.length > 1) {
    // A sequence number belongs to one stream's shard: written into another stream's lease of the
    // same shard id, Kinesis rejects the iterator and that shard stalls.
    throw new ConfigurationError('kcl reset', [
      `--to <sequence number> names a position in one shard, but --shard ${[...selected].join(', ')} matches ${chosen.length} leases (${chosen.map((lease) => lease.leaseKey).join(', ')}): give the full lease key of one of them`,
    ]);
  }
  const planned = chosen.map((lease): PlannedReset => {
    const base = {
      leaseKey: lease.leaseKey,
      owner: lease.owner,
      leaseCounter: lease.leaseCounter,
      from: lease.checkpoint.toString(),
      to: checkpoint.toString(),
    };
    if (target.kind === 'LATEST' && lease.checkpoint.isShardEnd) {
      return {
        ...base,
        to: base.from,
        action: 'skipped',
        reason: 'finished: nothing after its end to skip to',
      };
    }
    // Only a lease nobody holds is already there: a live owner of a lease whose stored checkpoint
    // equals the target (a TRIM_HORIZON lease read but not checkpointed yet) has moved past it, and
    // its next checkpoint would silently undo the reset, so it is reset (fenced) like the others. A
    // lease an interrupted reset left with its placeholder owner is written again (and released).
    const same =
      lease.checkpoint.equals(checkpoint) && lease.pendingCheckpoint === null && lease.owner === null;
    return { ...base, action: same ? 'unchanged' : 'reset', reason: null };
  });
  const found = new Set(planned.flatMap((entry) => [entry.leaseKey, shardIdOfLeaseKey(entry.leaseKey)]));
  const parentsWithoutLease = replays(target) ? cleanedUpParents(leases, chosen) : [];
  return {
    target: describeResetTarget(target),
    leases: planned,
    missing: [...selected].filter((shard) => !found.has(shard)),
    parentsWithoutLease,
    parentsWarning:
      parentsWithoutLease.length === 0
        ? null
        : `records of cleaned-up parent shards ${parentsWithoutLease.join(', ')}${target.kind === 'timestamp' ? ` from ${target.timestamp.toISOString()} on` : ''} are not replayed: their leases are gone, so no worker reads them again`,
  };
}

function replays(target: ResetTarget): boolean {
  return target.kind === 'TRIM_HORIZON' || target.kind === 'timestamp';
}

/** The parents named by `chosen` leases that have no lease among `all`, sorted, each once. */
function cleanedUpParents(all: readonly Lease[], chosen: readonly Lease[]): string[] {
  const keys = new Set(all.map((lease) => lease.leaseKey));
  const gone = new Set<string>();
  for (const lease of chosen) {
    for (const parent of lease.parentShardIds) {
      const key = leaseKeyForShard(parent, lease.streamIdentifier ?? undefined);
      if (!keys.has(key)) gone.add(key);
    }
  }
  return [...gone].sort();
}
