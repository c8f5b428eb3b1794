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

  describe('a lease in a hand-off', () => {
    // me 1, other 3, third 4: 8 leases over 3 workers, target 3. One of third's leases is being
    // handed over to me.
    const workers = ['me', 'other', 'third'].map((workerId) => ({
      workerId,
      heartbeat: 1,
      lastHeartbeatAt: new Date(0),
      metadata: {},
    }));
    const inHandoff = (to: string, from = 'third'): Lease[] =>
      leases({ me: 1, other: 3, third: 4 }).map((lease) =>
        lease.leaseKey === `shardId-${from}-0` ? { ...lease, handoff: { from, to, deadline: null } } : lease,
      );
    const EXPIRY = 10_000;
    const plannerOf = (workerId: string) =>
      createLeasePlanner({
        workerId,
        leaseExpiryMs: EXPIRY,
        maxLeasesToSteal: 1,
        maxLeasesForWorker: Number.POSITIVE_INFINITY,
        random: () => 0,
      });
    const heldBy = (workerId: string, all: readonly Lease[]) =>
      new Set(all.filter((lease) => lease.owner === workerId).map((lease) => lease.leaseKey));

    it('counts as the requester’s while it waits, so the requester asks for no more than its share', () => {
      const withHandoff = inHandoff('me');
      const plan = plannerOf('me').plan({
        leases: withHandoff,
        workers,
        heldLeaseKeys: heldBy('me', withHandoff),
        now: 0,
      });
      // me 2 (with the one coming), third 3: me is one short of the target, but nobody leads it by two.
      expect(plan.take).toEqual([]);
      const without = leases({ me: 1, other: 3, third: 4 });
      const before = plannerOf('me').plan({
        leases: without,
        workers,
        heldLeaseKeys: heldBy('me', without),
        now: 0,
      });
      expect(before.take.map((choice) => [choice.lease.owner, choice.stolen])).toEqual([['third', true]]);
    });

    it('is not stolen again from its owner by a third worker', () => {
      // me 2, other 4, third 2 (target 3); other is handing one lease over to third. Counted as third's,
      // other no longer leads me by two, so I steal nothing; counted as other's, I would steal one.
      const all = leases({ me: 2, other: 4, third: 2 });
      const withHandoff = all.map((lease) =>
        lease.leaseKey === 'shardId-other-0'
          ? { ...lease, handoff: { from: 'other', to: 'third', deadline: null } }
          : lease,
      );
      const plan = plannerOf('me').plan({
        leases: withHandoff,
        workers,
        heldLeaseKeys: heldBy('me', all),
        now: 0,
      });
      expect(plan.diagnostics.target).toBe(3);
      expect(plan.take).toEqual([]);
      const before = plannerOf('me').plan({ leases: all, workers, heldLeaseKeys: heldBy('me', all), now: 0 });
      expect(before.take.map((choice) => [choice.lease.owner, choice.stolen])).toEqual([['other', true]]);
    });

    it('is the owner’s again once nobody settles it, so a stuck owner’s lease can still be stolen', () => {
      // The requester no longer waits on its hand-off (its fallback steal failed): without this, the
      // lease would count as the requester's for ever while the stuck owner keeps renewing it.
      const withHandoff = inHandoff('me');
      const waiting = plannerOf('me').plan({
        leases: withHandoff,
        workers,
        heldLeaseKeys: heldBy('me', withHandoff),
        now: 0,
        waitingHandoffs: new Set(['shardId-third-0']),
      });
      expect(waiting.take).toEqual([]);
      const abandoned = plannerOf('me').plan({
        leases: withHandoff,
        workers,
        heldLeaseKeys: heldBy('me', withHandoff),
        now: 0,
        waitingHandoffs: new Set(),
      });
      expect(abandoned.take.map((choice) => [choice.lease.owner, choice.stolen])).toEqual([['third', true]]);

      // Another worker's hand-off one lease expiry past its deadline is the owner's again for everyone
      // else (not at the deadline itself: this worker's clock may run ahead of the requester's).
      const all = leases({ me: 2, other: 4, third: 2 });
      const pastDeadline = all.map((lease) =>
        lease.leaseKey === 'shardId-other-0'
          ? { ...lease, handoff: { from: 'other', to: 'third', deadline: new Date(1_000) } }
          : lease,
      );
      const before = { leases: pastDeadline, workers, heldLeaseKeys: heldBy('me', all), now: 0 };
      expect(plannerOf('me').plan({ ...before, wallNow: 1_001 }).take).toEqual([]);
      expect(plannerOf('me').plan({ ...before, wallNow: 1_000 + EXPIRY }).take).toEqual([]);
      expect(
        plannerOf('me')
          .plan({ ...before, wallNow: 1_001 + EXPIRY })
          .take.map((choice) => [choice.lease.owner, choice.stolen]),
      ).toEqual([['other', true]]);
    });

    it('still counts as its owner’s for the owner, which does not plan to take it', () => {
      const withHandoff = inHandoff('me');
      const plan = plannerOf('third').plan({
        leases: withHandoff,
        workers,
        heldLeaseKeys: heldBy('third', withHandoff),
        now: 0,
      });
      expect(plan.take).toEqual([]);
    });
  });
});
