import type { HashKeyRange } from '@kcl/core';
import { hashKeyRange, KclError, uniqueSorted } from '@kcl/core';

/**
 * A shard as kcl plans with it: the facts ListShards reports, independent of the AWS SDK's classes so
 * this package never depends on the SDK. A shard is closed once it has an ending sequence number.
 */
export interface ShardDescription {
  readonly shardId: string;
  /** The shard this one was split from, or the first parent of a merge. */
  readonly parentShardId?: string | undefined;
  /** The second parent of a merge. */
  readonly adjacentParentShardId?: string | undefined;
  readonly hashKeyRange: HashKeyRange;
  /** Decimal sequence number of the shard's first record slot. */
  readonly startingSequenceNumber: string;
  /** Decimal sequence number after which the shard is closed; absent while the shard is open. */
  readonly endingSequenceNumber?: string | undefined;
}

/** A child shard as GetRecords (or SubscribeToShard) reports it at the end of a closed shard. */
export interface ChildShardDescription {
  readonly shardId: string;
  /** Both parents for a merge, one for a split. */
  readonly parentShardIds: readonly string[];
  /** Null when the response carried no hash key range (some emulators leave it out). */
  readonly hashKeyRange: HashKeyRange | null;
}

/** The subset of the SDK's `HashKeyRange` shape that kcl reads. */
export interface KinesisHashKeyRangeShape {
  readonly StartingHashKey?: string | undefined;
  readonly EndingHashKey?: string | undefined;
}

/** The subset of the AWS SDK's `Shard` (ListShards) that kcl reads; SDK objects satisfy it as they are. */
export interface KinesisShardShape {
  readonly ShardId?: string | undefined;
  readonly ParentShardId?: string | undefined;
  readonly AdjacentParentShardId?: string | undefined;
  readonly HashKeyRange?: KinesisHashKeyRangeShape | undefined;
  readonly SequenceNumberRange?:
    | {
        readonly StartingSequenceNumber?: string | undefined;
        readonly EndingSequenceNumber?: string | undefined;
      }
    | undefined;
}

/** The subset of the AWS SDK's `ChildShard` (GetRecords `ChildShards`) that kcl reads. */
export interface KinesisChildShardShape {
  readonly ShardId?: string | undefined;
  readonly ParentShards?: readonly string[] | undefined;
  readonly HashKeyRange?: KinesisHashKeyRangeShape | undefined;
}

/**
 * A Kinesis response that lacks a field kcl needs (a shard without an id, hash key range or starting
 * sequence number). Not retryable as such: the same response would fail the same way.
 */
export class ShardDescriptionError extends KclError {
  constructor(message: string) {
    super('KINESIS_FAILURE', `@kcl/shard-graph: ${message}`);
  }
}

const DIGITS = /^[0-9]+$/;

/**
 * Converts one ListShards entry. Throws `ShardDescriptionError` when a required field is missing and
 * `InvalidHashKeyError` (from @kcl/core) when a hash key is malformed, because planning leases from a
 * half-described shard could leave part of the stream unread.
 */
export function shardFromKinesis(shard: KinesisShardShape): ShardDescription {
  const shardId = shard.ShardId;
  if (shardId === undefined || shardId === '') {
    throw new ShardDescriptionError(
      'a ListShards entry has no ShardId; list the shards again, and report it if it persists',
    );
  }
  const range = shard.HashKeyRange;
  if (range?.StartingHashKey === undefined || range.EndingHashKey === undefined) {
    throw new ShardDescriptionError(
      `shard ${JSON.stringify(shardId)} has no HashKeyRange; list the shards again, and report it if it persists`,
    );
  }
  const starting = shard.SequenceNumberRange?.StartingSequenceNumber;
  if (starting === undefined || !DIGITS.test(starting)) {
    throw new ShardDescriptionError(
      `shard ${JSON.stringify(shardId)} has no valid StartingSequenceNumber (${JSON.stringify(starting)}); list the shards again`,
    );
  }
  const ending = shard.SequenceNumberRange?.EndingSequenceNumber;
  if (ending !== undefined && !DIGITS.test(ending)) {
    throw new ShardDescriptionError(
      `shard ${JSON.stringify(shardId)} has an invalid EndingSequenceNumber ${JSON.stringify(ending)}`,
    );
  }
  return {
    shardId,
    parentShardId: emptyToUndefined(shard.ParentShardId),
    adjacentParentShardId: emptyToUndefined(shard.AdjacentParentShardId),
    hashKeyRange: hashKeyRange(range.StartingHashKey, range.EndingHashKey),
    startingSequenceNumber: starting,
    endingSequenceNumber: ending,
  };
}

/** Converts a whole ListShards result (all pages concatenated). */
export function shardsFromKinesis(shards: Iterable<KinesisShardShape>): ShardDescription[] {
  return Array.from(shards, shardFromKinesis);
}

/**
 * Converts one GetRecords `ChildShards` entry. A child without parents is rejected: the shard-end
 * rules need the parents to order processing, and the Java KCL refuses such a child as well.
 */
export function childShardFromKinesis(child: KinesisChildShardShape): ChildShardDescription {
  const shardId = child.ShardId;
  if (shardId === undefined || shardId === '') {
    throw new ShardDescriptionError(
      'a ChildShards entry has no ShardId; treat the response as invalid and read it again',
    );
  }
  const parents = (child.ParentShards ?? []).filter((parent) => parent !== '');
  if (parents.length === 0) {
    throw new ShardDescriptionError(
      `child shard ${JSON.stringify(shardId)} lists no parent shards; treat the response as invalid and read it again`,
    );
  }
  const range = child.HashKeyRange;
  return {
    shardId,
    parentShardIds: uniqueSorted(parents),
    hashKeyRange:
      range?.StartingHashKey === undefined || range.EndingHashKey === undefined
        ? null
        : hashKeyRange(range.StartingHashKey, range.EndingHashKey),
  };
}

/** A shard is closed (will receive no more records) once it has an ending sequence number. */
export function isShardClosed(shard: Pick<ShardDescription, 'endingSequenceNumber'>): boolean {
  return shard.endingSequenceNumber !== undefined;
}

/** The parent and adjacent parent of a shard, without duplicates: what its lease records as parents. */
export function parentShardIdsOf(
  shard: Pick<ShardDescription, 'parentShardId' | 'adjacentParentShardId'>,
): readonly string[] {
  const parents: string[] = [];
  if (shard.parentShardId !== undefined && shard.parentShardId !== '') parents.push(shard.parentShardId);
  if (
    shard.adjacentParentShardId !== undefined &&
    shard.adjacentParentShardId !== '' &&
    shard.adjacentParentShardId !== shard.parentShardId
  ) {
    parents.push(shard.adjacentParentShardId);
  }
  return parents;
}

/**
 * Orders shards by starting sequence number, then shard id: the order leases are created in, so a crash
 * half-way through creation leaves a consistent prefix (parents before their children).
 */
export function compareShardsByStart(
  a: Pick<ShardDescription, 'shardId' | 'startingSequenceNumber'>,
  b: Pick<ShardDescription, 'shardId' | 'startingSequenceNumber'>,
): number {
  const first = BigInt(a.startingSequenceNumber);
  const second = BigInt(b.startingSequenceNumber);
  if (first !== second) return first < second ? -1 : 1;
  if (a.shardId === b.shardId) return 0;
  return a.shardId < b.shardId ? -1 : 1;
}

function emptyToUndefined(value: string | undefined): string | undefined {
  return value === undefined || value === '' ? undefined : value;
}
