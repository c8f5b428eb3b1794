import type { Lease } from '@kcl/core';
import { ExtendedSequenceNumber, leaseFromInit } from '@kcl/core';
import { describe, expect, it } from 'vitest';
import type { RebalanceInput } from './plan-rebalance.js';
import { fairShare, planRebalance } from './plan-rebalance.js';

let next = 0;
function lease(
  owner: string | null,
  options: { checkpoint?: string; key?: string; counter?: number } = {},
): Lease {
  next += 1;
  return leaseFromInit({
    leaseKey: options.key ?? `shardId-${String(next).padStart(4, '0')}`,
    checkpoint: ExtendedSequenceNumber.of(options.checkpoint ?? '100'),
    owner,
    leaseCounter: options.counter ?? 10 + next,
  });
}

function held(owner: string | null, count: number, checkpoint?: string): Lease[] {
  return Array.from({ length: count }, () => lease(owner, checkpoint === undefined ? {} : { checkpoint }));
}

function plan(overrides: Partial<RebalanceInput> & Pick<RebalanceInput, 'leases'>) {
  return planRebalance({
    workerId: 'me',
    isExpired: () => false,
    liveWorkerIds: [],
    maxLeasesToSteal: 1,
    random: () => 0,
    ...overrides,
  });
}

describe('planRebalance: taking free and expired leases', () => {
  it('alone, takes every free lease, with the counter it saw', () => {
    const leases = held(null, 4);
    const result = plan({ leases });
    expect(result.diagnostics).toMatchObject({ target: 4, workers: ['me'], freeLeases: 4, heldAfter: 4 });
    expect(result.takes).toHaveLength(4);
    expect(new Set(result.takes.map((take) => take.leaseKey))).toEqual(
      new Set(leases.map((l) => l.leaseKey)),
    );
    for (const take of result.takes) {
      const source = leases.find((l) => l.leaseKey === take.leaseKey) as Lease;
      expect(take).toEqual({
        leaseKey: source.leaseKey,
        leaseCounter: source.leaseCounter,
        previousOwner: null,
        reason: 'free',
        complete: false,
      });
    }
  });

  it('takes free leases only up to ceil(incomplete / workers)', () => {
    const result = plan({ leases: held(null, 10), liveWorkerIds: ['a', 'b'] });
    expect(result.diagnostics).toMatchObject({ target: 4, workers: ['a', 'b', 'me'], takenFree: 4 });
    expect(result.takes).toHaveLength(4);
  });

  it('takes expired leases of a silent worker, naming it', () => {
    const dead = held('dead', 3);
    const result = plan({
      leases: [...dead, ...held('b', 3)],
      isExpired: (key) => dead.some((l) => l.leaseKey === key),
      liveWorkerIds: ['b'],
    });
    // The silent worker counts no more: 6 leases over me and b.
    expect(result.diagnostics).toMatchObject({
      workers: ['b', 'me'],
      target: 3,
      expiredLeases: 3,
      leaseCounts: { b: 3, me: 0 },
    });
    expect(result.takes.map((take) => [take.reason, take.previousOwner])).toEqual([
      ['expired', 'dead'],
      ['expired', 'dead'],
      ['expired', 'dead'],
    ]);
  });

  it('counts an owner of unexpired leases even when it is not in the registry', () => {
    const result = plan({ leases: [...held('unlisted', 6), ...held(null, 2)] });
    expect(result.diagnostics).toMatchObject({ workers: ['me', 'unlisted'], target: 4 });
    // 8 leases over 2 workers: target 4. 2 free leases, then a steal: min(deficit 2, cap 1, 6 - 4) = 1.
    expect(result.takes.map((take) => take.reason)).toEqual(['free', 'free', 'steal']);
  });

  it('treats its own expired lease as available again', () => {
    const mine = lease('me', { key: 'mine' });
    const result = plan({ leases: [mine], isExpired: () => true });
    expect(result.takes).toEqual([
      {
        leaseKey: 'mine',
        leaseCounter: mine.leaseCounter,
        previousOwner: 'me',
        reason: 'expired',
        complete: false,
      },
    ]);
  });

  it('prefers ready leases among free ones when the caller can tell', () => {
    const leases = held(null, 6);
    const ready = new Set([leases[4]?.leaseKey, leases[5]?.leaseKey]);
    const result = plan({ leases, liveWorkerIds: ['a', 'b'], isReady: (l) => ready.has(l.leaseKey) });
    expect(result.takes.slice(0, 2).map((take) => ready.has(take.leaseKey))).toEqual([true, true]);
    expect(result.takes).toHaveLength(2);
  });

  it('plans nothing without leases', () => {
    expect(plan({ leases: [], liveWorkerIds: ['a'] })).toMatchObject({
      takes: [],
      diagnostics: { target: 0, incompleteLeases: 0 },
    });
  });
});

