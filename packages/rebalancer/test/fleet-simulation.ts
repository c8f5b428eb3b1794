import type { Lease, RandomSource } from '@kcl/core';
import { ExtendedSequenceNumber, leaseFromInit, seededRandom } from '@kcl/core';
import type { RebalancePlan, Rebalancer } from '../src/index.js';
import { createRebalancer } from '../src/index.js';

// fleet.property.test.ts takes the generator from here: core's, the one seeded random source.
export { seededRandom } from '@kcl/core';

export function workerName(index: number): string {
  return `worker-${String(index).padStart(2, '0')}`;
}

export interface FleetSetup {
  readonly workerCount: number;
  /** Owner index per lease, or null for a free lease. */
  readonly owners: readonly (number | null)[];
  /** Indexes of workers that are dead from the start (they never renew, heartbeat or plan). */
  readonly dead: ReadonlySet<number>;
  readonly maxLeasesToSteal: number;
  readonly seed: number;
  readonly intervalMs?: number;
  readonly leaseExpiryMs?: number;
  /**
   * Primed: every worker has been running for a while, so the dead ones have already been silent for
   * longer than the expiry when the simulation starts. Unprimed: every tracker sees the fleet for the
   * first time at time 0 (owned leases and listed workers look fresh).
   */
  readonly primed: boolean;
  /** `sequential`: each worker lists right before it plans; `snapshot`: all plan from one listing, then take. */
  readonly mode: 'sequential' | 'snapshot';
}

export interface RoundReport {
  readonly plans: ReadonlyMap<string, RebalancePlan>;
  readonly moves: number;
  readonly steals: number;
  readonly failedTakes: number;
  /** Workers whose own takes would have put them above their own target. */
  readonly overTarget: readonly string[];
}

/**
 * A fleet of rebalancers over one shared in-memory lease table with conditional takes (a take fails when
 * the counter changed since the listing). Each round every live worker renews its leases and heartbeats,
 * then plans and takes; time advances by the rebalance interval.
 */
export class Fleet {
  readonly intervalMs: number;
  readonly leaseExpiryMs: number;
  readonly leases = new Map<string, Lease>();
  readonly heartbeats = new Map<string, number>();
  readonly alive = new Set<string>();
  readonly rebalancers = new Map<string, Rebalancer>();
  readonly random: RandomSource;
  readonly mode: FleetSetup['mode'];
  now = 0;
  totalMoves = 0;

  constructor(setup: FleetSetup) {
    this.intervalMs = setup.intervalMs ?? 6_000;
    this.leaseExpiryMs = setup.leaseExpiryMs ?? 45_000;
    this.random = seededRandom(setup.seed);
    this.mode = setup.mode;
    setup.owners.forEach((owner, index) => {
      const leaseKey = `shardId-${String(index).padStart(4, '0')}`;
      this.leases.set(
        leaseKey,
        leaseFromInit({
          leaseKey,
          checkpoint: ExtendedSequenceNumber.of(String(1000 + index)),
          owner: owner === null ? null : workerName(owner),
          leaseCounter: 1 + Math.floor(this.random() * 5),
        }),
      );
    });
    for (let index = 0; index < setup.workerCount; index++) {
      const workerId = workerName(index);
      this.heartbeats.set(workerId, 1);
      if (!setup.dead.has(index)) this.alive.add(workerId);
      this.rebalancers.set(
        workerId,
        createRebalancer({
          workerId,
          leaseExpiryMs: this.leaseExpiryMs,
          maxLeasesToSteal: setup.maxLeasesToSteal,
          random: seededRandom(setup.seed * 31 + index),
        }),
      );
    }
    if (setup.primed) {
      const earlier = -(this.leaseExpiryMs + this.intervalMs);
      for (const rebalancer of this.rebalancers.values()) {
        rebalancer.leaseExpiry.observe(this.leases.values(), earlier);
        rebalancer.workerLiveness.observe(this.registry(), earlier);
      }
    }
  }

  registry(): Array<{ workerId: string; heartbeat: number }> {
    return [...this.heartbeats].map(([workerId, heartbeat]) => ({ workerId, heartbeat }));
  }

  /** Stops a worker: no more renewals, heartbeats or plans. */
  kill(workerId: string): void {
    this.alive.delete(workerId);
  }

