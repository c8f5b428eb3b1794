import type { Lease, RandomSource, WorkerRecord } from '@kcl/core';
import { OptionProblems, systemRandom } from '@kcl/core';
import { LeaseExpiryTracker } from './lease-expiry-tracker.js';
import type { PlannedLease, RebalancePlan } from './plan-rebalance.js';
import { planRebalance } from './plan-rebalance.js';
import { WorkerLivenessTracker } from './worker-liveness-tracker.js';

export interface RebalancerOptions {
  readonly workerId: string;
  /** A lease not seen to change for longer than this is expired (the consumer's `leaseExpiryMs`). */
  readonly leaseExpiryMs: number;
  /** A worker whose heartbeat is not seen to change for longer than this is gone. Default: `leaseExpiryMs`. */
  readonly workerExpiryMs?: number;
  /** The most leases stolen per plan; 0: this worker never steals. Default 1. */
  readonly maxLeasesToSteal?: number;
  /** The most incomplete leases this worker holds. Default: no cap. */
  readonly maxLeasesForWorker?: number;
  /** Default: `systemRandom` from @kcl/core. Tests pass a seeded one. */
  readonly random?: RandomSource;
}

/** One round's input: a lease listing and a registry listing, both made at monotonic time `now`. */
export interface RebalanceSnapshot {
  readonly leases: readonly Lease[];
  readonly workers: readonly Pick<WorkerRecord, 'workerId' | 'heartbeat'>[];
  /** `Clock.monotonicNow()` right after the listings. */
  readonly now: number;
  /** Optional readiness (parents finished or gone), to prefer ready leases among free ones. */
  readonly isReady?: (lease: PlannedLease) => boolean;
}

/**
 * A worker's planner with its memory: the lease expiry and worker liveness trackers persist across
 * rounds, because expiry can only be judged by seeing counters (not) change over time. It does no I/O:
 * the runtime lists, calls `plan`, then takes each planned lease with its observed counter.
 */
export interface Rebalancer {
  readonly workerId: string;
  readonly leaseExpiry: LeaseExpiryTracker;
  readonly workerLiveness: WorkerLivenessTracker;
  /** Feeds the trackers with the listings and plans this round's takes. */
  plan(snapshot: RebalanceSnapshot): RebalancePlan;
  /** Records a successful take (or renew) of this worker, so the trackers date it `now`. */
  recordTake(lease: Pick<Lease, 'leaseKey' | 'leaseCounter'>, now: number): void;
}

/**
 * Validates the options (listing every problem at once) and builds a rebalancer. This is the package's
 * boundary: the trackers it builds take the checked values as they are.
 */
export function createRebalancer(options: RebalancerOptions): Rebalancer {
  const given = (options ?? {}) as Partial<RebalancerOptions>;
  const check = new OptionProblems('@kcl/rebalancer');
  const workerId = check.string('workerId', given.workerId, undefined, 'the worker that plans');
  if (given.leaseExpiryMs === undefined)
    check.add('leaseExpiryMs is required: the lease expiry in milliseconds');
  const leaseExpiryMs = check.number('leaseExpiryMs', given.leaseExpiryMs, 1, { min: 1 });
  const workerExpiryMs = check.number('workerExpiryMs', given.workerExpiryMs, leaseExpiryMs, { min: 1 });
  const maxLeasesToSteal = check.integer('maxLeasesToSteal', given.maxLeasesToSteal, 1, { min: 0 });
  const maxLeasesForWorker = check.optionalInteger('maxLeasesForWorker', given.maxLeasesForWorker, {
    min: 1,
  });
  const random = check.random('random', given.random, systemRandom);
  check.throwIfAny();

  const leaseExpiry = new LeaseExpiryTracker({ leaseExpiryMs });
  const workerLiveness = new WorkerLivenessTracker({ workerExpiryMs });

  // What the previous plan saw. leftForOthers: how many consecutive plans, each short of the target,
  // left a free or expired lease to another worker's share; after OVERDUE_AFTER_PLANS of them every
  // other worker has planned at least once (±25% jitter on equal intervals), so whoever the lease was
  // left to is not taking it. previousOwners and previousLeaseCounts: who held how many leases.
  let leftForOthers = new Map<string, number>();
  let previousOwners = new Set<string>();
  let previousLeaseCounts: ReadonlyMap<string, number> = new Map();

  return {
    workerId,
    leaseExpiry,
    workerLiveness,
    plan(snapshot) {
      leaseExpiry.observe(snapshot.leases, snapshot.now);
      workerLiveness.observe(snapshot.workers, snapshot.now);
      const isExpired = (leaseKey: string): boolean => leaseExpiry.isExpired(leaseKey, snapshot.now);
      const previous = leftForOthers;
      const owners = new Set<string>();
      for (const lease of snapshot.leases) if (lease.owner !== null) owners.add(lease.owner);
      // A worker that held leases at the previous plan and holds none now has left (crashed or stopped):
      // the others are still sharing out its leases, each seeing them expire at its own time.
      let ownerLeft = false;
      for (const owner of previousOwners) if (!owners.has(owner)) ownerLeft = true;
      previousOwners = owners;
      const plan = planRebalance({
        workerId,
        leases: snapshot.leases,
        isExpired,
        isOverdue: (leaseKey) => (previous.get(leaseKey) ?? 0) >= OVERDUE_AFTER_PLANS,
        holdSteals: ownerLeft,
        lastChangeAt: (leaseKey) => leaseExpiry.lastChangeAt(leaseKey),
        previousLeaseCounts,
        liveWorkerIds: workerLiveness.liveWorkerIds(snapshot.now),
        maxLeasesToSteal,
        ...(maxLeasesForWorker === undefined ? {} : { maxLeasesForWorker }),
        random,
        ...(snapshot.isReady === undefined ? {} : { isReady: snapshot.isReady }),
      });
      previousLeaseCounts = new Map(Object.entries(plan.diagnostics.leaseCounts));
      leftForOthers = new Map();
      if (plan.diagnostics.heldAfter < plan.diagnostics.target) {
        const taken = new Set(plan.takes.map((take) => take.leaseKey));
        for (const lease of snapshot.leases) {
          if (taken.has(lease.leaseKey) || lease.checkpoint.isShardEnd) continue;
          if (lease.owner === null || isExpired(lease.leaseKey)) {
            leftForOthers.set(lease.leaseKey, (previous.get(lease.leaseKey) ?? 0) + 1);
          }
        }
      }
      return plan;
    },
    recordTake(lease, now) {
      leaseExpiry.recordWrite(lease.leaseKey, lease.leaseCounter, now);
    },
  };
}

/** Plans of this worker that must have left a lease to others before it takes the lease beyond its share. */
const OVERDUE_AFTER_PLANS = 2;
