import { InvalidHashKeyError, MAX_HASH_KEY } from '@kcl/core';
import { describe, expect, it } from 'vitest';
import {
  childShardFromKinesis,
  compareShardsByStart,
  isShardClosed,
  parentShardIdsOf,
  ShardDescriptionError,
  shardFromKinesis,
  shardsFromKinesis,
} from './shard-description.js';

const MAX = MAX_HASH_KEY.toString();

describe('shardFromKinesis', () => {
  it('converts a ListShards entry of the SDK shape', () => {
    expect(
      shardFromKinesis({
        ShardId: 'shardId-000000000002',
        ParentShardId: 'shardId-000000000000',
        AdjacentParentShardId: 'shardId-000000000001',
        HashKeyRange: { StartingHashKey: '0', EndingHashKey: MAX },
        SequenceNumberRange: {
          StartingSequenceNumber: '49590338271490256608559692538361571095921575989136588898',
        },
      }),
    ).toEqual({
      shardId: 'shardId-000000000002',
      parentShardId: 'shardId-000000000000',
      adjacentParentShardId: 'shardId-000000000001',
      hashKeyRange: { startingHashKey: 0n, endingHashKey: MAX_HASH_KEY },
      startingSequenceNumber: '49590338271490256608559692538361571095921575989136588898',
      endingSequenceNumber: undefined,
    });
  });

  it('keeps the ending sequence number of a closed shard', () => {
    const shard = shardFromKinesis({
      ShardId: 'shardId-1',
      HashKeyRange: { StartingHashKey: '0', EndingHashKey: '10' },
      SequenceNumberRange: { StartingSequenceNumber: '1', EndingSequenceNumber: '99' },
    });
    expect(isShardClosed(shard)).toBe(true);
    expect(shard.endingSequenceNumber).toBe('99');
    expect(isShardClosed({ endingSequenceNumber: undefined })).toBe(false);
  });

  it.each([
    ['no ShardId', { HashKeyRange: { StartingHashKey: '0', EndingHashKey: '1' } }, /no ShardId/],
    [
      'no hash range',
      { ShardId: 's', SequenceNumberRange: { StartingSequenceNumber: '1' } },
      /no HashKeyRange/,
    ],
    [
      'no starting sequence number',
      { ShardId: 's', HashKeyRange: { StartingHashKey: '0', EndingHashKey: '1' } },
      /StartingSequenceNumber/,
    ],
    [
      'a non-numeric ending sequence number',
      {
        ShardId: 's',
        HashKeyRange: { StartingHashKey: '0', EndingHashKey: '1' },
        SequenceNumberRange: { StartingSequenceNumber: '1', EndingSequenceNumber: 'x' },
      },
      /EndingSequenceNumber/,
    ],
  ])('rejects an entry with %s', (_name, input, message) => {
    expect(() => shardFromKinesis(input)).toThrow(ShardDescriptionError);
    expect(() => shardFromKinesis(input)).toThrow(message);
  });

  it('rejects malformed hash keys with the core error', () => {
    expect(() =>
      shardFromKinesis({
        ShardId: 's',
        HashKeyRange: { StartingHashKey: '5', EndingHashKey: '4' },
        SequenceNumberRange: { StartingSequenceNumber: '1' },
      }),
    ).toThrow(InvalidHashKeyError);
  });

  it('converts a whole listing', () => {
    const shards = shardsFromKinesis([
      {
        ShardId: 'a',
        HashKeyRange: { StartingHashKey: '0', EndingHashKey: '1' },
        SequenceNumberRange: { StartingSequenceNumber: '1' },
      },
      {
        ShardId: 'b',
        HashKeyRange: { StartingHashKey: '2', EndingHashKey: '3' },
        SequenceNumberRange: { StartingSequenceNumber: '2' },
      },
    ]);
    expect(shards.map((shard) => shard.shardId)).toEqual(['a', 'b']);
  });
});

describe('childShardFromKinesis', () => {
  it('converts a ChildShards entry, sorting and deduplicating parents', () => {
    expect(
      childShardFromKinesis({
        ShardId: 'shardId-3',
        ParentShards: ['shardId-2', 'shardId-1', 'shardId-2'],
        HashKeyRange: { StartingHashKey: '0', EndingHashKey: '99' },
      }),
    ).toEqual({
      shardId: 'shardId-3',
      parentShardIds: ['shardId-1', 'shardId-2'],
      hashKeyRange: { startingHashKey: 0n, endingHashKey: 99n },
    });
  });

  it('accepts a child without hash range (some emulators leave it out)', () => {
    expect(childShardFromKinesis({ ShardId: 'c', ParentShards: ['p'] }).hashKeyRange).toBeNull();
  });

  it('rejects a child without id or without parents', () => {
    expect(() => childShardFromKinesis({ ParentShards: ['p'] })).toThrow(/no ShardId/);
    expect(() => childShardFromKinesis({ ShardId: 'c', ParentShards: [] })).toThrow(/no parent shards/);
    expect(() => childShardFromKinesis({ ShardId: 'c' })).toThrow(ShardDescriptionError);
  });
});

describe('lineage helpers', () => {
  it.each([
    [{}, []],
    [{ parentShardId: 'a' }, ['a']],
    [{ parentShardId: 'a', adjacentParentShardId: 'b' }, ['a', 'b']],
    [{ adjacentParentShardId: 'b' }, ['b']],
    [{ parentShardId: 'a', adjacentParentShardId: 'a' }, ['a']],
    [{ parentShardId: '', adjacentParentShardId: undefined }, []],
  ])('parents of %o are %o', (shard, parents) => {
    expect(parentShardIdsOf(shard)).toEqual(parents);
  });

  it('orders by starting sequence number as a big integer, then by shard id', () => {
    const shards = [
      { shardId: 'b', startingSequenceNumber: '100000000000000000000000000001' },
      { shardId: 'a', startingSequenceNumber: '99999999999999999999999999999' },
      { shardId: 'a2', startingSequenceNumber: '100000000000000000000000000001' },
    ];
    expect(shards.sort(compareShardsByStart).map((shard) => shard.shardId)).toEqual(['a', 'a2', 'b']);
  });
});