  round(): RoundReport {
    for (const workerId of this.alive) {
      this.heartbeats.set(workerId, (this.heartbeats.get(workerId) ?? 0) + 1);
      for (const [key, lease] of this.leases) {
        if (lease.owner === workerId)
          this.leases.set(key, { ...lease, leaseCounter: lease.leaseCounter + 1 });
      }
    }
    const order = shuffle([...this.alive].sort(), this.random);
    const plans = new Map<string, RebalancePlan>();
    const overTarget: string[] = [];
    let moves = 0;
    let steals = 0;
    let failedTakes = 0;
    const planFor = (workerId: string): RebalancePlan => {
      const rebalancer = this.rebalancers.get(workerId) as Rebalancer;
      const plan = rebalancer.plan({
        leases: [...this.leases.values()],
        workers: this.registry(),
        now: this.now,
      });
      plans.set(workerId, plan);
      const takesIncomplete = plan.takes.some((take) => !take.complete);
      if (takesIncomplete && plan.diagnostics.heldAfter > plan.diagnostics.target) overTarget.push(workerId);
      return plan;
    };
    const apply = (workerId: string, plan: RebalancePlan): void => {
      for (const take of plan.takes) {
        const current = this.leases.get(take.leaseKey);
        if (current === undefined || current.leaseCounter !== take.leaseCounter) {
          failedTakes += 1;
          continue;
        }
        const taken = { ...current, owner: workerId, leaseCounter: current.leaseCounter + 1 };
        this.leases.set(take.leaseKey, taken);
        (this.rebalancers.get(workerId) as Rebalancer).recordTake(taken, this.now);
        if (!take.complete) moves += 1;
        if (take.reason === 'steal') steals += 1;
      }
    };
    if (this.mode === 'sequential') {
      for (const workerId of order) apply(workerId, planFor(workerId));
    } else {
      const planned = order.map((workerId) => [workerId, planFor(workerId)] as const);
      for (const [workerId, plan] of shuffle(planned, this.random)) apply(workerId, plan);
    }
    this.now += this.intervalMs;
    this.totalMoves += moves;
    return { plans, moves, steals, failedTakes, overTarget };
  }

  /** Incomplete leases held per live worker. */
  liveCounts(): Map<string, number> {
    const counts = new Map<string, number>();
    for (const workerId of this.alive) counts.set(workerId, 0);
    for (const lease of this.leases.values()) {
      if (lease.owner !== null && this.alive.has(lease.owner) && !lease.checkpoint.isShardEnd) {
        counts.set(lease.owner, (counts.get(lease.owner) ?? 0) + 1);
      }
    }
    return counts;
  }

  /** Leases not held by a live worker (free, or held by a dead one). */
  orphanedLeases(): Lease[] {
    return [...this.leases.values()].filter((lease) => lease.owner === null || !this.alive.has(lease.owner));
  }

  /** Every lease is held by a live worker, and their counts differ by at most one. */
  isBalanced(): boolean {
    if (this.alive.size === 0) return true;
    const counts = [...this.liveCounts().values()];
    return this.orphanedLeases().length === 0 && Math.max(...counts) - Math.min(...counts) <= 1;
  }

  /** The fewest takes that reach a balanced state from the current one. */
  minimumMoves(): number {
    return minimumMoves(this.leases.size, [...this.liveCounts().values()]);
  }
}

/**
 * The fewest lease moves from the given live-worker counts to a spread where counts differ by at most one:
 * every lease not held by a live worker moves, and each worker gives up what it holds above its final
 * share, the larger shares going to the workers that already hold the most.
 */
export function minimumMoves(totalLeases: number, liveCounts: readonly number[]): number {
  if (liveCounts.length === 0) return 0;
  const held = liveCounts.reduce((sum, count) => sum + count, 0);
  const workers = liveCounts.length;
  const base = Math.floor(totalLeases / workers);
  const larger = totalLeases % workers;
  const sorted = [...liveCounts].sort((a, b) => b - a);
  let excess = 0;
  sorted.forEach((count, index) => {
    excess += Math.max(0, count - (base + (index < larger ? 1 : 0)));
  });
  return totalLeases - held + excess;
}

function shuffle<T>(items: readonly T[], random: RandomSource): T[] {
  const copy = [...items];
  for (let index = copy.length - 1; index > 0; index--) {
    const other = Math.floor(random() * (index + 1));
    [copy[index], copy[other]] = [copy[other] as T, copy[index] as T];
  }
  return copy;
}
