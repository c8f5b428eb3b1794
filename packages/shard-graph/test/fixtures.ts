import type { HashKeyRange, Lease } from '@kcl/core';
import { ExtendedSequenceNumber, leaseFromInit, MAX_HASH_KEY } from '@kcl/core';
import type { ShardDescription } from '../src/index.js';

/** The key space cut into `parts` equal slices; slice `index` (0-based) as a range. */
export function slice(index: number, parts: number): HashKeyRange {
  const size = (MAX_HASH_KEY + 1n) / BigInt(parts);
  const start = size * BigInt(index);
  const end = index === parts - 1 ? MAX_HASH_KEY : start + size - 1n;
  return { startingHashKey: start, endingHashKey: end };
}

/** The union of two adjacent ranges. */
export function join(a: HashKeyRange, b: HashKeyRange): HashKeyRange {
  return { startingHashKey: a.startingHashKey, endingHashKey: b.endingHashKey };
}

export function range(start: bigint, end: bigint): HashKeyRange {
  return { startingHashKey: start, endingHashKey: end };
}

export interface ShardSpec {
  readonly parents?: readonly string[];
  readonly range: HashKeyRange;
  readonly start: number | string;
  readonly end?: number | string;
}

/** A shard description from a short spec. */
export function shard(shardId: string, spec: ShardSpec): ShardDescription {
  const [parent, adjacent] = spec.parents ?? [];
  return {
    shardId,
    parentShardId: parent,
    adjacentParentShardId: adjacent,
    hashKeyRange: spec.range,
    startingSequenceNumber: String(spec.start),
    endingSequenceNumber: spec.end === undefined ? undefined : String(spec.end),
  };
}

export interface LeaseSpec {
  readonly checkpoint?: string;
  readonly parents?: readonly string[];
  readonly children?: readonly string[];
  readonly range?: HashKeyRange | null;
  readonly owner?: string | null;
  readonly counter?: number;
}

/** A lease from a short spec (checkpoint TRIM_HORIZON unless given). */
export function lease(leaseKey: string, spec: LeaseSpec = {}): Lease {
  return leaseFromInit({
    leaseKey,
    checkpoint: ExtendedSequenceNumber.of(spec.checkpoint ?? 'TRIM_HORIZON'),
    parentShardIds: spec.parents ?? [],
    childShardIds: spec.children ?? [],
    hashKeyRange: spec.range ?? null,
    owner: spec.owner ?? null,
    leaseCounter: spec.counter ?? 0,
  });
}

/**
 * The topology of the Java KCL's documented example, reconstructed so its stated results hold:
 *
 * ```
 * 0 1 2 3 4   5      shards 0-5 (0, 1, 2, 3 and 5 are closed; 4 stays open throughout)
 * \ / \ / |   |
 *  6   7  4   5      6 = merge(0, 1), 7 = merge(2, 3); both closed later
 *   \ /   |  / \
 *    8    4 9  10    8 = merge(6, 7); 9 and 10 = split(5); 4, 8, 9, 10 are open
 * ```
 * Hash ranges: six equal slices for 0-5; 6 = 0∪1, 7 = 2∪3, 8 = 6∪7; 9 and 10 halve slice 5.
 */
export function workedExampleShards(): ShardDescription[] {
  const s = (index: number) => slice(index, 6);
  const five = s(5);
  const middle = (five.startingHashKey + five.endingHashKey) / 2n;
  return [
    shard('shardId-0', { range: s(0), start: 100, end: 199 }),
    shard('shardId-1', { range: s(1), start: 101, end: 199 }),
    shard('shardId-2', { range: s(2), start: 102, end: 199 }),
    shard('shardId-3', { range: s(3), start: 103, end: 199 }),
    shard('shardId-4', { range: s(4), start: 104 }),
    shard('shardId-5', { range: five, start: 105, end: 299 }),
    shard('shardId-6', {
      parents: ['shardId-0', 'shardId-1'],
      range: join(s(0), s(1)),
      start: 200,
      end: 299,
    }),
    shard('shardId-7', {
      parents: ['shardId-2', 'shardId-3'],
      range: join(s(2), s(3)),
      start: 201,
      end: 299,
    }),
    shard('shardId-8', { parents: ['shardId-6', 'shardId-7'], range: join(s(0), s(3)), start: 300 }),
    shard('shardId-9', { parents: ['shardId-5'], range: range(five.startingHashKey, middle), start: 301 }),
    shard('shardId-10', {
      parents: ['shardId-5'],
      range: range(middle + 1n, five.endingHashKey),
      start: 302,
    }),
  ];
}