describe('planRebalance: stealing', () => {
  it.each([
    // [label, my count, other counts, cap, expected steals]
    ['a newcomer steals one per check by default', 0, [10], 1, 1],
    ['a larger cap steals up to the deficit', 0, [10], 10, 5],
    ['the deficit bounds the steal', 3, [9, 3], 10, 2],
    ['no steal when the leader is only one ahead', 4, [5], 10, 0],
    ['no steal at target', 5, [7, 3], 10, 0],
    ['a victim at target gives one lease to a thief short by more (3,3,3,1)', 1, [3, 3, 3], 10, 1],
    ['a victim one above target gives only that one, whatever the cap', 0, [5, 5], 10, 1],
    ['the victim keeps its target: 9 over a target of 5 gives 4', 0, [9], 10, 4],
    ['a cap of 0 never steals', 0, [10], 0, 0],
  ])('%s', (_label, mine, others, cap, steals) => {
    const leases = [...held('me', mine), ...others.flatMap((count, index) => held(`w${index}`, count))];
    const result = plan({
      leases,
      maxLeasesToSteal: cap,
      liveWorkerIds: others.map((_, index) => `w${index}`),
    });
    expect(result.diagnostics.stolen).toBe(steals);
    expect(result.takes.filter((take) => take.reason === 'steal')).toHaveLength(steals);
    expect(result.diagnostics.heldAfter).toBeLessThanOrEqual(result.diagnostics.target);
  });

  it('steals a lease its owner has checkpointed since taking it before one it has just taken', () => {
    for (const draw of [0, 0.5, 0.99]) {
      const fresh = held('a', 3).map((candidate) => ({ ...candidate, ownerSwitchesSinceCheckpoint: 1 }));
      const settled = { ...lease('a'), ownerSwitchesSinceCheckpoint: 0 };
      const result = plan({ leases: [...fresh, settled], liveWorkerIds: ['a'], random: () => draw });
      expect(result.takes.map((take) => [take.leaseKey, take.reason])).toEqual([[settled.leaseKey, 'steal']]);
    }
  });

  it('steals only from the single most loaded worker', () => {
    const leases = [...held('a', 9), ...held('b', 8), ...held('c', 1)];
    const result = plan({ leases, maxLeasesToSteal: 10 });
    // 18 leases over 4 workers: target 5. From a, down to the target: min(deficit 5, cap 10, 9 - 5) = 4.
    expect(result.diagnostics).toMatchObject({
      target: 5,
      mostLoadedWorker: 'a',
      mostLoadedCount: 9,
      stolen: 4,
    });
    expect(new Set(result.takes.map((take) => take.previousOwner))).toEqual(new Set(['a']));
  });

  it('breaks ties between equally loaded workers with the random source', () => {
    const leases = [...held('a', 6), ...held('b', 6)];
    const victims = [0, 0.99].map(
      (value) => plan({ leases, random: () => value }).diagnostics.mostLoadedWorker,
    );
    expect(victims).toEqual(['a', 'b']);
  });

  it('takes free leases before stealing, and steals in the same plan only if still short', () => {
    const leases = [...held('a', 10), ...held(null, 2)];
    const result = plan({ leases, maxLeasesToSteal: 10 });
    // 12 over 2: target 6; 2 free, then 4 more from a (a keeps its target of 6).
    expect(result.takes.map((take) => take.reason)).toEqual([
      'free',
      'free',
      'steal',
      'steal',
      'steal',
      'steal',
    ]);
  });
});

describe('planRebalance: complete leases and caps', () => {
  it('does not count SHARD_END leases toward targets, but takes free ones, spread over the workers', () => {
    const leases = [
      ...held('a', 2),
      ...held('me', 2),
      ...held(null, 5, 'SHARD_END'),
      ...held('a', 4, 'SHARD_END'),
    ];
    const result = plan({ leases });
    expect(result.diagnostics).toMatchObject({
      incompleteLeases: 4,
      target: 2,
      leaseCounts: { a: 2, me: 2 },
      availableCompleteLeases: 5,
      takenComplete: 3,
      heldAfter: 2,
    });
    expect(result.takes.every((take) => take.complete && take.reason === 'free')).toBe(true);
  });

  it('caps the target at maxLeasesForWorker and reports the spillover', () => {
    const result = plan({ leases: held(null, 10), maxLeasesForWorker: 3 });
    expect(result.diagnostics).toMatchObject({ uncappedTarget: 10, target: 3, spillover: 7 });
    expect(result.takes).toHaveLength(3);
  });
});

