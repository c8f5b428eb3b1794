import type { Lease, RandomSource, WorkerRecord } from '@kcl/core';
import { isLeaseComplete } from '@kcl/core';
import { createRebalancer } from '@kcl/rebalancer';
import type { RebalanceFigures } from '../metrics/worker-metrics.js';

export interface LeasePlanInput {
  readonly leases: readonly Lease[];
  readonly workers: readonly WorkerRecord[];
  /** Leases this process holds right now. */
  readonly heldLeaseKeys: ReadonlySet<string>;
  /** Monotonic time of the listings. */
  readonly now: number;
  /**
   * Wall-clock time of the listings, to tell a hand-off past its deadline (its requester fell back, or
   * failed to, and will not settle it); absent: no deadline has passed.
   */
  readonly wallNow?: number;
  /**
   * The hand-offs this worker is waiting on; absent: every hand-off to this worker is waited on. One
   * it no longer waits on (its fallback steal failed, or it restarted) is the owner's again, so the
   * next plan can steal it.
   */
  readonly waitingHandoffs?: ReadonlySet<string>;
  /**
   * Workers found dead by their database session (session liveness): their leases are free to take now,
   * and they count for no share.
   */
  readonly deadOwners?: ReadonlySet<string>;
  /** Workers found dead whose registry rows linger: left out of the fair share (their leases aside). */
  readonly goneWorkers?: ReadonlySet<string>;
}

export interface LeasePlan {
  readonly take: ReadonlyArray<{ readonly lease: Lease; readonly stolen: boolean }>;
  readonly diagnostics: RebalanceFigures;
}

/** Decides which leases a worker takes each rebalance; keeps expiry memory between rounds. */
export interface LeasePlanner {
  plan(input: LeasePlanInput): LeasePlan;
  /** Tells the planner this worker wrote the lease at `now` (its counter moved because of us). */
  recordTake(lease: Lease, now: number): void;
}

/** Checked options (`resolveConsumerOptions`), passed on as they are. */
export interface LeasePlannerOptions {
  readonly workerId: string;
  readonly leaseExpiryMs: number;
  /** 0: this worker never steals. */
  readonly maxLeasesToSteal: number;
  readonly maxLeasesForWorker: number;
  readonly random: RandomSource;
}

/**
 * A lease whose owner was asked to hand it over counts as the requester's: the requester does not
 * steal beyond its share while it waits, and the others do not steal from the owner what it is
 * already giving away. The owner itself still counts it as its own until it has handed it over (or it
 * would plan to take a lease it still holds). A hand-off nobody settles any more — one lease expiry
 * past its deadline (the deadline is the requester's wall clock: the margin keeps a worker whose clock
 * runs ahead from stealing before the requester itself gives up), or one this worker asked for and no
 * longer waits on — is the owner's again, so a plan can steal it
 * (by a direct take, which clears the hand-off) and no lease stays pinned to a stuck owner. A hand-off
 * whose owner stopped renewing is expired like any lease.
 */
function viewedWithHandoff(
  lease: Lease,
  workerId: string,
  input: LeasePlanInput,
  skewAllowanceMs: number,
): Lease {
  const handoff = lease.handoff;
  if (handoff === null || handoff.from !== lease.owner || handoff.from === workerId) return lease;
  // A hand-off to a worker found dead by its session will never be taken up: the lease is the owner's.
  if (input.deadOwners?.has(handoff.to) === true) return lease;
  const abandoned =
    handoff.to === workerId
      ? input.waitingHandoffs !== undefined && !input.waitingHandoffs.has(lease.leaseKey)
      : handoff.deadline !== null &&
        input.wallNow !== undefined &&
        input.wallNow > handoff.deadline.getTime() + skewAllowanceMs;
  return abandoned ? lease : { ...lease, owner: handoff.to };
}

/**
 * The runtime's view on @kcl/rebalancer. Complete leases are left out: a worker releases a lease once
 * its shard has ended and its children exist, and the cleanup deletes it later, so nobody needs to
 * hold it. A lease the store says this worker owns but this process does not hold (a restart with the
 * same worker id, or a lease given up after a store outage) is offered to it as free. A lease in a
 * hand-off counts as the requester's (`viewedWithHandoff`).
 */
export function createLeasePlanner(options: LeasePlannerOptions): LeasePlanner {
  const rebalancer = createRebalancer({
    workerId: options.workerId,
    leaseExpiryMs: options.leaseExpiryMs,
    maxLeasesToSteal: options.maxLeasesToSteal,
    ...(Number.isFinite(options.maxLeasesForWorker)
      ? { maxLeasesForWorker: options.maxLeasesForWorker }
      : {}),
    random: options.random,
  });
  return {
    plan(input) {
      const byKey = new Map<string, Lease>();
      const view: Lease[] = [];
      for (const lease of input.leases) {
        if (isLeaseComplete(lease)) continue;
        byKey.set(lease.leaseKey, lease);
        const stale = lease.owner === options.workerId && !input.heldLeaseKeys.has(lease.leaseKey);
        const dead = lease.owner !== null && input.deadOwners?.has(lease.owner) === true;
        view.push(
          stale || dead
            ? { ...lease, owner: null, handoff: null }
            : viewedWithHandoff(lease, options.workerId, input, options.leaseExpiryMs),
        );
      }
      const dead = input.deadOwners;
      const gone = input.goneWorkers;
      const workers =
        (dead === undefined || dead.size === 0) && (gone === undefined || gone.size === 0)
          ? input.workers
          : input.workers.filter(
              (worker) => dead?.has(worker.workerId) !== true && gone?.has(worker.workerId) !== true,
            );
      const plan = rebalancer.plan({ leases: view, workers, now: input.now });
      const take: Array<{ lease: Lease; stolen: boolean }> = [];
      for (const planned of plan.takes) {
        const lease = byKey.get(planned.leaseKey);
        if (lease === undefined || planned.complete) continue;
        take.push({ lease, stolen: planned.reason === 'steal' });
      }
      const diagnostics = plan.diagnostics;
      return {
        take,
        diagnostics: {
          totalLeases: diagnostics.totalLeases,
          numWorkers: diagnostics.workers.length,
          expiredLeases: diagnostics.expiredLeases,
          neededLeases: Math.max(0, diagnostics.target - diagnostics.heldBefore),
          leasesToTake: take.length,
          target: diagnostics.target,
        },
      };
    },
    recordTake(lease, now) {
      rebalancer.recordTake(lease, now);
    },
  };
}
