import type { Lease, LeaseInit } from '@kcl/core';
import { ExtendedSequenceNumber } from '@kcl/core';
import { describe, expect, it } from 'vitest';
import { join, lease, range, shard, slice, workedExampleShards } from '../test/fixtures.js';
import type { InitialPosition } from './initial-position.js';
import { planMissingLeases } from './missing-leases.js';
import type { ShardDescription } from './shard-description.js';

function created(
  shards: readonly ShardDescription[],
  leaseKeys: readonly string[],
  initialPosition: InitialPosition,
): Array<[string, string]> {
  const plan = planMissingLeases(
    shards,
    leaseKeys.map((key) => lease(key)),
    { initialPosition },
  );
  if (!plan.ok) throw new Error(plan.message);
  return plan.leases.map((init: LeaseInit) => [init.leaseKey, init.checkpoint.toString()]);
}

const AT_TIMESTAMP: InitialPosition = { timestamp: new Date('2024-01-01T00:00:00Z') };

describe('planMissingLeases: the documented example', () => {
  // Topology (see workedExampleShards): 6 = merge(0,1), 7 = merge(2,3), 8 = merge(6,7), 9 and 10 = split(5);
  // 4 stays open. Open shards: 4, 8, 9, 10.
  const shards = workedExampleShards();
  const existing = ['shardId-4', 'shardId-5', 'shardId-7'];

  it('LATEST creates 6: the merge partner of 7 that no lease descends from, at LATEST', () => {
    expect(created(shards, existing, 'LATEST')).toEqual([['shardId-6', 'LATEST']]);
  });

  it('TRIM_HORIZON creates 0 and 1: the roots above 6, at TRIM_HORIZON', () => {
    expect(created(shards, existing, 'TRIM_HORIZON')).toEqual([
      ['shardId-0', 'TRIM_HORIZON'],
      ['shardId-1', 'TRIM_HORIZON'],
    ]);
  });

  it('AT_TIMESTAMP creates 0 and 1 at AT_TIMESTAMP', () => {
    expect(created(shards, existing, AT_TIMESTAMP)).toEqual([
      ['shardId-0', 'AT_TIMESTAMP'],
      ['shardId-1', 'AT_TIMESTAMP'],
    ]);
  });

  it('carries parents and hash range on the created lease', () => {
    const plan = planMissingLeases(
      shards,
      existing.map((key) => lease(key)),
      { initialPosition: 'LATEST' },
    );
    expect(plan.ok && plan.leases[0]).toEqual({
      leaseKey: 'shardId-6',
      checkpoint: ExtendedSequenceNumber.LATEST,
      parentShardIds: ['shardId-0', 'shardId-1'],
      hashKeyRange: join(slice(0, 6), slice(1, 6)),
    });
  });
});

describe('planMissingLeases: other cases', () => {
  const shards = workedExampleShards();

  it.each([
    // Leases 3, 4, 5: 2 is the missing merge partner of 3 (under 7); 6 is the non-descendant side of 8.
    [
      'LATEST',
      ['shardId-3', 'shardId-4', 'shardId-5'],
      [
        ['shardId-2', 'LATEST'],
        ['shardId-6', 'LATEST'],
      ],
    ],
    [
      'TRIM_HORIZON',
      ['shardId-3', 'shardId-4', 'shardId-5'],
      [
        ['shardId-0', 'TRIM_HORIZON'],
        ['shardId-1', 'TRIM_HORIZON'],
        ['shardId-2', 'TRIM_HORIZON'],
      ],
    ],
    [
      AT_TIMESTAMP,
      ['shardId-3', 'shardId-4', 'shardId-5'],
      [
        ['shardId-0', 'AT_TIMESTAMP'],
        ['shardId-1', 'AT_TIMESTAMP'],
        ['shardId-2', 'AT_TIMESTAMP'],
      ],
    ],
    // Every open shard leased: nothing to do.
    ['TRIM_HORIZON', ['shardId-4', 'shardId-8', 'shardId-9', 'shardId-10'], []],
    // Leases on the current generation only: descendants of leased shards get nothing.
    ['LATEST', ['shardId-4', 'shardId-6', 'shardId-7', 'shardId-9', 'shardId-10'], []],
    // Only 4 leased. LATEST: the open shards with no leased ancestor start at LATEST.
    [
      'LATEST',
      ['shardId-4'],
      [
        ['shardId-8', 'LATEST'],
        ['shardId-9', 'LATEST'],
        ['shardId-10', 'LATEST'],
      ],
    ],
    // TRIM_HORIZON: the roots are created instead, so the whole history is read in order.
    [
      'TRIM_HORIZON',
      ['shardId-4'],
      [
        ['shardId-0', 'TRIM_HORIZON'],
        ['shardId-1', 'TRIM_HORIZON'],
        ['shardId-2', 'TRIM_HORIZON'],
        ['shardId-3', 'TRIM_HORIZON'],
        ['shardId-5', 'TRIM_HORIZON'],
      ],
    ],
  ] as const)('position %o with leases %o creates %o', (position, leaseKeys, expected) => {
    expect(created(shards, leaseKeys, position)).toEqual(expected);
  });

  it('treats parents that aged out of the stream as absent', () => {
    const listed = [
      shard('b', { parents: ['gone'], range: slice(0, 2), start: 10 }),
      shard('c', { parents: ['gone'], range: slice(1, 2), start: 11 }),
    ];
    expect(created(listed, ['c'], 'TRIM_HORIZON')).toEqual([['b', 'TRIM_HORIZON']]);
    expect(created(listed, ['c'], 'LATEST')).toEqual([['b', 'LATEST']]);
  });

  it('refuses a listing with open children of open parents', () => {
    const raced = [
      shard('p', { range: slice(0, 1), start: 1 }),
      shard('l', { parents: ['p'], range: range(0n, 5n), start: 2 }),
    ];
    const plan = planMissingLeases(raced, [lease('other')], { initialPosition: 'LATEST' });
    expect(plan).toMatchObject({ ok: false, reason: 'inconsistent-shards', inconsistentShardIds: ['l'] });
    const ignoring = planMissingLeases(raced, [lease('other')], {
      initialPosition: 'LATEST',
      ignoreUnexpectedChildShards: true,
    });
    expect(ignoring).toMatchObject({ ok: true, skippedShardIds: ['l'] });
    expect(ignoring.ok && ignoring.leases.map((init) => init.leaseKey)).toEqual(['p']);
  });

  it('uses and produces multi-stream lease keys, ignoring other streams', () => {
    const stream = '123456789012:orders:1600000000';
    const leases: Lease[] = [
      lease(`${stream}:shardId-4`),
      lease(`${stream}:shardId-5`),
      lease(`${stream}:shardId-7`),
      lease('123456789012:other:1600000000:shardId-6'),
    ];
    const plan = planMissingLeases(shards, leases, { initialPosition: 'LATEST', streamIdentifier: stream });
    expect(plan.ok && plan.leases.map((init) => init.leaseKey)).toEqual([`${stream}:shardId-6`]);
  });
});
