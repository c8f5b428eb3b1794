import type { ExtendedSequenceNumber } from './extended-sequence-number.js';
import type { HashKeyRange } from './hash-key.js';
import { hashKeyRangesEqual } from './hash-key.js';

/**
 * A planned move of a lease from one worker to another (cooperative hand-off): the current owner
 * finishes its batch, checkpoints and hands the lease to `to`; fenced by the lease counter like every
 * lease write. A hand-off not completed by `deadline` is void.
 */
export interface LeaseHandoff {
  /** The owner handing the lease over. */
  readonly from: string;
  /** The worker the lease goes to. */
  readonly to: string;
  /** When the hand-off is void (the writer's wall clock); null: no deadline recorded. */
  readonly deadline: Date | null;
}

/**
 * What is wrong with a hand-off a store is asked to record, or null: both names non-empty and
 * different, a deadline that is a valid date or null, and — when `owner` is given (a lease created
 * with a hand-off) — `from` equal to the lease's owner.
 */
export function handoffProblem(handoff: LeaseHandoff, owner?: string | null): string | null {
  if (typeof handoff?.from !== 'string' || handoff.from.length === 0) {
    return "handoff.from must be the lease owner's worker id (a non-empty string)";
  }
  if (typeof handoff.to !== 'string' || handoff.to.length === 0) {
    return "handoff.to must be the receiving worker's id (a non-empty string)";
  }
  if (handoff.from === handoff.to)
    return `a hand-off goes to another worker, but from and to are both ${JSON.stringify(handoff.to)}`;
  if (
    handoff.deadline !== null &&
    !(handoff.deadline instanceof Date && Number.isFinite(handoff.deadline.getTime()))
  ) {
    return 'handoff.deadline must be a valid Date or null';
  }
  if (owner !== undefined && handoff.from !== owner) {
    return `a hand-off comes from the lease's owner, but it names ${JSON.stringify(handoff.from)} and the owner is ${JSON.stringify(owner)}; create it with owner equal to handoff.from`;
  }
  return null;
}

/**
 * One lease per shard. The key is the shard id, or `streamIdentifier:shardId` when one application
 * reads several streams (the Java KCL's multi-stream layout).
 */
export interface Lease {
  readonly leaseKey: string;
  /** The worker holding the lease; null when the lease is free. */
  readonly owner: string | null;
  /** The fencing token: every conditional write names the value it last saw and increments it. */
  readonly leaseCounter: number;
  readonly checkpoint: ExtendedSequenceNumber;
  /** A checkpoint the processor has prepared but not committed (two-phase checkpointing). */
  readonly pendingCheckpoint: ExtendedSequenceNumber | null;
  readonly ownerSwitchesSinceCheckpoint: number;
  /** The parent and adjacent parent of the shard (two for a merge, one for a split). */
  readonly parentShardIds: readonly string[];
  /** Recorded when the shard ends (split or merge). */
  readonly childShardIds: readonly string[];
  readonly hashKeyRange: HashKeyRange | null;
  /** The stream the shard belongs to (`account:stream:creationEpoch`) in a multi-stream application; else null. */
  readonly streamIdentifier: string | null;
  /** A hand-off in progress, or null. */
  readonly handoff: LeaseHandoff | null;
}

/** What `createLeaseIfAbsent` writes. Omitted fields take the values of a brand-new lease. */
export interface LeaseInit {
  readonly leaseKey: string;
  readonly checkpoint: ExtendedSequenceNumber;
  readonly pendingCheckpoint?: ExtendedSequenceNumber | null;
  readonly parentShardIds?: readonly string[];
  readonly childShardIds?: readonly string[];
  readonly hashKeyRange?: HashKeyRange | null;
  /** Normally absent: new leases are free. Migration tools copy an owner only when asked to. */
  readonly owner?: string | null;
  readonly leaseCounter?: number;
  readonly ownerSwitchesSinceCheckpoint?: number;
  readonly streamIdentifier?: string | null;
  readonly handoff?: LeaseHandoff | null;
}

/** The lease a `LeaseInit` describes, with every default filled in. */
export function leaseFromInit(init: LeaseInit): Lease {
  return {
    leaseKey: init.leaseKey,
    owner: init.owner ?? null,
    leaseCounter: init.leaseCounter ?? 0,
    checkpoint: init.checkpoint,
    pendingCheckpoint: init.pendingCheckpoint ?? null,
    ownerSwitchesSinceCheckpoint: init.ownerSwitchesSinceCheckpoint ?? 0,
    parentShardIds: uniqueSorted(init.parentShardIds ?? []),
    childShardIds: uniqueSorted(init.childShardIds ?? []),
    hashKeyRange: init.hashKeyRange ?? null,
    streamIdentifier: init.streamIdentifier ?? null,
    handoff: init.handoff ?? null,
  };
}

/**
 * The order of `listLeases`: UTF-8 byte order, which SQL databases give with a binary collation and
 * which differs from JavaScript's default UTF-16 order for characters outside the BMP.
 */
export function compareLeaseKeys(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));
}

/** Shard ids are kept as sorted sets, as DynamoDB string sets behave. */
export function uniqueSorted(values: readonly string[]): readonly string[] {
  return [...new Set(values)].sort();
}

/** A lease is complete once its shard has been read to the end and checkpointed there. */
export function isLeaseComplete(lease: Pick<Lease, 'checkpoint'>): boolean {
  return lease.checkpoint.isShardEnd;
}

/** The shard id inside a lease key (`shardId-…`, or the last part of a multi-stream key). */
export function shardIdOfLeaseKey(leaseKey: string): string {
  const index = leaseKey.lastIndexOf(':');
  return index === -1 ? leaseKey : leaseKey.slice(index + 1);
}

/** Field-by-field equality, including the counter. */
export function leasesEqual(a: Lease, b: Lease): boolean {
  return (
    a.leaseKey === b.leaseKey &&
    a.owner === b.owner &&
    a.leaseCounter === b.leaseCounter &&
    a.checkpoint.equals(b.checkpoint) &&
    (a.pendingCheckpoint === null || b.pendingCheckpoint === null
      ? a.pendingCheckpoint === b.pendingCheckpoint
      : a.pendingCheckpoint.equals(b.pendingCheckpoint)) &&
    a.ownerSwitchesSinceCheckpoint === b.ownerSwitchesSinceCheckpoint &&
    sameIds(a.parentShardIds, b.parentShardIds) &&
    sameIds(a.childShardIds, b.childShardIds) &&
    hashKeyRangesEqual(a.hashKeyRange, b.hashKeyRange) &&
    a.streamIdentifier === b.streamIdentifier &&
    handoffsEqual(a.handoff, b.handoff)
  );
}

/** Two hand-off states are the same (deadlines compared to the millisecond). */
export function handoffsEqual(a: LeaseHandoff | null, b: LeaseHandoff | null): boolean {
  if (a === null || b === null) return a === b;
  return (
    a.from === b.from &&
    a.to === b.to &&
    (a.deadline === null || b.deadline === null
      ? a.deadline === b.deadline
      : a.deadline.getTime() === b.deadline.getTime())
  );
}

function sameIds(a: readonly string[], b: readonly string[]): boolean {
  if (a.length !== b.length) return false;
  const sortedB = [...b].sort();
  return [...a].sort().every((value, index) => value === sortedB[index]);
}
