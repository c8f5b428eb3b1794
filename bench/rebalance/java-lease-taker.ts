import type { Lease, RandomSource } from '@kcl/core';
import { shuffled } from '@kcl/core';

export interface JavaLeaseTakerOptions {
  readonly workerId: string;
  /** `failoverTimeMillis`: the lease duration. */
  readonly failoverTimeMs: number;
  readonly maxLeasesToStealAtOneTime: number;
  readonly maxLeasesForWorker?: number;
  /** `veryOldLeaseDurationNanosMultiplier`, default 3. */
  readonly veryOldMultiplier?: number;
  /** `enablePriorityLeaseAssignment`, default true. */
  readonly priorityLeaseAssignment?: boolean;
  readonly random: RandomSource;
}

/** A lease the taker wants, with the counter it saw (its conditional take names it). */
export interface JavaTake {
  readonly leaseKey: string;
  readonly leaseCounter: number;
  readonly steal: boolean;
}

/** What the taker keeps of a lease from its last scan (a copy: the listing may change later). */
interface Tracked {
  readonly lease: { readonly leaseKey: string; readonly owner: string | null; readonly leaseCounter: number };
  lastCounterIncrement: number;
}

/**
 * A model of the Java KCL 2.x `DynamoDBLeaseTaker.takeLeases` (kcl-behaviour.md §3.1), for comparison only:
 * scan; local expiry against the previous scan (first sight: unowned = never renewed, owned = renewed
 * now); available = unowned or expired; counts of non-available leases per owner plus this worker;
 * target = 1 if workers ≥ leases, else ceil(leases / workers) capped by maxLeasesForWorker; "very old"
 * leases (not seen to change for 3 × failover, which includes new unowned ones) are all taken at once,
 * ignoring the target; else random available leases up to the target; else, with nothing available,
 * steal min(needed, its − target) (1 if that is 0 and needed > 1), capped by maxLeasesToStealAtOneTime,
 * from the single most loaded worker (the first one found with the highest count).
 */
export class JavaLeaseTaker {
  readonly workerId: string;
  readonly #options: JavaLeaseTakerOptions;
  readonly #all = new Map<string, Tracked>();

  constructor(options: JavaLeaseTakerOptions) {
    this.workerId = options.workerId;
    this.#options = options;
  }

  /** One `takeLeases` cycle over a listing made at `now` (ms). Returns the leases to take. */
  plan(listing: readonly Lease[], now: number): JavaTake[] {
    this.#scan(listing, now);
    const { failoverTimeMs, random } = this.#options;
    const maxLeasesForWorker = this.#options.maxLeasesForWorker ?? Number.MAX_SAFE_INTEGER;
    const available: Tracked[] = [];
    for (const tracked of this.#all.values()) {
      if (tracked.lease.owner === null || now - tracked.lastCounterIncrement > failoverTimeMs)
        available.push(tracked);
    }
    const availableKeys = new Set(available.map((tracked) => tracked.lease.leaseKey));
    // HashMap iteration order in Java is arbitrary but fixed; listing order stands in for it here.
    const counts = new Map<string, number>();
    for (const tracked of this.#all.values()) {
      if (availableKeys.has(tracked.lease.leaseKey)) continue;
      const owner = tracked.lease.owner as string;
      counts.set(owner, (counts.get(owner) ?? 0) + 1);
    }
    if (!counts.has(this.workerId)) counts.set(this.workerId, 0);

    const numLeases = this.#all.size;
    const numWorkers = counts.size;
    if (numLeases === 0) return [];
    let target = numWorkers >= numLeases ? 1 : Math.ceil(numLeases / numWorkers);
    if (numWorkers < numLeases && target > maxLeasesForWorker) target = maxLeasesForWorker;
    const myCount = counts.get(this.workerId) ?? 0;
    let needed = target - myCount;

    if (this.#options.priorityLeaseAssignment ?? true) {
      const threshold = (this.#options.veryOldMultiplier ?? 3) * failoverTimeMs;
      const veryOld = [...this.#all.values()].filter(
        (tracked) => now - tracked.lastCounterIncrement > threshold,
      );
      if (veryOld.length > 0) {
        const count = Math.max(0, Math.min(maxLeasesForWorker - myCount, veryOld.length));
        return shuffled(veryOld, random)
          .slice(0, count)
          .map((tracked) => ({
            leaseKey: tracked.lease.leaseKey,
            leaseCounter: tracked.lease.leaseCounter,
            steal: false,
          }));
      }
    }
    if (needed <= 0) return [];
    if (available.length > 0) {
      const takes: JavaTake[] = [];
      for (const tracked of shuffled(available, random)) {
        if (needed <= 0) break;
        takes.push({
          leaseKey: tracked.lease.leaseKey,
          leaseCounter: tracked.lease.leaseCounter,
          steal: false,
        });
        needed -= 1;
      }
      return takes;
    }
    return this.#chooseLeasesToSteal(counts, needed, target);
  }

  /** After a successful take: the lease counts as renewed now (`lastCounterIncrementNanos = nanoTime()`). */
  recordTake(leaseKey: string, now: number): void {
    const tracked = this.#all.get(leaseKey);
    if (tracked !== undefined) tracked.lastCounterIncrement = now;
  }

  #chooseLeasesToSteal(counts: Map<string, number>, needed: number, target: number): JavaTake[] {
    let mostLoaded: [string, number] | null = null;
    for (const entry of counts) {
      if (mostLoaded === null || mostLoaded[1] < entry[1]) mostLoaded = entry;
    }
    if (mostLoaded === null) return [];
    let count = 0;
    if (mostLoaded[1] >= target && needed > 0) {
      count = Math.min(needed, mostLoaded[1] - target);
      if (needed > 1 && count === 0) count = 1;
      count = Math.min(count, this.#options.maxLeasesToStealAtOneTime);
    }
    if (count <= 0) return [];
    const victim = mostLoaded[0];
    const candidates = [...this.#all.values()].filter((tracked) => tracked.lease.owner === victim);
    return shuffled(candidates, this.#options.random)
      .slice(0, count)
      .map((tracked) => ({
        leaseKey: tracked.lease.leaseKey,
        leaseCounter: tracked.lease.leaseCounter,
        steal: true,
      }));
  }

  #scan(listing: readonly Lease[], now: number): void {
    const notUpdated = new Set(this.#all.keys());
    for (const lease of listing) {
      const old = this.#all.get(lease.leaseKey);
      notUpdated.delete(lease.leaseKey);
      let lastCounterIncrement: number;
      if (old !== undefined) {
        lastCounterIncrement = old.lease.leaseCounter === lease.leaseCounter ? old.lastCounterIncrement : now;
      } else {
        lastCounterIncrement = lease.owner === null ? Number.NEGATIVE_INFINITY : now;
      }
      // Re-inserting keeps Map order equal to the listing order of first sight, like a stable HashMap.
      this.#all.set(lease.leaseKey, {
        lease: { leaseKey: lease.leaseKey, owner: lease.owner, leaseCounter: lease.leaseCounter },
        lastCounterIncrement,
      });
    }
    for (const key of notUpdated) this.#all.delete(key);
  }
}
