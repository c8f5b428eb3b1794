import type { Lease, RandomSource } from '@kcl/core';
import { ExtendedSequenceNumber, jitter, leaseFromInit, seededRandom } from '@kcl/core';
import type { Rebalancer } from '@kcl/rebalancer';
import { createRebalancer } from '@kcl/rebalancer';
import { JavaLeaseTaker } from './java-lease-taker.js';

export type Algorithm = 'kcl' | 'java';

/** When things happen. Both algorithms can run under either profile. */
export interface TimingProfile {
  readonly name: string;
  /** Time between two rebalance (take) passes of one worker. */
  readonly rebalanceIntervalMs: number;
  /** ±fraction of jitter on each interval (kcl: 0.25, as `nextRebalanceDelay`; the Java taker: 0, a fixed delay). */
  readonly jitterFraction: number;
  /** Lease expiry (kcl `leaseExpiryMs`, Java `failoverTimeMillis`). */
  readonly leaseExpiryMs: number;
  /** How often an owner renews its leases (and, for kcl, heartbeats in the worker registry). */
  readonly renewIntervalMs: number;
}

export const KCL_TIMING: TimingProfile = {
  name: 'rebalance every 6 s ±25%, expiry 45 s, renew and heartbeat every 30 s',
  rebalanceIntervalMs: 6_000,
  jitterFraction: 0.25,
  leaseExpiryMs: 45_000,
  renewIntervalMs: 30_000,
};

export const JAVA_TIMING: TimingProfile = {
  name: 'take every 20.05 s (fixed delay), expiry (failover) 10 s, renew every 3.308 s',
  rebalanceIntervalMs: 20_050,
  jitterFraction: 0,
  leaseExpiryMs: 10_000,
  renewIntervalMs: 3_308,
};

export interface Scenario {
  readonly name: string;
  readonly leaseCount: number;
  /** Workers running before time 0 (warmed up: their trackers know the fleet). */
  readonly initialWorkers: number;
  /** Workers that start at time 0. */
  readonly joiningWorkers: number;
  /** How many of the initial workers crash at time 0. */
  readonly crashingWorkers: number;
  /** Leases start free (a new application) instead of spread evenly over the initial workers. */
  readonly coldStart: boolean;
}

export interface SimulationResult {
  /** Successful takes after time 0 (including takes of free and expired leases). */
  readonly moves: number;
  /** The fewest moves that reach a spread within one lease (every orphaned lease must move). */
  readonly optimum: number;
  /** Simulated milliseconds from time 0 until the spread is within one lease for good; null if never. */
  readonly convergedAtMs: number | null;
  readonly steals: number;
  readonly failedTakes: number;
}

export interface SimulationOptions {
  readonly algorithm: Algorithm;
  readonly scenario: Scenario;
  readonly timing: TimingProfile;
  readonly maxLeasesToSteal: number;
  readonly seed: number;
  /** Give up after this much simulated time. Default 6 h. */
  readonly horizonMs?: number;
  /** Receives one line per take after time 0 (for looking into a single run). */
  readonly trace?: (line: string) => void;
}

/** A lease row of the simulated table; mutated in place (owner, counter) so listings cost no allocation. */
type LeaseRow = { -readonly [K in 'owner' | 'leaseCounter']: Lease[K] } & Omit<
  Lease,
  'owner' | 'leaseCounter'
>;

/**
 * The shared lease table, with an index by owner. Planners read a listing synchronously and keep only
 * the values they need (the kcl trackers keep counters, the Java model copies its fields), so the rows
 * can be updated in place between plans.
 */
class LeaseTable {
  readonly #rows: LeaseRow[] = [];
  readonly #byKey = new Map<string, LeaseRow>();
  readonly #byOwner = new Map<string, Set<LeaseRow>>();

  get size(): number {
    return this.#rows.length;
  }

  add(leaseKey: string, owner: string | null): void {
    const row: LeaseRow = leaseFromInit({
      leaseKey,
      leaseCounter: 1,
      checkpoint: ExtendedSequenceNumber.of('1'),
    });
    this.#rows.push(row);
    this.#byKey.set(leaseKey, row);
    this.#setOwner(row, owner);
  }

  /** What a `listLeases` call returns now (valid until the next write). */
  list(): readonly Lease[] {
    return this.#rows;
  }

  /** A conditional take: the new counter, or null when the counter changed since the listing. */
  take(leaseKey: string, leaseCounter: number, owner: string): number | null {
    const row = this.#byKey.get(leaseKey);
    if (row === undefined || row.leaseCounter !== leaseCounter) return null;
    row.leaseCounter += 1;
    this.#setOwner(row, owner);
    return row.leaseCounter;
  }

