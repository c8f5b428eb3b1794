import type { Lease, RandomSource } from '@kcl/core';
import { shuffled } from '@kcl/core';

/**
 * What the planner reads from a lease. `ownerSwitchesSinceCheckpoint`, when given, lets steals prefer
 * leases whose owner has checkpointed since it took them.
 */
export type PlannedLease = Pick<Lease, 'leaseKey' | 'owner' | 'leaseCounter' | 'checkpoint'> &
  Partial<Pick<Lease, 'ownerSwitchesSinceCheckpoint'>>;

export interface RebalanceInput {
  /** The worker that plans (and will take). */
  readonly workerId: string;
  /** Every lease of the application, from one listing. */
  readonly leases: readonly PlannedLease[];
  /** Whether a lease is expired on this worker's clock (`LeaseExpiryTracker.isExpired` at the listing time). */
  readonly isExpired: (leaseKey: string) => boolean;
  /** Workers whose registry heartbeat is live (`WorkerLivenessTracker.liveWorkerIds`). */
  readonly liveWorkerIds: Iterable<string>;
  /** The most leases stolen in one plan; 0: no steals. */
  readonly maxLeasesToSteal: number;
  /** Never hold more incomplete leases than this (the target is capped; the excess is reported as spillover). */
  readonly maxLeasesForWorker?: number;
  /** Breaks ties: which free leases, which victim among equally loaded workers, which of its leases. */
  readonly random: RandomSource;
  /**
   * Optional: whether a lease could start processing now (its parents are finished or gone). Among
   * free and expired leases, ready ones are taken first; blocked children only fill what is left.
   */
  readonly isReady?: (lease: PlannedLease) => boolean;
  /**
   * Optional: whether a free or expired lease has waited long enough for the worker whose share it
   * was (`Rebalancer` says so once two of its plans, each short of the target, left the lease to
   * others). Overdue leases are taken up to the target, whatever the shares.
   */
  readonly isOverdue?: (leaseKey: string) => boolean;
  /**
   * Optional: do not steal in this plan. `Rebalancer` sets it when a worker that held leases at its
   * previous plan holds none now: the fleet is still sharing out that worker's leases, which each
   * worker sees expire at its own time, and a steal made before that settles is often undone.
   */
  readonly holdSteals?: boolean;
  /**
   * Optional: when this worker last saw the lease's counter change (`LeaseExpiryTracker.lastChangeAt`).
   * Among otherwise equal candidates, the leases that expired last are taken first: the others may
   * not see them expired yet, while every worker can already take the older ones.
   */
  readonly lastChangeAt?: (leaseKey: string) => number | undefined;
  /**
   * Optional: the unexpired leases each worker held at this worker's previous plan. A worker that
   * holds fewer now is giving leases up (it died and they expire one by one, or it was stolen from);
   * it gets no share of the free ones.
   */
  readonly previousLeaseCounts?: ReadonlyMap<string, number>;
}

/** Why a lease is taken. */
export type TakeReason = 'free' | 'expired' | 'steal';

export interface PlannedTake {
  readonly leaseKey: string;
  /** The counter seen in the listing: pass it to `LeaseStore.takeLease`, which fails if it changed. */
  readonly leaseCounter: number;
  /** The owner in the listing (null for a free lease). */
  readonly previousOwner: string | null;
  readonly reason: TakeReason;
  /** True for a lease at SHARD_END, taken only to finish its bookkeeping; it does not count toward targets. */
  readonly complete: boolean;
}

/** Everything the plan was based on, for logs and metrics. */
export interface RebalanceDiagnostics {
  readonly workerId: string;
  /** Leases of the application in the listing. */
  readonly totalLeases: number;
  /** Leases not at SHARD_END: the ones that are balanced. */
  readonly incompleteLeases: number;
  /** The workers counted: live registry workers, owners of unexpired leases, and this worker. */
  readonly workers: readonly string[];
  /** Incomplete, unexpired leases held per counted worker (0 for workers holding none). */
  readonly leaseCounts: Readonly<Record<string, number>>;
  /** ceil(incomplete leases / workers), capped by `maxLeasesForWorker`. */
  readonly target: number;
  /** This worker's share of the free and expired leases, when they are spread to even out the holders. */
  readonly share: number;
  /** The target before the `maxLeasesForWorker` cap. */
  readonly uncappedTarget: number;
  /** Leases the cap keeps this worker from taking (uncapped target − cap, or 0). */
  readonly spillover: number;
  /** Incomplete leases this worker held before the plan. */
  readonly heldBefore: number;
  /** Incomplete leases it will hold if every planned take succeeds. */
  readonly heldAfter: number;
  /** Incomplete leases without an owner. */
  readonly freeLeases: number;
  /** Incomplete leases whose owner stopped renewing them. */
  readonly expiredLeases: number;
  /** Complete (SHARD_END) leases that are free or expired. */
  readonly availableCompleteLeases: number;
  /** The counted worker (other than this one) holding the most incomplete leases, or null. */
  readonly mostLoadedWorker: string | null;
  readonly mostLoadedCount: number;
  readonly takenFree: number;
  readonly takenExpired: number;
  readonly stolen: number;
  readonly takenComplete: number;
}

