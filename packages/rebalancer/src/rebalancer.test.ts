import type { Lease } from '@kcl/core';
import { ConfigurationError, ExtendedSequenceNumber, leaseFromInit } from '@kcl/core';
import { ManualClock } from '@kcl/testkit';
import { describe, expect, it } from 'vitest';
import { createRebalancer } from './rebalancer.js';

function fleetLeases(owners: Record<string, number>): Lease[] {
  return Object.entries(owners).flatMap(([owner, count]) =>
    Array.from({ length: count }, (_, index) =>
      leaseFromInit({
        leaseKey: `${owner}-${index}`,
        checkpoint: ExtendedSequenceNumber.of('1'),
        owner,
        leaseCounter: 1,
      }),
    ),
  );
}

function renewed(leases: Lease[], owners: readonly string[]): Lease[] {
  return leases.map((lease) =>
    lease.owner !== null && owners.includes(lease.owner)
      ? { ...lease, leaseCounter: lease.leaseCounter + 1 }
      : lease,
  );
}

describe('createRebalancer', () => {
  it('lists every configuration problem at once', () => {
    let error: unknown;
    try {
      createRebalancer({
        workerId: '',
        leaseExpiryMs: 0,
        maxLeasesToSteal: 0.5,
        maxLeasesForWorker: -1,
        workerExpiryMs: Number.NaN,
      });
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(ConfigurationError);
    expect((error as ConfigurationError).problems).toHaveLength(5);
    expect((error as ConfigurationError).message).toMatch(
      /^@kcl\/rebalancer: invalid configuration \(5 problems\)/,
    );
  });

  it('lets the survivors take a crashed worker’s leases once its heartbeat and leases expire', async () => {
    const clock = new ManualClock({ monotonic: 0 });
    const rebalancer = createRebalancer({ workerId: 'a', leaseExpiryMs: 45_000, random: () => 0.5 });
    let leases = fleetLeases({ a: 10, b: 10, c: 10 });
    const heartbeats = { a: 1, b: 1, c: 1 };
    const registry = () =>
      Object.entries(heartbeats).map(([workerId, heartbeat]) => ({ workerId, heartbeat }));

    // c crashes at time 0: a and b keep renewing and heartbeating every 6 s.
    let plan = rebalancer.plan({ leases, workers: registry(), now: clock.monotonicNow() });
    expect(plan.diagnostics).toMatchObject({ target: 10 });
    expect(plan.takes).toEqual([]);
    // Until 45 s of silence have passed, c still counts and its leases are not expired.
    while (clock.monotonicNow() + 6_000 <= 45_000) {
      await clock.advance(6_000);
      leases = renewed(leases, ['a', 'b']);
      heartbeats.a += 1;
      heartbeats.b += 1;
      plan = rebalancer.plan({ leases, workers: registry(), now: clock.monotonicNow() });
      expect(plan.takes).toEqual([]);
      expect(plan.diagnostics.workers).toEqual(['a', 'b', 'c']);
    }
    await clock.advance(6_000);
    leases = renewed(leases, ['a', 'b']);
    heartbeats.a += 1;
    heartbeats.b += 1;
    plan = rebalancer.plan({ leases, workers: registry(), now: clock.monotonicNow() });
    // c no longer counts: 30 leases over a and b, target 15, five of c's expired leases for a.
    expect(plan.diagnostics).toMatchObject({
      workers: ['a', 'b'],
      target: 15,
      expiredLeases: 10,
      heldBefore: 10,
      heldAfter: 15,
    });
    expect(plan.takes.map((take) => [take.reason, take.previousOwner])).toEqual(
      Array(5).fill(['expired', 'c']),
    );
  });

  it('counts a silent worker until its heartbeat expires, even when it holds no lease', () => {
    const rebalancer = createRebalancer({ workerId: 'a', leaseExpiryMs: 10, random: () => 0 });
    const free = fleetLeases({ x: 4 }).map((lease) => ({ ...lease, owner: null }));
    const first = rebalancer.plan({
      leases: free,
      workers: [
        { workerId: 'a', heartbeat: 1 },
        { workerId: 'idle', heartbeat: 1 },
      ],
      now: 0,
    });
    expect(first.diagnostics).toMatchObject({ workers: ['a', 'idle'], target: 2 });
    const later = rebalancer.plan({
      leases: free,
      workers: [
        { workerId: 'a', heartbeat: 2 },
        { workerId: 'idle', heartbeat: 1 },
      ],
      now: 11,
    });
    expect(later.diagnostics).toMatchObject({ workers: ['a'], target: 4 });
  });

  it('dates its own takes so a fresh lease is not judged expired', () => {
    const rebalancer = createRebalancer({ workerId: 'a', leaseExpiryMs: 10 });
    rebalancer.plan({ leases: [], workers: [], now: 0 });
    rebalancer.recordTake({ leaseKey: 'k', leaseCounter: 5 }, 100);
    expect(rebalancer.leaseExpiry.isExpired('k', 110)).toBe(false);
    expect(rebalancer.leaseExpiry.isExpired('k', 111)).toBe(true);
  });
});