describe('fairShare', () => {
  const counts = (entries: Record<string, number>) => new Map(Object.entries(entries));

  it.each([
    // [label, counts, available, expected share per worker]
    ['raises the lowest first', { a: 2, b: 5, me: 3 }, 4, { a: 3, b: 0, me: 2 }],
    ['stops at a level below the others', { a: 1, b: 9, me: 1 }, 4, { a: 2, b: 0, me: 2 }],
    [
      'gives the few left over one each to whoever comes first',
      { a: 5, b: 5, me: 5 },
      2,
      { a: 1, b: 1, me: 1 },
    ],
    ['alone, everything', { me: 0 }, 7, { me: 7 }],
    ['nothing available, nothing to share', { a: 0, me: 3 }, 0, { a: 0, me: 0 }],
  ])('%s', (_label, entries, available, expected) => {
    const map = counts(entries);
    for (const [worker, share] of Object.entries(expected)) {
      expect(fairShare(map, available, worker)).toBe(share);
    }
  });

  it('never leaves the spread wider than one, however many take their share in turn', () => {
    const map = counts({ a: 0, b: 3, c: 3, d: 7, me: 1 });
    let available = 11;
    for (const worker of ['c', 'me', 'a', 'd', 'b', 'a', 'me']) {
      const share = fairShare(map, available, worker);
      map.set(worker, (map.get(worker) ?? 0) + share);
      available -= share;
    }
    expect(available).toBe(0);
    const raised = [...map].filter(([worker]) => worker !== 'd').map(([, count]) => count);
    expect(Math.max(...raised) - Math.min(...raised)).toBeLessThanOrEqual(1);
    expect(map.get('d')).toBe(7);
  });
});

describe('planRebalance: sharing free and expired leases', () => {
  it('leaves the leases it would overshoot with to a worker holding fewer', () => {
    // 30 leases over me (10), low (6) and high (10), 4 free: low should get them all.
    const leases = [...held('me', 10), ...held('low', 6), ...held('high', 10), ...held(null, 4)];
    const result = plan({ leases });
    expect(result.diagnostics).toMatchObject({ target: 10, share: 0 });
    expect(result.takes).toEqual([]);
    const low = plan({ leases, workerId: 'low' });
    expect(low.diagnostics.share).toBe(4);
    expect(low.takes.map((take) => take.reason)).toEqual(['free', 'free', 'free', 'free']);
  });

  it('does not share with a worker that holds fewer leases than at the previous plan', () => {
    const lapsing = held('dead', 3);
    const leases = [
      ...held('me', 5),
      ...lapsing,
      ...held('shrinking', 2),
      ...held(null, 4),
      ...held('newcomer', 1),
    ];
    const asNewcomer = { leases, workerId: 'newcomer' };
    // Everyone counted: 4 free leases raise newcomer (1) and shrinking (2) to 3, then one left over.
    expect(plan(asNewcomer).diagnostics.share).toBe(3);
    // One of dead's 3 leases has expired (it is not renewing) and shrinking held 4 at the previous plan
    // (stolen from): the 5 available leases are shared between me (5) and newcomer (1) only.
    const result = plan({
      ...asNewcomer,
      isExpired: (key) => key === lapsing[0]?.leaseKey,
      previousLeaseCounts: new Map([
        ['dead', 3],
        ['shrinking', 4],
      ]),
    });
    expect(result.diagnostics).toMatchObject({ share: 5, target: 4, heldAfter: 4 });
  });

  it('takes overdue leases up to the target, whatever the shares', () => {
    const free = held(null, 4);
    const overdue = new Set(free.slice(0, 2).map((l) => l.leaseKey));
    // 26 leases over me (8), low (4) and high (10): target 9, and all 4 free leases are low's share.
    const leases = [...held('me', 8), ...held('low', 4), ...held('high', 10), ...free];
    expect(plan({ leases }).takes).toEqual([]);
    const result = plan({ leases, isOverdue: (key) => overdue.has(key) });
    expect(result.diagnostics).toMatchObject({ share: 0, target: 9, heldAfter: 9 });
    expect(result.takes).toHaveLength(1);
    expect(overdue.has(result.takes[0]?.leaseKey ?? '')).toBe(true);
  });

  it('among equal candidates takes the lease that expired last first', () => {
    const expired = held('dead', 4);
    const changedAt = new Map(expired.map((l, index) => [l.leaseKey, index * 1_000]));
    for (const draw of [0, 0.5, 0.99]) {
      const result = plan({
        leases: [...expired, ...held('a', 2), ...held('b', 2)],
        liveWorkerIds: ['a', 'b'],
        isExpired: (key) => changedAt.has(key),
        lastChangeAt: (key) => changedAt.get(key),
        random: () => draw,
      });
      // 8 over a, b and me: target 3, and a share of 3 (me from 0 to level 2 with a and b, then one extra).
      expect(result.diagnostics).toMatchObject({ target: 3, share: 3 });
      expect(result.takes.map((take) => take.leaseKey)).toEqual(
        [expired[3], expired[2], expired[1]].map((l) => l?.leaseKey),
      );
    }
  });

  it('does not steal while free or expired leases are left, or while told to hold', () => {
    const leases = [...held('me', 2), ...held('low', 1), ...held('big', 9), ...held(null, 2)];
    // 14 over 3: target 5. The 2 free leases are low's share; me would steal from big, but waits.
    const result = plan({ leases, maxLeasesToSteal: 10 });
    expect(result.diagnostics.stolen).toBe(0);
    const settled = [...held('me', 2), ...held('low', 3), ...held('big', 9)];
    expect(plan({ leases: settled, maxLeasesToSteal: 10 }).diagnostics.stolen).toBe(3);
    expect(plan({ leases: settled, maxLeasesToSteal: 10, holdSteals: true }).diagnostics.stolen).toBe(0);
  });
});