export interface RebalancePlan {
  /** Leases to take, in order: free/expired incomplete ones, steals, then complete ones. */
  readonly takes: readonly PlannedTake[];
  readonly diagnostics: RebalanceDiagnostics;
}

/**
 * Decides which leases this worker takes and which it steals (ARCHITECTURE §4). It counts the
 * incomplete leases (checkpoint ≠ SHARD_END) each worker holds; the workers are the live registry
 * workers, the owners of unexpired leases and itself, so a crashed worker stops counting once its
 * heartbeat and its leases expire. Target = ceil(total incomplete leases / workers). It first takes
 * free or expired leases up to its target, but no more than its share of them: the free leases are
 * spread over the workers that hold leases and keep them (and itself) lowest first, as water fills a
 * basin, and another worker's share is left to it until the lease is overdue (see `isOverdue`). A
 * lease left to the worker that evens out the fleet with it saves a steal later. When it is still
 * below target, no free or expired lease is left and the worker holding the most leads it by more
 * than one lease, it steals from that worker, up to its deficit, capped at `maxLeasesToSteal`.
 * Without overshooting: the victim is not taken below the target, except for one lease when it is
 * exactly at target and the thief is short by more than one, so a victim never ends up short and
 * stealing back. It never plans to hold more than the target.
 *
 * Complete leases that are free or expired are taken as well (someone must finish their shard-end
 * bookkeeping and delete them) without counting toward any target, at most
 * ceil(available complete / workers) per plan so the work spreads over the fleet.
 */
