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

  it('accepts maxLeasesToSteal 0: it plans no steals, and still takes free and expired leases', () => {
    const workers = ['a', 'big'].map((workerId) => ({ workerId, heartbeat: 1 }));
    const leases = fleetLeases({ a: 1, big: 9 });
    const options = { workerId: 'a', leaseExpiryMs: 45_000, random: () => 0 };
    // 10 leases over 2 workers: target 5, and big leads a by 8: a listing that calls for steals.
    const stealing = createRebalancer({ ...options, maxLeasesToSteal: 3 }).plan({ leases, workers, now: 0 });
    expect(stealing.takes.filter((take) => take.reason === 'steal')).toHaveLength(3);
    const rebalancer = createRebalancer({ ...options, maxLeasesToSteal: 0 });
    const plan = rebalancer.plan({ leases, workers, now: 0 });
    expect(plan.takes).toEqual([]);
    expect(plan.diagnostics).toMatchObject({ target: 5, heldBefore: 1, heldAfter: 1, stolen: 0 });
    const free = fleetLeases({ spare: 2 }).map((lease) => ({ ...lease, owner: null }));
    const withFree = rebalancer.plan({ leases: [...leases, ...free], workers, now: 6_000 });
    expect(withFree.takes.map((take) => take.reason)).toEqual(['free', 'free']);
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

  it('takes a lease it left to another worker once two of its plans, short of target, left it', () => {
    const rebalancer = createRebalancer({ workerId: 'a', leaseExpiryMs: 45_000, random: () => 0 });
    const free = fleetLeases({ spare: 2 }).map((lease) => ({ ...lease, owner: null }));
    let leases = [...fleetLeases({ a: 3, low: 1, big: 6 }), ...free];
    const workers = [
      { workerId: 'a', heartbeat: 1 },
      { workerId: 'low', heartbeat: 1 },
      { workerId: 'big', heartbeat: 1 },
    ];
    // 12 leases over 3 workers: target 4. Both free leases are low's share (1 → 3), so a leaves them,
    // and low never takes them.
    for (const now of [0, 6_000]) {
      const plan = rebalancer.plan({ leases, workers, now });
      expect(plan.diagnostics).toMatchObject({ target: 4, share: 0, heldBefore: 3 });
      expect(plan.takes).toEqual([]);
      leases = renewed(leases, ['a', 'low', 'big']);
    }
    const plan = rebalancer.plan({ leases, workers, now: 12_000 });
    expect(plan.takes.map((take) => [take.reason, take.previousOwner])).toEqual([['free', null]]);
  });

  it('holds steals for one plan after a worker holding leases came to hold none', () => {
    const workers = ['a', 'low', 'big', 'gone'].map((workerId) => ({ workerId, heartbeat: 1 }));
    const steals = (plan: { takes: readonly { reason: string }[] }) =>
      plan.takes.filter((take) => take.reason === 'steal').length;
    const rebalancer = createRebalancer({ workerId: 'a', leaseExpiryMs: 45_000, random: () => 0 });
    const before = [...fleetLeases({ a: 2, low: 1, big: 9 }), ...fleetLeases({ gone: 1 })];
    // 13 leases over 4 workers: target 4, and big leads a by 7: this listing calls for a steal.
    expect(steals(rebalancer.plan({ leases: before, workers, now: 0 }))).toBe(1);
    // gone's lease has passed to low: gone is being shared out, and a steal now is often undone.
    const after = before.map((lease) =>
      lease.owner === 'gone' ? { ...lease, owner: 'low', leaseCounter: lease.leaseCounter + 1 } : lease,
    );
    expect(steals(rebalancer.plan({ leases: after, workers, now: 6_000 }))).toBe(0);
    expect(steals(rebalancer.plan({ leases: after, workers, now: 12_000 }))).toBe(1);
  });
});
