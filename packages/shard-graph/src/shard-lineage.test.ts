import { describe, expect, it } from 'vitest';
import { shard, slice, workedExampleShards } from '../test/fixtures.js';
import { ShardLineage } from './shard-lineage.js';

describe('ShardLineage', () => {
  const lineage = new ShardLineage(workedExampleShards());

  it('knows parents, children, descendants and ancestors', () => {
    expect(lineage.size).toBe(11);
    expect(lineage.parentsOf('shardId-8')).toEqual(['shardId-6', 'shardId-7']);
    expect(lineage.childrenOf('shardId-5')).toEqual(['shardId-10', 'shardId-9']);
    expect(lineage.childrenOf('shardId-4')).toEqual([]);
    expect(lineage.descendantsOf('shardId-0')).toEqual(['shardId-6', 'shardId-8']);
    expect(lineage.ancestorsOf('shardId-8')).toEqual([
      'shardId-0',
      'shardId-1',
      'shardId-2',
      'shardId-3',
      'shardId-6',
      'shardId-7',
    ]);
    expect(lineage.parentsOf('unknown')).toEqual([]);
  });

  it('separates open and closed shards', () => {
    expect(lineage.openShards().map((s) => s.shardId)).toEqual([
      'shardId-4',
      'shardId-8',
      'shardId-9',
      'shardId-10',
    ]);
    expect(lineage.closedShards()).toHaveLength(7);
    expect(lineage.isOpen('shardId-4')).toBe(true);
    expect(lineage.isOpen('shardId-5')).toBe(false);
    expect(lineage.isOpen('missing')).toBe(false);
  });

  it('ignores parents that are no longer listed', () => {
    const partial = new ShardLineage([
      shard('child', { parents: ['aged-out'], range: slice(0, 1), start: 5 }),
    ]);
    expect(partial.parentsOf('child')).toEqual([]);
    expect(partial.ancestorsOf('child')).toEqual([]);
  });

  it('finds open children of open parents (a listing that raced a reshard)', () => {
    expect(lineage.inconsistentShardIds()).toEqual([]);
    const raced = new ShardLineage([
      shard('parent', { range: slice(0, 1), start: 1 }),
      shard('left', { parents: ['parent'], range: slice(0, 2), start: 2 }),
      shard('right', { parents: ['parent'], range: slice(1, 2), start: 3 }),
    ]);
    expect(raced.inconsistentShardIds()).toEqual(['left', 'right']);
  });

  it('keeps the first description of a shard listed twice', () => {
    const twice = new ShardLineage([
      shard('a', { range: slice(0, 1), start: 1 }),
      shard('a', { range: slice(0, 1), start: 1, end: 2 }),
    ]);
    expect(twice.size).toBe(1);
    expect(twice.isOpen('a')).toBe(true);
  });
});
