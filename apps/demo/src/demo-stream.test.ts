import { describe, expect, it } from 'vitest';
import {
  demoStreamNames,
  hashRangeLabel,
  leaseLabel,
  MAX_HASH_KEY,
  type ShardInfo,
  shardKey,
  shardLabel,
  shardOfLeaseKey,
  shardsToMerge,
  shardToSplit,
  shortShardId,
  shortStreamName,
} from './demo-stream.js';

const QUARTER = (MAX_HASH_KEY + 1n) / 4n;

function shard(id: number, start: bigint, end: bigint, closed = false): ShardInfo {
  return {
    shardId: `shardId-${String(id).padStart(12, '0')}`,
    parentShardIds: [],
    startingHashKey: start,
    endingHashKey: end,
    closed,
  };
}

/** Four shards as Kinesis creates them: even quarters, the last one ending at the top of the key space. */
const FOUR = [
  shard(0, 0n, QUARTER - 1n),
  shard(1, QUARTER, 2n * QUARTER - 1n),
  shard(2, 2n * QUARTER, 3n * QUARTER - 1n),
  shard(3, 3n * QUARTER, MAX_HASH_KEY),
];

describe('shardToSplit', () => {
  it('takes the first of the widest open shards in hash order', () => {
    expect(shardToSplit([...FOUR].reverse())?.shardId).toBe('shardId-000000000000');
  });

  it('skips closed shards and prefers a wider one', () => {
    const shards = [
      shard(0, 0n, QUARTER - 1n, true),
      shard(4, 0n, QUARTER / 2n - 1n),
      shard(5, QUARTER / 2n, QUARTER - 1n),
      shard(1, QUARTER, MAX_HASH_KEY),
    ];
    expect(shardToSplit(shards)?.shardId).toBe('shardId-000000000001');
  });

  it('gives nothing without open shards', () => {
    expect(shardToSplit([shard(0, 0n, MAX_HASH_KEY, true)])).toBeUndefined();
  });
});

describe('shardsToMerge', () => {
  it('merges the narrowest pair of adjacent open shards', () => {
    const shards = [
      shard(0, 0n, QUARTER - 1n, true),
      shard(4, 0n, QUARTER / 2n - 1n),
      shard(5, QUARTER / 2n, QUARTER - 1n),
      ...FOUR.slice(1),
    ];
    expect(shardsToMerge(shards)?.map((candidate) => candidate.shardId)).toEqual([
      'shardId-000000000004',
      'shardId-000000000005',
    ]);
  });

  it('only merges shards whose ranges touch', () => {
    const gap = [shard(0, 0n, QUARTER - 1n), shard(2, 2n * QUARTER, MAX_HASH_KEY)];
    expect(shardsToMerge(gap)).toBeUndefined();
    expect(shardsToMerge([shard(0, 0n, MAX_HASH_KEY)])).toBeUndefined();
  });

  it('takes the last pair in hash order when all pairs are equally wide', () => {
    expect(shardsToMerge(FOUR)?.map((candidate) => candidate.shardId)).toEqual([
      'shardId-000000000002',
      'shardId-000000000003',
    ]);
  });
});

describe('labels', () => {
  it('shortens shard ids and shows hash ranges as shares of the key space', () => {
    expect(shortShardId('shardId-000000000012')).toBe('shard-12');
    expect(shortShardId('shardId-000000000000')).toBe('shard-0');
    expect(shortShardId('other')).toBe('other');
    expect(FOUR.map(hashRangeLabel)).toEqual(['0–25%', '25–50%', '50–75%', '75–100%']);
    expect(hashRangeLabel(shard(4, 0n, QUARTER / 2n - 1n))).toBe('0–12.5%');
  });
});

describe('stream names', () => {
  it('keeps the one stream kcl-demo and numbers several', () => {
    expect(demoStreamNames(1)).toEqual(['kcl-demo']);
    expect(demoStreamNames(3)).toEqual(['kcl-demo-1', 'kcl-demo-2', 'kcl-demo-3']);
    expect(shortStreamName('kcl-demo-2')).toBe('demo-2');
    expect(shortStreamName('orders')).toBe('orders');
  });

  it('reads the stream and shard of single- and multi-stream lease keys', () => {
    expect(shardOfLeaseKey('shardId-000000000004')).toEqual({
      streamName: null,
      shardId: 'shardId-000000000004',
    });
    const multi = shardOfLeaseKey('123456789012:kcl-demo-2:1700000000:shardId-000000000004');
    expect(multi).toEqual({ streamName: 'kcl-demo-2', shardId: 'shardId-000000000004' });
    expect(shardKey(multi)).toBe('kcl-demo-2/shardId-000000000004');
    expect(shardKey({ streamName: null, shardId: 'shardId-000000000004' })).toBe('shardId-000000000004');
  });

  it('labels a shard with its short stream name only when there are several streams', () => {
    expect(shardLabel({ streamName: null, shardId: 'shardId-000000000004' })).toBe('shard-4');
    expect(shardLabel({ streamName: 'kcl-demo-2', shardId: 'shardId-000000000004' })).toBe('demo-2/shard-4');
    expect(leaseLabel('shardId-000000000004')).toBe('shard-4');
    expect(leaseLabel('123456789012:kcl-demo-1:1700000000:shardId-000000000010')).toBe('demo-1/shard-10');
  });
});
