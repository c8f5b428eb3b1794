import type { Lease } from '@kcl/core';
import { ExtendedSequenceNumber, leaseFromInit } from '@kcl/core';
import { describe, expect, it } from 'vitest';
import { createLeasePlanner } from './lease-planner.js';

function leases(owners: Record<string, number>): Lease[] {
  return Object.entries(owners).flatMap(([owner, count]) =>
    Array.from({ length: count }, (_, index) =>
      leaseFromInit({
        leaseKey: `shardId-${owner}-${index}`,
        checkpoint: ExtendedSequenceNumber.of('1'),
        owner,
        leaseCounter: 1,
      }),
    ),
  );
}

describe('createLeasePlanner', () => {
  // 10 leases over 2 workers: target 5, and the other worker leads this one by 8.
  const input = {
    leases: leases({ me: 1, other: 9 }),
    workers: [
      { workerId: 'me', heartbeat: 1, lastHeartbeatAt: new Date(0), metadata: {} },
      { workerId: 'other', heartbeat: 1, lastHeartbeatAt: new Date(0), metadata: {} },
    ],
    heldLeaseKeys: new Set(['shardId-me-0']),
    now: 0,
  };
  const planner = (maxLeasesToSteal: number) =>
    createLeasePlanner({
      workerId: 'me',
      leaseExpiryMs: 10_000,
      maxLeasesToSteal,
      maxLeasesForWorker: Number.POSITIVE_INFINITY,
      random: () => 0,
    });

  it('steals up to maxLeasesToSteal from the most loaded worker', () => {
    const plan = planner(2).plan(input);
    expect(plan.take.map((choice) => [choice.lease.owner, choice.stolen])).toEqual([
      ['other', true],
      ['other', true],
    ]);
    expect(plan.diagnostics).toMatchObject({ target: 5, neededLeases: 4, leasesToTake: 2 });
  });

  it('never steals with maxLeasesToSteal 0', () => {
    const plan = planner(0).plan(input);
    expect(plan.take).toEqual([]);
    expect(plan.diagnostics).toMatchObject({ target: 5, neededLeases: 4, leasesToTake: 0 });
  });
});
