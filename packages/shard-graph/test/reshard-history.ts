import type { HashKeyRange } from '@kcl/core';
import { MAX_HASH_KEY } from '@kcl/core';
import fc from 'fast-check';
import type { ChildShardDescription, ShardDescription } from '../src/index.js';

/** One shard of a simulated stream history. Time is a step counter; a shard is alive in [bornAt, closedAt). */
export interface HistoryShard {
  readonly shardId: string;
  readonly parents: readonly string[];
  readonly range: HashKeyRange;
  readonly bornAt: number;
  closedAt: number | null;
  readonly children: string[];
}

export interface ReshardHistory {
  readonly shards: ReadonlyMap<string, HistoryShard>;
  /** The time after the last operation. */
  readonly end: number;
}

/** A reshard operation: split the `pick`-th open shard at `fraction`, or merge the `pick`-th adjacent pair. */
export type ReshardOperation =
  | { readonly kind: 'split'; readonly pick: number; readonly fraction: number }
  | { readonly kind: 'merge'; readonly pick: number };

export const reshardOperationArbitrary: fc.Arbitrary<ReshardOperation> = fc.oneof(
  fc.record({
    kind: fc.constant('split' as const),
    pick: fc.nat(1_000),
    fraction: fc.integer({ min: 1, max: 999 }),
  }),
  fc.record({ kind: fc.constant('merge' as const), pick: fc.nat(1_000) }),
);

export const reshardHistoryArbitrary: fc.Arbitrary<ReshardHistory> = fc
  .tuple(fc.integer({ min: 1, max: 4 }), fc.array(reshardOperationArbitrary, { maxLength: 14 }))
  .map(([roots, operations]) => buildHistory(roots, operations));

/** Replays operations from `roots` shards that split the key space evenly. Impossible operations are skipped. */
export function buildHistory(roots: number, operations: readonly ReshardOperation[]): ReshardHistory {
  const shards = new Map<string, HistoryShard>();
  let next = 0;
  const add = (parents: readonly string[], range: HashKeyRange, bornAt: number): HistoryShard => {
    const shard: HistoryShard = {
      shardId: `shardId-${String(next++).padStart(3, '0')}`,
      parents,
      range,
      bornAt,
      closedAt: null,
      children: [],
    };
    shards.set(shard.shardId, shard);
    for (const parent of parents) shards.get(parent)?.children.push(shard.shardId);
    return shard;
  };
  const size = (MAX_HASH_KEY + 1n) / BigInt(roots);
  for (let index = 0; index < roots; index++) {
    const start = size * BigInt(index);
    add(
      [],
      { startingHashKey: start, endingHashKey: index === roots - 1 ? MAX_HASH_KEY : start + size - 1n },
      0,
    );
  }
  let time = 0;
  for (const operation of operations) {
    const open = [...shards.values()]
      .filter((shard) => shard.closedAt === null)
      .sort((a, b) => (a.range.startingHashKey < b.range.startingHashKey ? -1 : 1));
    time += 1;
    if (operation.kind === 'split') {
      const target = open[operation.pick % open.length] as HistoryShard;
      const width = target.range.endingHashKey - target.range.startingHashKey;
      if (width < 1n) continue;
      const at = target.range.startingHashKey + 1n + ((width - 1n) * BigInt(operation.fraction)) / 1000n;
      target.closedAt = time;
      add([target.shardId], { startingHashKey: target.range.startingHashKey, endingHashKey: at - 1n }, time);
      add([target.shardId], { startingHashKey: at, endingHashKey: target.range.endingHashKey }, time);
    } else {
      if (open.length < 2) continue;
      const index = operation.pick % (open.length - 1);
      const left = open[index] as HistoryShard;
      const right = open[index + 1] as HistoryShard;
      left.closedAt = time;
      right.closedAt = time;
      add(
        [left.shardId, right.shardId],
        { startingHashKey: left.range.startingHashKey, endingHashKey: right.range.endingHashKey },
        time,
      );
    }
  }
  return { shards, end: time + 1 };
}

/** The shard as ListShards describes it. Sequence numbers grow with time, so creation order follows lineage. */
export function describe(shard: HistoryShard): ShardDescription {
  const [parent, adjacent] = shard.parents;
  return {
    shardId: shard.shardId,
    parentShardId: parent,
    adjacentParentShardId: adjacent,
    hashKeyRange: shard.range,
    startingSequenceNumber: String(shard.bornAt * 1_000_000 + Number(shard.shardId.slice(8))),
    endingSequenceNumber: shard.closedAt === null ? undefined : String(shard.closedAt * 1_000_000 - 1),
  };
}

/** The shards a ListShards call with a position filter returns: those alive at `time`. */
export function shardsAliveAt(history: ReshardHistory, time: number): ShardDescription[] {
  return [...history.shards.values()]
    .filter((shard) => shard.bornAt <= time && (shard.closedAt === null || shard.closedAt > time))
    .map(describe);
}

/** Every shard, as an unfiltered ListShards returns them. */
export function allShards(history: ReshardHistory): ShardDescription[] {
  return [...history.shards.values()].map(describe);
}

/** The ChildShards of the last GetRecords response of a closed shard. */
export function childShardsOf(history: ReshardHistory, shardId: string): ChildShardDescription[] {
  const shard = history.shards.get(shardId) as HistoryShard;
  return shard.children.map((childId) => {
    const child = history.shards.get(childId) as HistoryShard;
    return { shardId: child.shardId, parentShardIds: child.parents, hashKeyRange: child.range };
  });
}
