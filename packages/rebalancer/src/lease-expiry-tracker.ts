import type { Lease } from '@kcl/core';
import type { CounterReader } from './counter-change-tracker.js';
import { CounterChangeTracker } from './counter-change-tracker.js';

export interface LeaseExpiryTrackerOptions {
  /**
   * A lease whose counter has not changed for longer than this is expired: a positive number of
   * milliseconds, already checked (`createRebalancer` checks its options; the consumer its own).
   */
  readonly leaseExpiryMs: number;
}

/** What the tracker reads from a lease. */
export type TrackedLease = Pick<Lease, 'leaseKey' | 'owner' | 'leaseCounter'>;

const LEASE_READER: CounterReader<TrackedLease> = {
  key: (lease) => lease.leaseKey,
  counter: (lease) => lease.leaseCounter,
  // Nobody renews an unowned lease: infinitely old. An owned one gets the benefit of the doubt.
  firstSightAt: (lease, now) => (lease.owner === null ? Number.NEGATIVE_INFINITY : now),
};

/**
 * Judges lease expiry from counter changes this process observed, at monotonic times the caller passes
 * in (`Clock.monotonicNow()`), never from timestamps written by other machines:
 * - seen before, counter unchanged: keeps the time of the last change;
 * - counter changed: the change is dated `now`;
 * - first sight of an unowned lease: infinitely old (expired) — nobody is renewing it;
 * - first sight of an owned lease: fresh (`now`) — its owner gets one full expiry period to show it
 *   is alive, so a worker that just started does not steal from a healthy fleet;
 * - leases missing from a listing are forgotten.
 * Expired means `now − lastChange > leaseExpiryMs`.
 */
export class LeaseExpiryTracker {
  readonly leaseExpiryMs: number;
  readonly #tracker = new CounterChangeTracker();

  constructor(options: LeaseExpiryTrackerOptions) {
    this.leaseExpiryMs = options.leaseExpiryMs;
  }

  /** Records a full listing of the application's leases, made at monotonic time `now`. */
  observe(leases: Iterable<TrackedLease>, now: number): void {
    this.#tracker.observeAll(leases, LEASE_READER, now);
  }

  /**
   * Records a write this worker made (a take or renew that returned `leaseCounter`), dated `now`, so
   * the lease is fresh at once instead of at the next listing.
   */
  recordWrite(leaseKey: string, leaseCounter: number, now: number): void {
    this.#tracker.recordChange(leaseKey, leaseCounter, now);
  }

  /** The monotonic time the lease's counter was last seen to change (-Infinity: never); undefined if unknown. */
  lastChangeAt(leaseKey: string): number | undefined {
    return this.#tracker.lastChangeAt(leaseKey);
  }

  /** True when the lease has not been seen to change within the expiry. Unknown leases count as expired. */
  isExpired(leaseKey: string, now: number): boolean {
    const lastChange = this.#tracker.lastChangeAt(leaseKey);
    return lastChange === undefined || now - lastChange > this.leaseExpiryMs;
  }

  /** The keys of every tracked lease that is expired at `now`. */
  expiredLeaseKeys(now: number): Set<string> {
    const expired = new Set<string>();
    for (const key of this.#tracker.keys()) if (this.isExpired(key, now)) expired.add(key);
    return expired;
  }

  /** How many leases are tracked. */
  get size(): number {
    return this.#tracker.size;
  }
}
