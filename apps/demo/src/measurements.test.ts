import { describe, expect, it } from 'vitest';
import type { FleetEvent } from './fleet.js';
import { describeMeasurements, type FleetReports, killedWorkerOf, leaseLossesOf } from './measurements.js';

const SHARD_0 = 'shardId-000000000000';
const SHARD_1 = 'shardId-000000000001';

function reports(events: FleetEvent[], peakLagMs = 0): FleetReports {
  return { events, peakLag: () => peakLagMs };
}

describe('the run measurements', () => {
  it('time the failover from the kill -9 to the last lease taken by another worker', () => {
    const fleet = reports(
      [
        { at: 1_000, event: { type: 'lease-taken', workerId: 'w1', leaseKey: SHARD_0 } },
        { at: 4_200, event: { type: 'lease-taken', workerId: 'w2', leaseKey: SHARD_0 } },
        { at: 5_500, event: { type: 'lease-taken', workerId: 'w3', leaseKey: SHARD_1 } },
      ],
      2_500,
    );
    const lines = describeMeasurements(
      fleet,
      {
        killed: { workerId: 'w1', at: 2_000, held: [SHARD_0, SHARD_1] },
        gracefullyStopped: null,
        split: null,
      },
      3_000,
    );
    expect(lines).toEqual([
      'failover: 2 of 2 leases of the killed w1 taken over 3.5 s after the kill -9 (lease expiry 3 s); their shards were up to 2.5 s behind, then caught up',
    ]);
  });

  it('time the hand-over after a graceful stop and the end of a split parent', () => {
    const fleet = reports([
      { at: 10_100, event: { type: 'lease-released', workerId: 'w2', leaseKey: SHARD_1 } },
      { at: 10_900, event: { type: 'lease-taken', workerId: 'w3', leaseKey: SHARD_1 } },
      { at: 12_000, event: { type: 'shard-ended', workerId: 'w3', leaseKey: SHARD_0 } },
    ]);
    const lines = describeMeasurements(
      fleet,
      {
        killed: null,
        gracefullyStopped: { workerId: 'w2', at: 10_000 },
        split: { at: 9_000, parent: { streamName: null, shardId: SHARD_0 } },
      },
      3_000,
    );
    expect(lines).toEqual([
      'graceful stop: w2 released 1 lease; the others took 1 of them within 0.8 s (no expiry wait)',
      'split: shard-0 was processed to its end 3.0 s after the split; its children started then',
    ]);
  });

  it('match lease keys that name their stream: the split parent of one stream is not its namesake in another', () => {
    const KEY_1 = '000000000000:kcl-demo-1:1700000000:shardId-000000000000';
    const KEY_2 = '000000000000:kcl-demo-2:1700000001:shardId-000000000000';
    const fleet: FleetReports = {
      events: [
        { at: 3_000, event: { type: 'lease-taken', workerId: 'w2', leaseKey: KEY_2 } },
        { at: 10_000, event: { type: 'shard-ended', workerId: 'w2', leaseKey: KEY_2 } },
        { at: 11_500, event: { type: 'shard-ended', workerId: 'w3', leaseKey: KEY_1 } },
      ],
      peakLag: (leaseKey) => (leaseKey === KEY_2 ? 1_500 : 0),
    };
    const lines = describeMeasurements(
      fleet,
      {
        killed: { workerId: 'w1', at: 1_000, held: [KEY_2] },
        gracefullyStopped: null,
        split: { at: 9_000, parent: { streamName: 'kcl-demo-1', shardId: SHARD_0 } },
      },
      3_000,
    );
    expect(lines).toEqual([
      'failover: 1 of 1 lease of the killed w1 taken over 2.0 s after the kill -9 (lease expiry 3 s); their shards were up to 1.5 s behind, then caught up',
      'split: demo-1/shard-0 was processed to its end 2.5 s after the split; its children started then',
    ]);
  });

  it('keep the killed worker’s checkpoints up to its death, and every lease lost without a release', () => {
    const fleet = reports([
      {
        at: 1_000,
        event: { type: 'checkpoint-written', workerId: 'w1', leaseKey: SHARD_0, checkpoint: '10' },
      },
      {
        at: 1_500,
        event: { type: 'checkpoint-written', workerId: 'w1', leaseKey: SHARD_0, checkpoint: '20' },
      },
      {
        at: 2_500,
        event: { type: 'checkpoint-written', workerId: 'w1', leaseKey: SHARD_0, checkpoint: '30' },
      },
      {
        at: 3_000,
        event: { type: 'lease-lost', workerId: 'w3', leaseKey: SHARD_1, reason: 'taken-by-other' },
      },
    ]);
    const killed = killedWorkerOf(fleet, {
      killed: { workerId: 'w1', at: 2_000, held: [SHARD_0] },
      gracefullyStopped: null,
      split: null,
    });
    expect(killed).toEqual({ workerId: 'w1', at: 2_000, checkpoints: new Map([[SHARD_0, '20']]) });
    expect(leaseLossesOf(fleet)).toEqual([
      { workerId: 'w3', leaseKey: SHARD_1, at: 3_000, reason: 'taken-by-other' },
    ]);
  });
});
