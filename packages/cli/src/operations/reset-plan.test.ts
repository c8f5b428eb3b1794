import { ConfigurationError, ExtendedSequenceNumber, leaseFromInit } from '@kcl/core';
import { describe, expect, it } from 'vitest';
import { parseResetTarget, planReset } from './reset-plan.js';

const leases = [
  leaseFromInit({ leaseKey: 'shardId-0', checkpoint: ExtendedSequenceNumber.SHARD_END }),
  leaseFromInit({ leaseKey: 'shardId-1', checkpoint: ExtendedSequenceNumber.of('10'), owner: 'w' }),
  leaseFromInit({ leaseKey: 'shardId-2', checkpoint: ExtendedSequenceNumber.LATEST }),
];

describe('parseResetTarget', () => {
  it.each([
    ['TRIM_HORIZON', { kind: 'TRIM_HORIZON' }],
    ['latest', { kind: 'LATEST' }],
    [
      '4959033827149025660855969253836157109592157598',
      { kind: 'sequence', sequenceNumber: '4959033827149025660855969253836157109592157598' },
    ],
    ['2026-03-01T12:00:00Z', { kind: 'timestamp', timestamp: new Date('2026-03-01T12:00:00Z') }],
    ['2026-03-01T12:00:00.250+02:00', { kind: 'timestamp', timestamp: new Date('2026-03-01T10:00:00.250Z') }],
  ])('reads %s', (value, expected) => {
    expect(parseResetTarget(value)).toEqual(expected);
  });

  it.each([
    '',
    'yesterday',
    '2026-03-01',
    '2026-13-45T99:00:00Z',
    '-5',
    '2026-03-01T12:00:00',
    '2026-03-01T12:00',
    '2026-03-01T12:00:00+0100',
  ])('rejects %j', (value) => {
    expect(parseResetTarget(value)).toBeNull();
  });
});

describe('planReset', () => {
  it('replays finished shards too (their children wait for them again)', () => {
    const plan = planReset(leases, { kind: 'TRIM_HORIZON' });
    expect(plan.leases.map((entry) => [entry.leaseKey, entry.action, entry.to])).toEqual([
      ['shardId-0', 'reset', 'TRIM_HORIZON'],
      ['shardId-1', 'reset', 'TRIM_HORIZON'],
      ['shardId-2', 'reset', 'TRIM_HORIZON'],
    ]);
  });

  it('skips to LATEST without reopening finished shards, and leaves those already there', () => {
    const plan = planReset(leases, { kind: 'LATEST' });
    expect(plan.leases.map((entry) => [entry.leaseKey, entry.action])).toEqual([
      ['shardId-0', 'skipped'],
      ['shardId-1', 'reset'],
      ['shardId-2', 'unchanged'],
    ]);
  });

  it('resets a held lease whose stored checkpoint is the target already (its owner has read past it)', () => {
    const held = leaseFromInit({
      leaseKey: 'shardId-4',
      checkpoint: ExtendedSequenceNumber.TRIM_HORIZON,
      owner: 'worker-a',
    });
    const free = leaseFromInit({ leaseKey: 'shardId-5', checkpoint: ExtendedSequenceNumber.TRIM_HORIZON });
    expect(
      planReset([held, free], { kind: 'TRIM_HORIZON' }).leases.map((entry) => [entry.leaseKey, entry.action]),
    ).toEqual([
      ['shardId-4', 'reset'],
      ['shardId-5', 'unchanged'],
    ]);
  });

  it('writes again a lease an interrupted reset left with its placeholder owner', () => {
    const left = leaseFromInit({
      leaseKey: 'shardId-3',
      checkpoint: ExtendedSequenceNumber.LATEST,
      owner: 'kcl-cli:reset',
    });
    expect(planReset([left], { kind: 'LATEST' }).leases[0]?.action).toBe('reset');
  });

  it('selects shards by id and reports those without a lease', () => {
    const plan = planReset(leases, { kind: 'timestamp', timestamp: new Date('2026-01-01T00:00:00Z') }, [
      'shardId-1',
      'shardId-9',
    ]);
    expect(plan.leases.map((entry) => [entry.leaseKey, entry.to])).toEqual([
      ['shardId-1', 'AT_TIMESTAMP 2026-01-01T00:00:00.000Z'],
    ]);
    expect(plan.missing).toEqual(['shardId-9']);
  });

  it('refuses a sequence number whose --shard matches leases of several streams', () => {
    const streams = ['orders:111', 'billing:222'].map((stream) =>
      leaseFromInit({
        leaseKey: `${stream}:shardId-000000000001`,
        checkpoint: ExtendedSequenceNumber.of('10'),
        streamIdentifier: stream,
      }),
    );
    const sequence = { kind: 'sequence', sequenceNumber: '42' } as const;
    let error: unknown;
    try {
      planReset(streams, sequence, ['shardId-000000000001']);
    } catch (caught) {
      error = caught;
    }
    expect(ConfigurationError.is(error)).toBe(true);
    expect(String(error)).toContain('orders:111:shardId-000000000001, billing:222:shardId-000000000001');
    const one = planReset(streams, sequence, ['billing:222:shardId-000000000001']);
    expect(one.leases.map((entry) => [entry.leaseKey, entry.to])).toEqual([
      ['billing:222:shardId-000000000001', '42'],
    ]);
  });

  it('names the parents of replayed shards whose leases were cleaned up', () => {
    const children = [
      leaseFromInit({
        leaseKey: 'shardId-7',
        checkpoint: ExtendedSequenceNumber.of('5'),
        parentShardIds: ['shardId-5', 'shardId-6'],
      }),
      leaseFromInit({
        leaseKey: 'shardId-6',
        checkpoint: ExtendedSequenceNumber.SHARD_END,
        parentShardIds: ['shardId-2'],
      }),
    ];
    const time = new Date('2026-01-01T00:00:00Z');
    const plan = planReset(children, { kind: 'timestamp', timestamp: time });
    expect(plan.parentsWithoutLease).toEqual(['shardId-2', 'shardId-5']);
    expect(plan.parentsWarning).toBe(
      'records of cleaned-up parent shards shardId-2, shardId-5 from 2026-01-01T00:00:00.000Z on are not replayed: their leases are gone, so no worker reads them again',
    );
    expect(planReset(children, { kind: 'TRIM_HORIZON' }).parentsWithoutLease).toEqual([
      'shardId-2',
      'shardId-5',
    ]);
    expect(planReset(children, { kind: 'LATEST' }).parentsWarning).toBeNull();
  });
});
