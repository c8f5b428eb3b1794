import { ExtendedSequenceNumber, FULL_HASH_KEY_RANGE, MAX_HASH_KEY } from '@kcl/core';
import { describe, expect, it } from 'vitest';
import { range, shard, slice, workedExampleShards } from '../test/fixtures.js';
import { planInitialLeases } from './initial-leases.js';
import { initialCheckpointOf, initialPositionKind, shardFilterFor } from './initial-position.js';

describe('initial position', () => {
  const timestamp = new Date('2024-05-01T00:00:00Z');

  it.each([
    ['TRIM_HORIZON', { Type: 'AT_TRIM_HORIZON' }, 'TRIM_HORIZON'],
    ['LATEST', { Type: 'AT_LATEST' }, 'LATEST'],
    [{ timestamp }, { Type: 'AT_TIMESTAMP', Timestamp: timestamp }, 'AT_TIMESTAMP'],
  ] as const)('%o lists with %o and checkpoints at %s', (position, filter, sentinel) => {
    expect(shardFilterFor(position)).toEqual(filter);
    expect(initialPositionKind(position)).toBe(sentinel);
    expect(initialCheckpointOf(position)).toBe(ExtendedSequenceNumber[sentinel]);
  });
});

describe('planInitialLeases', () => {
  const twoShards = [
    shard('shardId-1', { range: slice(1, 2), start: 200 }),
    shard('shardId-0', { range: slice(0, 2), start: 100 }),
  ];

  it.each([
    ['TRIM_HORIZON', 'TRIM_HORIZON'],
    ['LATEST', 'LATEST'],
    [{ timestamp: new Date(0) }, 'AT_TIMESTAMP'],
  ] as const)(
    'creates a lease per shard at the %o sentinel, ordered by starting sequence number',
    (position, sentinel) => {
      const plan = planInitialLeases(twoShards, { initialPosition: position });
      expect(plan.ok).toBe(true);
      if (!plan.ok) return;
      expect(plan.leases).toEqual([
        {
          leaseKey: 'shardId-0',
          checkpoint: ExtendedSequenceNumber[sentinel],
          parentShardIds: [],
          hashKeyRange: slice(0, 2),
        },
        {
          leaseKey: 'shardId-1',
          checkpoint: ExtendedSequenceNumber[sentinel],
          parentShardIds: [],
          hashKeyRange: slice(1, 2),
        },
      ]);
    },
  );

  it('creates leases for closed shards too, with their parents, ordered parents first', () => {
    // An AT_TIMESTAMP listing can return a closed shard beside the open children of another one.
    const shards = [
      shard('c', { parents: ['a'], range: range(0n, 99n), start: 300 }),
      shard('b', { range: range(100n, MAX_HASH_KEY), start: 150, end: 400 }),
      shard('d', { parents: ['a', 'z'], range: range(0n, 50n), start: 300 }),
    ];
    const plan = planInitialLeases(shards, { initialPosition: { timestamp: new Date(0) } });
    // c and d overlap: coverage only requires the union to be complete.
    expect(plan.ok).toBe(true);
    if (!plan.ok) return;
    expect(plan.leases.map((lease) => [lease.leaseKey, lease.parentShardIds])).toEqual([
      ['b', []],
      ['c', ['a']],
      ['d', ['a', 'z']],
    ]);
    expect(plan.coverage.overlaps).toEqual([range(0n, 50n)]);
  });

  it('accepts an emulator listing that returns the whole history for TRIM_HORIZON', () => {
    const plan = planInitialLeases(workedExampleShards(), { initialPosition: 'TRIM_HORIZON' });
    expect(plan.ok).toBe(true);
    if (!plan.ok) return;
    expect(plan.leases.map((lease) => lease.leaseKey)).toEqual([
      'shardId-0',
      'shardId-1',
      'shardId-2',
      'shardId-3',
      'shardId-4',
      'shardId-5',
      'shardId-6',
      'shardId-7',
      'shardId-8',
      'shardId-9',
      'shardId-10',
    ]);
  });

  it('prefixes lease keys for a multi-stream application', () => {
    const plan = planInitialLeases([shard('shardId-0', { range: FULL_HASH_KEY_RANGE, start: 1 })], {
      initialPosition: 'LATEST',
      streamIdentifier: '123456789012:orders:1600000000',
    });
    expect(plan.ok && plan.leases[0]?.leaseKey).toBe('123456789012:orders:1600000000:shardId-0');
  });

  it.each([
    ['missing the start', [shard('a', { range: range(1n, MAX_HASH_KEY), start: 1 })], [range(0n, 0n)]],
    [
      'missing the end',
      [shard('a', { range: range(0n, MAX_HASH_KEY - 1n), start: 1 })],
      [range(MAX_HASH_KEY, MAX_HASH_KEY)],
    ],
    [
      'with a gap',
      [
        shard('a', { range: range(0n, 9n), start: 1 }),
        shard('b', { range: range(20n, MAX_HASH_KEY), start: 2 }),
      ],
      [range(10n, 19n)],
    ],
  ])('reports a listing %s so the caller lists again', (_name, shards, holes) => {
    const plan = planInitialLeases(shards, { initialPosition: 'TRIM_HORIZON' });
    expect(plan.ok).toBe(false);
    if (plan.ok) return;
    expect(plan.reason).toBe('incomplete-hash-range');
    expect(plan.coverage.holes).toEqual(holes);
    expect(plan.message).toMatch(/^@kcl\/shard-graph: .*list the shards again$/);
  });

  it('reports an empty listing', () => {
    const plan = planInitialLeases([], { initialPosition: 'LATEST' });
    expect(plan).toMatchObject({
      ok: false,
      reason: 'no-shards',
      coverage: { holes: [FULL_HASH_KEY_RANGE] },
    });
  });

  it('plans a shard listed twice only once', () => {
    const only = shard('a', { range: FULL_HASH_KEY_RANGE, start: 1 });
    const plan = planInitialLeases([only, only], { initialPosition: 'LATEST' });
    expect(plan.ok && plan.leases).toHaveLength(1);
  });

  it('refuses a listing that caught a split half-way (an open parent beside its children) and asks to list again', () => {
    // A paginated listing raced a reshard: the parent was listed before it closed, its children after.
    // LATEST leases on the children would skip what is written to them before they are first read.
    const raced = [
      shard('parent', { range: FULL_HASH_KEY_RANGE, start: 100 }),
      shard('low', { parents: ['parent'], range: slice(0, 2), start: 300 }),
      shard('high', { parents: ['parent'], range: slice(1, 2), start: 301 }),
    ];
    for (const initialPosition of ['LATEST', 'TRIM_HORIZON'] as const) {
      const plan = planInitialLeases(raced, { initialPosition });
      expect(plan).toMatchObject({ ok: false, reason: 'open-parent' });
      expect(!plan.ok && plan.message).toMatch(/parent.*low, high.*list the shards again/);
    }
    // Once the parent is listed closed (its ending sequence number known), the listing is consistent.
    const settled = [
      shard('parent', { range: FULL_HASH_KEY_RANGE, start: 100, end: 200 }),
      ...raced.slice(1),
    ];
    expect(planInitialLeases(settled, { initialPosition: 'LATEST' }).ok).toBe(true);
  });
});
