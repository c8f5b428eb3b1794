import type { Lease, LeaseInit } from '@kcl/core';
import { ExtendedSequenceNumber, hashKeyRange, leaseFromInit } from '@kcl/core';
import { describe, expect, it } from 'vitest';
import {
  compareLeaseSets,
  exactCopyOf,
  leaseFieldDifferences,
  offlineCopyOf,
  planLeaseCopy,
} from './plan-lease-copy.js';

const esn = (value: string, sub = 0) => ExtendedSequenceNumber.of(value, sub);
const lease = (init: Partial<LeaseInit> & { leaseKey: string }): Lease =>
  leaseFromInit({ checkpoint: esn('100'), ...init });

const SOURCE = lease({
  leaseKey: 'shard-1',
  owner: 'worker-a',
  leaseCounter: 41,
  checkpoint: esn('100', 2),
  pendingCheckpoint: esn('120'),
  ownerSwitchesSinceCheckpoint: 3,
  parentShardIds: ['shard-0'],
  childShardIds: ['shard-5', 'shard-4'],
  hashKeyRange: hashKeyRange('0', '99'),
});

const STREAM = '123456789012:orders:1700000000';
const HANDED_OFF = lease({
  ...SOURCE,
  leaseKey: `${STREAM}:shard-1`,
  streamIdentifier: STREAM,
  handoff: { from: 'worker-a', to: 'worker-b', deadline: new Date('2030-01-02T03:04:05.678Z') },
});

describe('offline and exact copies', () => {
  it('an offline copy keeps every fact, clears the owner and starts the counter above the source', () => {
    expect(leaseFromInit(offlineCopyOf(SOURCE))).toEqual({ ...SOURCE, owner: null, leaseCounter: 42 });
  });

  it('an exact copy keeps owner and counter too', () => {
    expect(leaseFromInit(exactCopyOf(SOURCE))).toEqual(SOURCE);
  });

  it('an exact copy keeps the stream identifier and a hand-off in progress', () => {
    expect(leaseFromInit(exactCopyOf(HANDED_OFF))).toEqual(HANDED_OFF);
  });

  it('an offline copy keeps the stream identifier and ends a hand-off with the owner it was from', () => {
    expect(leaseFromInit(offlineCopyOf(HANDED_OFF))).toEqual({
      ...HANDED_OFF,
      owner: null,
      leaseCounter: 42,
      handoff: null,
    });
  });
});

describe('planLeaseCopy', () => {
  const copied = leaseFromInit(offlineCopyOf(SOURCE));

  it.each([
    ['absent on the target', null, 'create'],
    ['an exact earlier copy (a re-run)', copied, 'unchanged'],
    [
      'an older copy: the source moved on since',
      { ...copied, checkpoint: esn('50'), leaseCounter: 30 },
      'update',
    ],
    ['a copy whose children were not recorded yet', { ...copied, childShardIds: [] }, 'update'],
    ['taken by a new worker', { ...copied, owner: 'new-worker', leaseCounter: 43 }, 'target-ahead'],
    [
      'checkpointed further on the target',
      { ...copied, checkpoint: esn('500'), leaseCounter: 44 },
      'target-ahead',
    ],
    ['written since it was copied (counter above)', { ...copied, leaseCounter: 45 }, 'target-ahead'],
  ] as const)('%s → %s', (_name, target, action) => {
    const [entry] = planLeaseCopy([SOURCE], target === null ? [] : [target as Lease]);
    expect(entry?.action).toBe(action);
    expect(entry?.reason === null).toBe(action !== 'target-ahead');
  });

  it('overwrites a target that moved on only when forced', () => {
    const ahead = { ...copied, checkpoint: esn('500') };
    expect(planLeaseCopy([SOURCE], [ahead], { force: true })[0]?.action).toBe('overwrite');
    expect(planLeaseCopy([SOURCE], [ahead])[0]?.reason).toBe(
      "target checkpoint 500 is after the source's 100/2",
    );
  });

  it('plans in lease-key order', () => {
    const plan = planLeaseCopy([lease({ leaseKey: 'b' }), lease({ leaseKey: 'a' })], []);
    expect(plan.map((entry) => entry.leaseKey)).toEqual(['a', 'b']);
  });
});

describe('compareLeaseSets', () => {
  it('reports missing, extra and different leases, ignoring owners and counters', () => {
    const other = lease({ leaseKey: 'shard-2' });
    const comparison = compareLeaseSets(
      [SOURCE, other, lease({ leaseKey: 'shard-3' })],
      [
        { ...SOURCE, owner: null, leaseCounter: 1 },
        { ...other, checkpoint: esn('100', 1), hashKeyRange: hashKeyRange('0', '1') },
        lease({ leaseKey: 'shard-9' }),
      ],
    );
    expect(comparison.compared).toBe(3);
    expect(comparison.matching).toBe(1);
    expect(
      comparison.differences.map(({ leaseKey, kind, fields, targetAhead }) => ({
        leaseKey,
        kind,
        fields,
        targetAhead,
      })),
    ).toEqual([
      { leaseKey: 'shard-2', kind: 'different', fields: ['checkpoint', 'hashKeyRange'], targetAhead: true },
      { leaseKey: 'shard-3', kind: 'missing-on-target', fields: [], targetAhead: false },
      { leaseKey: 'shard-9', kind: 'only-on-target', fields: [], targetAhead: false },
    ]);
  });

  it('compares lineage as sets and pending checkpoints with their sub-sequence numbers', () => {
    const a = lease({ leaseKey: 'k', parentShardIds: ['x', 'y'], pendingCheckpoint: esn('5', 1) });
    expect(leaseFieldDifferences(a, { ...a, parentShardIds: ['y', 'x'] })).toEqual([]);
    expect(leaseFieldDifferences(a, { ...a, pendingCheckpoint: esn('5') })).toEqual(['pendingCheckpoint']);
    expect(leaseFieldDifferences(a, { ...a, pendingCheckpoint: null, parentShardIds: ['x'] })).toEqual([
      'pendingCheckpoint',
      'parentShardIds',
    ]);
  });

  it('compares the stream identifier; a hand-off, like the owner, is not a fact a copy keeps', () => {
    const copied = leaseFromInit(offlineCopyOf(HANDED_OFF));
    expect(leaseFieldDifferences(HANDED_OFF, copied)).toEqual([]);
    expect(leaseFieldDifferences(HANDED_OFF, { ...copied, streamIdentifier: null })).toEqual([
      'streamIdentifier',
    ]);
    expect(compareLeaseSets([HANDED_OFF], [copied]).matching).toBe(1);
  });

  it('plans an unchanged re-run for a lease that had a hand-off', () => {
    const copied = leaseFromInit(offlineCopyOf(HANDED_OFF));
    expect(planLeaseCopy([HANDED_OFF], [copied])[0]?.action).toBe('unchanged');
    expect(planLeaseCopy([HANDED_OFF], [{ ...copied, streamIdentifier: null }])[0]?.action).toBe('update');
  });
});