export function planRebalance(input: RebalanceInput): RebalancePlan {
  const self = input.workerId;
  const workers = new Set<string>(input.liveWorkerIds);
  workers.add(self);

  // One pass: classify every lease once (expiry lookups are the costly part on big tables).
  let incompleteCount = 0;
  const freeOrExpired: PlannedLease[] = [];
  const completeAvailable: PlannedLease[] = [];
  const heldByOwner = new Map<string, PlannedLease[]>();
  let freeLeases = 0;
  for (const lease of input.leases) {
    const available = lease.owner === null || input.isExpired(lease.leaseKey);
    if (!available) workers.add(lease.owner as string);
    if (lease.checkpoint.isShardEnd) {
      if (available) completeAvailable.push(lease);
      continue;
    }
    incompleteCount += 1;
    if (available) {
      freeOrExpired.push(lease);
      if (lease.owner === null) freeLeases += 1;
    } else {
      const owner = lease.owner as string;
      const held = heldByOwner.get(owner);
      if (held === undefined) heldByOwner.set(owner, [lease]);
      else held.push(lease);
    }
  }
  const counts = new Map<string, number>();
  for (const worker of workers) counts.set(worker, heldByOwner.get(worker)?.length ?? 0);

  const uncappedTarget = incompleteCount === 0 ? 0 : Math.ceil(incompleteCount / workers.size);
  const cap = input.maxLeasesForWorker ?? Number.POSITIVE_INFINITY;
  const target = Math.min(uncappedTarget, cap);
  const heldBefore = counts.get(self) ?? 0;
  const takes: PlannedTake[] = [];

  // 1. Free or expired leases: this worker's share, and any overdue ones, up to the target. Ready ones
  // first when the caller can tell, overdue ones first among those.
  let deficit = Math.max(0, target - heldBefore);
  const sharers = new Map<string, number>();
  for (const [worker, count] of counts) {
    const shrinking = count < (input.previousLeaseCounts?.get(worker) ?? 0);
    if (worker === self || (count > 0 && !shrinking)) sharers.set(worker, count);
  }
  const share = fairShare(sharers, freeOrExpired.length, self);
  const isOverdue = input.isOverdue ?? (() => false);
  const rank = (lease: PlannedLease): number =>
    (input.isReady === undefined || input.isReady(lease) ? 0 : 2) + (isOverdue(lease.leaseKey) ? 0 : 1);
  const lastChangeAt = input.lastChangeAt ?? (() => undefined);
  const candidates = shuffled(freeOrExpired, input.random)
    .map((lease) => ({
      lease,
      rank: rank(lease),
      changedAt:
        lease.owner === null
          ? Number.NEGATIVE_INFINITY
          : (lastChangeAt(lease.leaseKey) ?? Number.NEGATIVE_INFINITY),
    }))
    .sort((a, b) => a.rank - b.rank || (a.changedAt === b.changedAt ? 0 : a.changedAt > b.changedAt ? -1 : 1))
    .map(({ lease }) => lease);
  const overdue = candidates.filter((lease) => isOverdue(lease.leaseKey)).length;
  for (const lease of candidates.slice(0, Math.min(deficit, Math.max(share, overdue)))) {
    takes.push(takeOf(lease, lease.owner === null ? 'free' : 'expired', false));
  }
  deficit -= takes.length;
  const held = heldBefore + takes.length;
  const availableLeft = freeOrExpired.length - takes.length;

  // 2. Steal from the most loaded worker when it leads by more than one.
  let mostLoadedWorker: string | null = null;
  let mostLoadedCount = 0;
  const leaders: string[] = [];
  for (const [worker, count] of counts) {
    if (worker === self) continue;
    if (count > mostLoadedCount) {
      mostLoadedCount = count;
      leaders.length = 0;
    }
    if (count === mostLoadedCount && count > 0) leaders.push(worker);
  }
  if (leaders.length > 0) {
    leaders.sort();
    mostLoadedWorker = leaders[Math.floor(input.random() * leaders.length)] as string;
  }
  let stolen = 0;
  const lead = mostLoadedCount - held;
  if (
    mostLoadedWorker !== null &&
    deficit > 0 &&
    lead > 1 &&
    availableLeft === 0 &&
    input.holdSteals !== true
  ) {
    // Without overshooting: the victim keeps its target, except that a victim exactly at target gives one
    // lease to a thief short by more than one (otherwise 3,3,3,1 would never even out). A victim left at
    // target has no deficit, so it never steals back; and both bounds keep the thief from passing it.
    const aboveTarget = mostLoadedCount - target;
    const allowance = aboveTarget > 0 ? aboveTarget : aboveTarget === 0 && deficit > 1 ? 1 : 0;
    const count = Math.min(deficit, input.maxLeasesToSteal, allowance);
    // Prefer leases the victim has checkpointed since it took them: stealing one it has just taken,
    // before its first checkpoint, makes the thief redo everything the victim did with it.
    const victimLeases = shuffled(heldByOwner.get(mostLoadedWorker) ?? [], input.random);
    const settled = victimLeases.filter((lease) => (lease.ownerSwitchesSinceCheckpoint ?? 0) === 0);
    const unsettled = victimLeases.filter((lease) => (lease.ownerSwitchesSinceCheckpoint ?? 0) !== 0);
    for (const lease of [...settled, ...unsettled].slice(0, count)) {
      takes.push(takeOf(lease, 'steal', false));
      stolen += 1;
    }
  }

  // 3. Complete leases nobody holds, spread over the workers.
  const completeShare = Math.ceil(completeAvailable.length / workers.size);
  for (const lease of shuffled(completeAvailable, input.random).slice(0, completeShare)) {
    takes.push(takeOf(lease, lease.owner === null ? 'free' : 'expired', true));
  }

  const sortedWorkers = [...counts.keys()].sort();
  const leaseCounts: Record<string, number> = {};
  for (const worker of sortedWorkers) leaseCounts[worker] = counts.get(worker) ?? 0;
  const incompleteTakes = takes.filter((take) => !take.complete);
  return {
    takes,
    diagnostics: {
      workerId: self,
      totalLeases: input.leases.length,
      incompleteLeases: incompleteCount,
      workers: sortedWorkers,
      leaseCounts,
      target,
      share,
      uncappedTarget,
      spillover: Math.max(0, uncappedTarget - target),
      heldBefore,
      heldAfter: heldBefore + incompleteTakes.length,
      freeLeases,
      expiredLeases: freeOrExpired.length - freeLeases,
      availableCompleteLeases: completeAvailable.length,
      mostLoadedWorker,
      mostLoadedCount,
      takenFree: incompleteTakes.filter((take) => take.reason === 'free').length,
      takenExpired: incompleteTakes.filter((take) => take.reason === 'expired').length,
      stolen,
      takenComplete: takes.length - incompleteTakes.length,
    },
  };
}

/**
 * How many of `available` leases `self` gets when they go to the lowest holders first, each raised
 * to a common level. The few left over (fewer than the holders at that level) go one each to the
 * first of those holders to plan: whoever takes one leaves the level, and the next plan sees one
 * fewer left over, so the spread still ends within one.
 */
export function fairShare(counts: ReadonlyMap<string, number>, available: number, self: string): number {
  const own = counts.get(self);
  if (own === undefined || available <= 0) return 0;
  const sorted = [...counts.values()].sort((a, b) => a - b);
  let level = sorted[0] as number;
  let filled = 1;
  let remaining = available;
  while (filled < sorted.length) {
    const cost = ((sorted[filled] as number) - level) * filled;
    if (cost > remaining) break;
    remaining -= cost;
    level = sorted[filled] as number;
    filled += 1;
  }
  level += Math.floor(remaining / filled);
  if (own > level) return 0;
  return level - own + (remaining % filled > 0 ? 1 : 0);
}

function takeOf(lease: PlannedLease, reason: TakeReason, complete: boolean): PlannedTake {
  return {
    leaseKey: lease.leaseKey,
    leaseCounter: lease.leaseCounter,
    previousOwner: lease.owner,
    reason,
    complete,
  };
}
