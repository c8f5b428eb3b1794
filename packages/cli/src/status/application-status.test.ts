import type { WorkerRecord } from '@kcl/core';
import {
  ExtendedSequenceNumber,
  encodeLeaseFigures,
  hashKeyRange,
  LEASE_FIGURES_METADATA_KEY,
  LEASE_RENEW_INTERVAL_METADATA_KEY,
  leaseFromInit,
  MAX_HASH_KEY,
} from '@kcl/core';
import { describe, expect, it } from 'vitest';
import { applicationStatus } from './application-status.js';

const NOW = Date.parse('2026-01-01T00:10:00Z');
const HALF = MAX_HASH_KEY / 2n;

function worker(
  workerId: string,
  ageMs: number,
  figures: Parameters<typeof encodeLeaseFigures>[0] = [],
): WorkerRecord {
  return {
    workerId,
    heartbeat: 1,
    lastHeartbeatAt: new Date(NOW - ageMs),
    metadata: { [LEASE_FIGURES_METADATA_KEY]: encodeLeaseFigures(figures) },
  };
}

const figure = (leaseKey: string, millisBehindLatest: number) => ({
  leaseKey,
  recordsPerSecond: 10,
  bytesPerSecond: 100,
  millisBehindLatest,
  lastCheckpointAt: null,
});

describe('applicationStatus', () => {
  it('judges each shard: owned, handing off, expired, waiting on parents, unowned, finished', () => {
    const leases = [
      leaseFromInit({ leaseKey: 'a', checkpoint: ExtendedSequenceNumber.SHARD_END, childShardIds: ['c'] }),
      leaseFromInit({ leaseKey: 'b', checkpoint: ExtendedSequenceNumber.of('5'), owner: 'live' }),
      leaseFromInit({
        leaseKey: 'c',
        checkpoint: ExtendedSequenceNumber.of('6'),
        owner: 'stale',
        parentShardIds: ['a'],
      }),
      leaseFromInit({
        leaseKey: 'd',
        checkpoint: ExtendedSequenceNumber.TRIM_HORIZON,
        parentShardIds: ['b'],
      }),
      leaseFromInit({ leaseKey: 'e', checkpoint: ExtendedSequenceNumber.TRIM_HORIZON }),
      leaseFromInit({
        leaseKey: 'f',
        checkpoint: ExtendedSequenceNumber.of('7'),
        owner: 'live',
        handoff: { from: 'live', to: 'other', deadline: null },
      }),
      leaseFromInit({ leaseKey: 'g', checkpoint: ExtendedSequenceNumber.of('8'), owner: 'unregistered' }),
    ];
    const status = applicationStatus({
      applicationName: 'billing',
      store: 'test',
      scan: { leases, unreadable: [{ leaseKey: 'x', problem: 'bad checkpoint' }] },
      workers: [
        worker('live', 1_000, [figure('b', 300), figure('c', 999)]),
        worker('stale', 60_000, [figure('c', 700)]),
      ],
      now: NOW,
      workerExpiryMs: 45_000,
    });
    expect(status.shards.map((shard) => [shard.leaseKey, shard.state, shard.millisBehindLatest])).toEqual([
      ['a', 'finished', 0],
      ['b', 'owned', 300],
      // The stale owner's figures count, not those a former owner still lists.
      ['c', 'expired', 700],
      ['d', 'waiting', null],
      ['e', 'unowned', null],
      ['f', 'handing-off', null],
      ['g', 'expired', null],
    ]);
    expect(status.shards[0]?.childLeaseKeys).toEqual(['c']);
    expect(status.problems.map((problem) => [problem.kind, problem.leaseKey])).toEqual([
      ['expired-lease', 'c'],
      ['unowned-shard', 'e'],
      ['handoff-in-progress', 'f'],
      ['unknown-owner', 'g'],
      ['unreadable-lease', 'x'],
    ]);
    expect(
      status.workers.map((entry) => [entry.workerId, entry.alive, entry.leases, entry.recordsPerSecond]),
    ).toEqual([
      ['live', true, ['b', 'f'], 10],
      // A gone worker's last published rates are not shown as current.
      ['stale', false, ['c'], 0],
    ]);
  });

  it('judges liveness by the renew interval a worker publishes, with a clock-skew allowance', () => {
    const published = (workerId: string, ageMs: number, renewIntervalMs: string | null): WorkerRecord => ({
      ...worker(workerId, ageMs),
      metadata: renewIntervalMs === null ? {} : { [LEASE_RENEW_INTERVAL_METADATA_KEY]: renewIntervalMs },
    });
    const input = {
      applicationName: 'billing',
      store: 'test',
      scan: {
        leases: [
          leaseFromInit({ leaseKey: 'a', checkpoint: ExtendedSequenceNumber.of('1'), owner: 'java-worker' }),
          leaseFromInit({
            leaseKey: 'b',
            checkpoint: ExtendedSequenceNumber.of('1'),
            owner: 'kcl-cli:reset',
          }),
        ],
        unreadable: [],
      },
      workers: [
        // 2 × 30 s + 15 s: a heartbeat 70 s old is still within it.
        published('slow', 70_000, '30000'),
        published('slow-gone', 80_000, '30000'),
        // 2 × 1 s + 15 s.
        published('fast-gone', 20_000, '1000'),
        published('fast', 16_000, '1000'),
        // Without the key: the default lease expiry.
        published('old-version', 46_000, null),
        published('garbled', 10_000, 'soon'),
      ],
      now: NOW,
    };
    const alive = (status: ReturnType<typeof applicationStatus>) =>
      status.workers.map((entry) => [entry.workerId, entry.alive, entry.expiryMs]);
    expect(alive(applicationStatus(input))).toEqual([
      ['fast', true, 17_000],
      ['fast-gone', false, 17_000],
      ['garbled', true, 45_001],
      ['old-version', false, 45_001],
      ['slow', true, 75_000],
      ['slow-gone', false, 75_000],
    ]);
    // --worker-expiry-ms overrides what the workers publish.
    expect(
      alive(applicationStatus({ ...input, workerExpiryMs: 5_000 })).every(([, live]) => live === false),
    ).toBe(true);
    // An owner that never registers (a Java KCL worker) is listed; a reset's placeholder owner is not.
    expect(applicationStatus(input).unregisteredOwners).toEqual(['java-worker']);
  });

  it('finds holes in the hash key space per stream', () => {
    const status = applicationStatus({
      applicationName: 'billing',
      store: 'test',
      scan: {
        leases: [
          leaseFromInit({
            leaseKey: 's:1:shardId-0',
            checkpoint: ExtendedSequenceNumber.LATEST,
            hashKeyRange: hashKeyRange(0n, HALF),
          }),
          leaseFromInit({
            leaseKey: 't:1:shardId-0',
            checkpoint: ExtendedSequenceNumber.LATEST,
            hashKeyRange: hashKeyRange(0n, MAX_HASH_KEY),
          }),
        ],
        unreadable: [],
      },
      workers: [],
      now: NOW,
      workerExpiryMs: 45_000,
    });
    const holes = status.problems.filter((problem) => problem.kind === 'hash-range-hole');
    expect(holes).toHaveLength(1);
    expect(holes[0]?.message).toMatch(/^stream s:1: no unfinished lease covers hash keys/);
  });
});