  /** The owner renews every lease it holds: each counter moves. */
  renewAll(owner: string): void {
    for (const row of this.#byOwner.get(owner) ?? []) row.leaseCounter += 1;
  }

  countOf(owner: string): number {
    return this.#byOwner.get(owner)?.size ?? 0;
  }

  ownerOf(leaseKey: string): string | null {
    return this.#byKey.get(leaseKey)?.owner ?? null;
  }

  #setOwner(row: LeaseRow, owner: string | null): void {
    if (row.owner !== null) this.#byOwner.get(row.owner)?.delete(row);
    row.owner = owner;
    if (owner === null) return;
    let rows = this.#byOwner.get(owner);
    if (rows === undefined) {
      rows = new Set();
      this.#byOwner.set(owner, rows);
    }
    rows.add(row);
  }
}

interface Worker {
  readonly workerId: string;
  alive: boolean;
  readonly kcl: Rebalancer | null;
  readonly java: JavaLeaseTaker | null;
}

interface Event {
  readonly at: number;
  readonly order: number;
  readonly kind: 'start' | 'rebalance' | 'renew';
  readonly workerId: string;
}

/** A binary min-heap of events by time (ties in scheduling order). */
class EventQueue {
  readonly #heap: Event[] = [];
  #order = 0;

  push(at: number, kind: Event['kind'], workerId: string): void {
    const heap = this.#heap;
    heap.push({ at, order: this.#order++, kind, workerId });
    let index = heap.length - 1;
    while (index > 0) {
      const parent = (index - 1) >> 1;
      if (!before(heap[index] as Event, heap[parent] as Event)) break;
      [heap[index], heap[parent]] = [heap[parent] as Event, heap[index] as Event];
      index = parent;
    }
  }

  pop(): Event | undefined {
    const heap = this.#heap;
    const top = heap[0];
    const last = heap.pop();
    if (heap.length > 0 && last !== undefined) {
      heap[0] = last;
      let index = 0;
      for (;;) {
        const left = 2 * index + 1;
        const right = left + 1;
        let smallest = index;
        if (left < heap.length && before(heap[left] as Event, heap[smallest] as Event)) smallest = left;
        if (right < heap.length && before(heap[right] as Event, heap[smallest] as Event)) smallest = right;
        if (smallest === index) break;
        [heap[index], heap[smallest]] = [heap[smallest] as Event, heap[index] as Event];
        index = smallest;
      }
    }
    return top;
  }
}

function before(a: Event, b: Event): boolean {
  return a.at < b.at || (a.at === b.at && a.order < b.order);
}

function workerName(index: number): string {
  return `worker-${String(index).padStart(2, '0')}`;
}

/**
 * Simulates one fleet on one shared lease table (conditional takes), event by event: each worker renews
 * its leases (and heartbeats) every renew interval and runs its taker every rebalance interval, at phases
 * drawn from the seed. Initial workers run for a warm-up period before time 0, so their trackers know the
 * fleet; at time 0 the scenario's workers join or crash. Both algorithms get the same initial table, the
 * same phases and intervals, and the same random seeds.
 */
export function simulate(options: SimulationOptions): SimulationResult {
  const { scenario, timing, algorithm } = options;
  const phases = seededRandom(options.seed);
  const jitterRandom = seededRandom(options.seed ^ 0x2545f491);
  const table = new LeaseTable();
  const heartbeats = new Map<string, number>();
  const workers = new Map<string, Worker>();
  const queue = new EventQueue();
  // Long enough for every initial worker to have listed the fleet and seen every owner renew.
  const warmUp = timing.leaseExpiryMs + timing.renewIntervalMs + 2 * timing.rebalanceIntervalMs;

  const addWorker = (index: number, startAt: number): void => {
    const workerId = workerName(index);
    const random: RandomSource = seededRandom(options.seed * 7919 + index);
    workers.set(workerId, {
      workerId,
      alive: true,
      kcl:
        algorithm === 'kcl'
          ? createRebalancer({
              workerId,
              leaseExpiryMs: timing.leaseExpiryMs,
              maxLeasesToSteal: options.maxLeasesToSteal,
              random,
            })
          : null,
      java:
        algorithm === 'java'
          ? new JavaLeaseTaker({
              workerId,
              failoverTimeMs: timing.leaseExpiryMs,
              maxLeasesToStealAtOneTime: options.maxLeasesToSteal,
              random,
            })
          : null,
    });
    heartbeats.set(workerId, 1);
    queue.push(startAt + phases() * timing.rebalanceIntervalMs, 'rebalance', workerId);
    queue.push(startAt + phases() * timing.renewIntervalMs, 'renew', workerId);
  };

  for (let index = 0; index < scenario.leaseCount; index++) {
    const leaseKey = `shardId-${String(index).padStart(6, '0')}`;
    const owner = scenario.coldStart ? null : workerName(index % scenario.initialWorkers);
    table.add(leaseKey, owner);
  }
  for (let index = 0; index < scenario.initialWorkers; index++) addWorker(index, -warmUp);
  queue.push(0, 'start', '');

  let started = false;
  let optimum = 0;
  let moves = 0;
  let steals = 0;
  let failedTakes = 0;
  let balancedSince: number | null = null;
  const horizon = options.horizonMs ?? 6 * 60 * 60 * 1_000;
  // Balanced for this long (an expiry plus a few passes) counts as converged for good.
  const quietPeriod = timing.leaseExpiryMs + 4 * timing.rebalanceIntervalMs;

  for (;;) {
    const event = queue.pop();
    if (event === undefined || event.at > horizon) break;
    if (event.kind === 'start') {
      for (let index = 0; index < scenario.joiningWorkers; index++)
        addWorker(scenario.initialWorkers + index, 0);
      // The crashing workers are the last initial ones: they stop renewing, heartbeating and taking.
      for (
        let index = scenario.initialWorkers - scenario.crashingWorkers;
        index < scenario.initialWorkers;
        index++
      ) {
        (workers.get(workerName(index)) as Worker).alive = false;
      }
      optimum = minimumMoves(scenario.leaseCount, liveCounts(table, workers));
      balancedSince = isBalanced(table, workers) ? 0 : null;
      started = true;
      continue;
    }
    if (started && balancedSince !== null && event.at - balancedSince > quietPeriod) break;
    const worker = workers.get(event.workerId) as Worker;
    if (!worker.alive) continue;
    if (event.kind === 'renew') {
      heartbeats.set(worker.workerId, (heartbeats.get(worker.workerId) ?? 0) + 1);
      table.renewAll(worker.workerId);
      queue.push(event.at + timing.renewIntervalMs, 'renew', worker.workerId);
      continue;
    }
    const listing = table.list();
    const takes =
      worker.kcl !== null
        ? worker.kcl
            .plan({
              leases: listing,
              workers: [...heartbeats].map(([workerId, heartbeat]) => ({ workerId, heartbeat })),
              now: event.at,
            })
            .takes.map((take) => ({
              leaseKey: take.leaseKey,
              leaseCounter: take.leaseCounter,
              steal: take.reason === 'steal',
            }))
        : (worker.java as JavaLeaseTaker).plan(listing, event.at);
    for (const take of takes) {
      const previousOwner = options.trace === undefined ? null : table.ownerOf(take.leaseKey);
      const taken = table.take(take.leaseKey, take.leaseCounter, worker.workerId);
      if (taken === null) {
        if (started) failedTakes += 1;
        continue;
      }
      worker.kcl?.recordTake({ leaseKey: take.leaseKey, leaseCounter: taken }, event.at);
      worker.java?.recordTake(take.leaseKey, event.at);
      if (!started) {
        throw new Error(
          `bench: the warmed-up ${algorithm} fleet moved a lease before time 0; the warm-up is not balanced`,
        );
      }
      moves += 1;
      if (take.steal) steals += 1;
      options.trace?.(
        `${(event.at / 1_000).toFixed(1)} s ${worker.workerId} ${take.steal ? 'steals' : 'takes'} ${take.leaseKey} from ${previousOwner ?? 'nobody'} → counts ${liveCounts(table, workers).join(',')}`,
      );
    }
    if (started) {
      if (!isBalanced(table, workers)) balancedSince = null;
      else if (balancedSince === null) balancedSince = event.at;
    }
    // With a 0.25 fraction this is exactly `nextRebalanceDelay` of @kcl/rebalancer.
    queue.push(
      event.at + jitter(timing.rebalanceIntervalMs, timing.jitterFraction, jitterRandom),
      'rebalance',
      worker.workerId,
    );
  }
  return { moves, optimum, convergedAtMs: balancedSince, steals, failedTakes };
}

function liveCounts(table: LeaseTable, workers: ReadonlyMap<string, Worker>): number[] {
  const counts: number[] = [];
  for (const worker of workers.values()) if (worker.alive) counts.push(table.countOf(worker.workerId));
  return counts;
}

function isBalanced(table: LeaseTable, workers: ReadonlyMap<string, Worker>): boolean {
  const counts = liveCounts(table, workers);
  const held = counts.reduce((sum, count) => sum + count, 0);
  return held === table.size && Math.max(...counts) - Math.min(...counts) <= 1;
}

/** The fewest moves to a spread within one lease: orphans move, and each worker gives up its excess. */
export function minimumMoves(totalLeases: number, liveCountsOfWorkers: readonly number[]): number {
  const workerCount = liveCountsOfWorkers.length;
  if (workerCount === 0) return 0;
  const held = liveCountsOfWorkers.reduce((sum, count) => sum + count, 0);
  const base = Math.floor(totalLeases / workerCount);
  const larger = totalLeases % workerCount;
  let excess = 0;
  [...liveCountsOfWorkers]
    .sort((a, b) => b - a)
    .forEach((count, index) => {
      excess += Math.max(0, count - (base + (index < larger ? 1 : 0)));
    });
  return totalLeases - held + excess;
}
