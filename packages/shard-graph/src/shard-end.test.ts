import { ExtendedSequenceNumber } from '@kcl/core';
import { describe, expect, it } from 'vitest';
import { lease, range } from '../test/fixtures.js';
import { leaseLookupOf } from './lease-key.js';
import type { ChildShardDescription } from './shard-description.js';
import { DROP_BLOCKED_LEASE_PROBABILITY, planShardEnd } from './shard-end.js';

const left: ChildShardDescription = { shardId: 'l', parentShardIds: ['p'], hashKeyRange: range(0n, 9n) };
const right: ChildShardDescription = { shardId: 'r', parentShardIds: ['p'], hashKeyRange: range(10n, 19n) };
const merged: ChildShardDescription = {
  shardId: 'm',
  parentShardIds: ['b', 'a'],
  hashKeyRange: range(0n, 19n),
};

describe('planShardEnd', () => {
  it('creates split children at TRIM_HORIZON with parents and hash range, and records them', () => {
    const plan = planShardEnd({
      lease: lease('p', { checkpoint: '99' }),
      childShards: [right, left],
      lookup: leaseLookupOf([lease('p', { checkpoint: '99' })]),
    });
    expect(plan).toEqual({
      kind: 'proceed',
      leasesToCreate: [
        {
          leaseKey: 'r',
          checkpoint: ExtendedSequenceNumber.TRIM_HORIZON,
          parentShardIds: ['p'],
          hashKeyRange: range(10n, 19n),
        },
        {
          leaseKey: 'l',
          checkpoint: ExtendedSequenceNumber.TRIM_HORIZON,
          parentShardIds: ['p'],
          hashKeyRange: range(0n, 9n),
        },
      ],
      childShardIds: ['l', 'r'],
    });
  });

  it('does not recreate children that already have leases', () => {
    const plan = planShardEnd({
      lease: lease('p'),
      childShards: [left, right],
      lookup: leaseLookupOf([lease('p'), lease('l', { checkpoint: '5' })]),
    });
    expect(plan).toMatchObject({ kind: 'proceed', childShardIds: ['l', 'r'] });
    expect(plan.kind === 'proceed' && plan.leasesToCreate.map((init) => init.leaseKey)).toEqual(['r']);
  });

  it('creates a merge child when both parent leases exist', () => {
    const plan = planShardEnd({
      lease: lease('a'),
      childShards: [merged],
      lookup: leaseLookupOf([lease('a'), lease('b', { checkpoint: '3' })]),
    });
    expect(plan.kind === 'proceed' && plan.leasesToCreate).toEqual([
      {
        leaseKey: 'm',
        checkpoint: ExtendedSequenceNumber.TRIM_HORIZON,
        parentShardIds: ['a', 'b'],
        hashKeyRange: range(0n, 19n),
      },
    ]);
  });

  it('blocks a merge while the other parent has no lease yet', () => {
    const plan = planShardEnd({
      lease: lease('a'),
      childShards: [merged],
      lookup: leaseLookupOf([lease('a')]),
    });
    expect(plan).toMatchObject({
      kind: 'blocked',
      reason: 'merge-parent-lease-missing',
      childShardId: 'm',
      presentParentLeaseKey: 'a',
      missingParentLeaseKey: 'b',
      dropLease: false,
    });
    expect(plan.kind === 'blocked' && plan.message).toMatch(/^@kcl\/shard-graph: .*retry after a backoff$/);
  });

  it.each([
    [0, true],
    [DROP_BLOCKED_LEASE_PROBABILITY - 1e-9, true],
    [DROP_BLOCKED_LEASE_PROBABILITY, false],
    [0.5, false],
  ])('with random() = %d a blocked merge drops the lease: %s', (value, drop) => {
    const plan = planShardEnd({
      lease: lease('b'),
      childShards: [merged],
      lookup: leaseLookupOf([lease('b')]),
      random: () => value,
    });
    expect(plan).toMatchObject({
      kind: 'blocked',
      presentParentLeaseKey: 'b',
      missingParentLeaseKey: 'a',
      dropLease: drop,
    });
  });

  it('skips the merge guard once the merge child lease exists', () => {
    const plan = planShardEnd({
      lease: lease('a'),
      childShards: [merged],
      lookup: leaseLookupOf([lease('a'), lease('m')]),
    });
    expect(plan).toEqual({ kind: 'proceed', leasesToCreate: [], childShardIds: ['m'] });
  });

  it('rejects a single child that does not name two parents', () => {
    const lonely: ChildShardDescription = { shardId: 'x', parentShardIds: ['a'], hashKeyRange: null };
    const plan = planShardEnd({
      lease: lease('a'),
      childShards: [lonely],
      lookup: leaseLookupOf([lease('a')]),
    });
    expect(plan).toMatchObject({
      kind: 'invalid',
      reason: 'merge-child-without-two-parents',
      childShardId: 'x',
    });
  });

  it('rejects a child without parents', () => {
    const orphan: ChildShardDescription = { shardId: 'o', parentShardIds: [], hashKeyRange: null };
    const plan = planShardEnd({ lease: lease('p'), childShards: [left, orphan], lookup: () => undefined });
    expect(plan).toMatchObject({ kind: 'invalid', reason: 'child-without-parents', childShardId: 'o' });
  });

  it('finishes a shard without children (deleted stream or trimmed shard) with nothing to create', () => {
    expect(planShardEnd({ lease: lease('p'), childShards: [], lookup: () => undefined })).toEqual({
      kind: 'proceed',
      leasesToCreate: [],
      childShardIds: [],
    });
  });

  it('keeps the stream prefix of multi-stream leases, and child hash ranges may be unknown', () => {
    const stream = '123456789012:orders:1600000000';
    const plan = planShardEnd({
      lease: lease(`${stream}:a`),
      childShards: [{ shardId: 'm', parentShardIds: ['a', 'b'], hashKeyRange: null }],
      lookup: leaseLookupOf([lease(`${stream}:a`), lease(`${stream}:b`)]),
    });
    expect(plan.kind === 'proceed' && plan.leasesToCreate).toEqual([
      {
        leaseKey: `${stream}:m`,
        checkpoint: ExtendedSequenceNumber.TRIM_HORIZON,
        parentShardIds: ['a', 'b'],
        hashKeyRange: null,
      },
    ]);
  });
});
