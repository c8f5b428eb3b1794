import { decodeLeaseFigures } from '@kcl/core';
import { ManualClock } from '@kcl/testkit';
import { describe, expect, it } from 'vitest';
import { LeaseFigureTracker } from './lease-figure-tracker.js';

describe('LeaseFigureTracker', () => {
  it('publishes rates since the previous heartbeat, the last lag and checkpoint time, for held leases only', async () => {
    const clock = new ManualClock({ now: Date.parse('2026-01-01T00:00:00.000Z') });
    const tracker = new LeaseFigureTracker(clock);
    tracker.batch({ leaseKey: 'shardId-1', records: 100, bytes: 4_000, millisBehindLatest: 700 });
    tracker.batch({ leaseKey: 'shardId-1', records: 100, bytes: 4_000, millisBehindLatest: 300 });
    tracker.batch({ leaseKey: 'shardId-gone', records: 5, bytes: 5, millisBehindLatest: 5 });
    await clock.advance(10_000);
    tracker.checkpointed('shardId-1');
    const first = decodeLeaseFigures(tracker.publish(['shardId-1', 'shardId-2']));
    expect(first?.leases).toEqual([
      {
        leaseKey: 'shardId-1',
        recordsPerSecond: 20,
        bytesPerSecond: 800,
        millisBehindLatest: 300,
        lastCheckpointAt: new Date('2026-01-01T00:00:10.000Z'),
      },
      {
        leaseKey: 'shardId-2',
        recordsPerSecond: 0,
        bytesPerSecond: 0,
        millisBehindLatest: null,
        lastCheckpointAt: null,
      },
    ]);
    await clock.advance(5_000);
    const second = decodeLeaseFigures(tracker.publish(['shardId-1']));
    expect(second?.leases).toEqual([
      {
        leaseKey: 'shardId-1',
        recordsPerSecond: 0,
        bytesPerSecond: 0,
        millisBehindLatest: 300,
        lastCheckpointAt: new Date('2026-01-01T00:00:10.000Z'),
      },
    ]);
  });
});
