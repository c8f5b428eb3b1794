import { ManualClock } from '@kcl/testkit';
import { describe, expect, it } from 'vitest';
import { LeaseExpiryTracker } from './lease-expiry-tracker.js';

const EXPIRY = 45_000;

function owned(leaseKey: string, leaseCounter: number, owner = 'worker-a') {
  return { leaseKey, owner, leaseCounter };
}

describe('LeaseExpiryTracker', () => {
  it('treats an owned lease seen for the first time as fresh for one expiry period', async () => {
    const clock = new ManualClock({ monotonic: 1_000 });
    const tracker = new LeaseExpiryTracker({ leaseExpiryMs: EXPIRY });
    tracker.observe([owned('a', 7)], clock.monotonicNow());
    expect(tracker.lastChangeAt('a')).toBe(1_000);
    await clock.advance(EXPIRY);
    tracker.observe([owned('a', 7)], clock.monotonicNow());
    expect(tracker.isExpired('a', clock.monotonicNow())).toBe(false);
    await clock.advance(1);
    expect(tracker.isExpired('a', clock.monotonicNow())).toBe(true);
  });

  it('treats an unowned lease seen for the first time as infinitely old', () => {
    const tracker = new LeaseExpiryTracker({ leaseExpiryMs: EXPIRY });
    tracker.observe([{ leaseKey: 'free', owner: null, leaseCounter: 0 }], 0);
    expect(tracker.lastChangeAt('free')).toBe(Number.NEGATIVE_INFINITY);
    expect(tracker.isExpired('free', 0)).toBe(true);
  });

  it('dates a counter change at the listing that saw it, and keeps that date while the counter stays', async () => {
    const clock = new ManualClock({ monotonic: 0 });
    const tracker = new LeaseExpiryTracker({ leaseExpiryMs: EXPIRY });
    tracker.observe([owned('a', 1)], clock.monotonicNow());
    await clock.advance(30_000);
    tracker.observe([owned('a', 2)], clock.monotonicNow());
    expect(tracker.lastChangeAt('a')).toBe(30_000);
    await clock.advance(30_000);
    tracker.observe([owned('a', 2)], clock.monotonicNow());
    expect(tracker.lastChangeAt('a')).toBe(30_000);
    expect(tracker.isExpired('a', clock.monotonicNow())).toBe(false);
    await clock.advance(15_001);
    tracker.observe([owned('a', 2)], clock.monotonicNow());
    expect(tracker.isExpired('a', clock.monotonicNow())).toBe(true);
    expect(tracker.expiredLeaseKeys(clock.monotonicNow())).toEqual(new Set(['a']));
  });

  it('revives a lease whose counter moves again, whoever writes it', () => {
    const tracker = new LeaseExpiryTracker({ leaseExpiryMs: 10 });
    tracker.observe([{ leaseKey: 'a', owner: null, leaseCounter: 3 }], 0);
    expect(tracker.isExpired('a', 0)).toBe(true);
    tracker.observe([owned('a', 4, 'worker-b')], 5);
    expect(tracker.isExpired('a', 15)).toBe(false);
    expect(tracker.isExpired('a', 16)).toBe(true);
  });

  it('forgets leases missing from a listing, and then treats them as unknown (expired)', () => {
    const tracker = new LeaseExpiryTracker({ leaseExpiryMs: EXPIRY });
    tracker.observe([owned('a', 1), owned('b', 1)], 0);
    tracker.observe([owned('b', 1)], 1);
    expect(tracker.size).toBe(1);
    expect(tracker.lastChangeAt('a')).toBeUndefined();
    expect(tracker.isExpired('a', 1)).toBe(true);
    // Seen again later: first sight rules apply anew.
    tracker.observe([owned('a', 1), owned('b', 1)], 2);
    expect(tracker.lastChangeAt('a')).toBe(2);
  });

  it('dates this worker’s own writes at once', () => {
    const tracker = new LeaseExpiryTracker({ leaseExpiryMs: 100 });
    tracker.observe([{ leaseKey: 'a', owner: null, leaseCounter: 1 }], 0);
    tracker.recordWrite('a', 2, 50);
    expect(tracker.lastChangeAt('a')).toBe(50);
    // The next listing shows the counter it wrote: no further change.
    tracker.observe([owned('a', 2)], 120);
    expect(tracker.lastChangeAt('a')).toBe(50);
    expect(tracker.isExpired('a', 151)).toBe(true);
  });
});
