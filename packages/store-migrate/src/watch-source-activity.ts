import type { Clock, Lease, LeaseStore, StoreCallOptions, WorkerRecord } from '@kcl/core';
import { compareLeaseKeys, systemClock } from '@kcl/core';
import { isSchemaMissing, readLeaseSource } from './read-lease-source.js';

/** A lease whose counter moved while the source was watched: some worker is renewing or writing it. */
export interface LeaseActivity {
  readonly leaseKey: string;
  /** The owner at the end of the watch (null when free or deleted). */
  readonly owner: string | null;
  /** Null when the lease appeared during the watch. */
  readonly counterBefore: number | null;
  /** Null when the lease was deleted during the watch. */
  readonly counterAfter: number | null;
}

/** A worker whose heartbeat moved while the source was watched. */
export interface WorkerActivity {
  readonly workerId: string;
  readonly heartbeatBefore: number | null;
  readonly heartbeatAfter: number;
  readonly metadata: Readonly<Record<string, string>>;
}

export interface SourceActivity {
  /** True when any lease counter or worker heartbeat changed. */
  readonly live: boolean;
  /** How long the source was watched (monotonic milliseconds). */
  readonly watchedMs: number;
  readonly changedLeases: readonly LeaseActivity[];
  readonly liveWorkers: readonly WorkerActivity[];
  /** The leases that changed, by their owner at the end of the watch (`(none)` for free leases). */
  readonly leasesByOwner: Readonly<Record<string, readonly string[]>>;
  /** The leases and workers as read at the end of the watch. */
  readonly leases: readonly Lease[];
  readonly workers: readonly WorkerRecord[];
}

export interface WatchSourceActivityOptions {
  readonly store: LeaseStore;
  /** How long to watch; at least the lease expiry of the fleet that used the store. */
  readonly watchMs: number;
  readonly clock?: Clock;
  /**
   * Ends the wait early. The store calls are not given it: an interrupted tool still reads the
   * store once more and reports what it saw, and the caller decides what an interruption means.
   */
  readonly signal?: AbortSignal;
  /** How often the worker registry is sampled while waiting (default 1,000 ms). */
  readonly sampleIntervalMs?: number;
  /** Stop waiting as soon as a heartbeat moves (default true); false watches the whole window. */
  readonly stopEarly?: boolean;
  /** Called after every sample, for a countdown. */
  readonly onTick?: (elapsedMs: number, watchMs: number) => void;
}

const NO_OWNER = '(none)';

/**
 * Watches a store for signs of a running fleet: lease counters that move (renewals, takes,
 * checkpoints) and worker heartbeats that move. Liveness is judged as the fleet itself judges expiry:
 * by seeing a value change on this process's monotonic clock, never by comparing timestamps. A watch
 * at least as long as the lease expiry sees any worker that still holds a lease, because such a worker
 * renews within its expiry. The worker registry is sampled during the wait, so a fleet that heartbeats
 * is recognised early; lease counters are compared at the start and the end.
 */
export async function watchSourceActivity(options: WatchSourceActivityOptions): Promise<SourceActivity> {
  const clock = options.clock ?? systemClock;
  const { store, signal } = options;
  const sampleIntervalMs = options.sampleIntervalMs ?? 1_000;
  const started = clock.monotonicNow();
  const leasesBefore = (await readLeaseSource(store)).leases;
  const workersBefore = await listWorkersIfPresent(store);
  const heartbeatsBefore = new Map(workersBefore.map((worker) => [worker.workerId, worker.heartbeat]));

  let elapsed = clock.monotonicNow() - started;
  while (elapsed < options.watchMs && signal?.aborted !== true) {
    await clock.sleep(Math.min(sampleIntervalMs, options.watchMs - elapsed), signal);
    elapsed = clock.monotonicNow() - started;
    options.onTick?.(Math.min(elapsed, options.watchMs), options.watchMs);
    if (options.stopEarly === false) continue;
    const workers = await listWorkersIfPresent(store);
    if (workers.some((worker) => heartbeatsBefore.get(worker.workerId) !== worker.heartbeat)) break;
  }

  const leasesAfter = (await readLeaseSource(store)).leases;
  const workersAfter = await listWorkersIfPresent(store);
  const watchedMs = clock.monotonicNow() - started;

  const before = new Map(leasesBefore.map((lease) => [lease.leaseKey, lease]));
  const after = new Map(leasesAfter.map((lease) => [lease.leaseKey, lease]));
  const changedLeases: LeaseActivity[] = [];
  for (const key of new Set([...before.keys(), ...after.keys()])) {
    const old = before.get(key);
    const now = after.get(key);
    if (old?.leaseCounter === now?.leaseCounter) continue;
    changedLeases.push({
      leaseKey: key,
      owner: now?.owner ?? null,
      counterBefore: old?.leaseCounter ?? null,
      counterAfter: now?.leaseCounter ?? null,
    });
  }
  changedLeases.sort((a, b) => compareLeaseKeys(a.leaseKey, b.leaseKey));

  const liveWorkers: WorkerActivity[] = workersAfter
    .filter((worker) => heartbeatsBefore.get(worker.workerId) !== worker.heartbeat)
    .map((worker) => ({
      workerId: worker.workerId,
      heartbeatBefore: heartbeatsBefore.get(worker.workerId) ?? null,
      heartbeatAfter: worker.heartbeat,
      metadata: worker.metadata,
    }));

  const leasesByOwner: Record<string, string[]> = {};
  for (const change of changedLeases) {
    const owner = change.owner ?? NO_OWNER;
    leasesByOwner[owner] = [...(leasesByOwner[owner] ?? []), change.leaseKey];
  }

  return {
    live: changedLeases.length > 0 || liveWorkers.length > 0,
    watchedMs,
    changedLeases,
    liveWorkers,
    leasesByOwner,
    leases: leasesAfter,
    workers: workersAfter,
  };
}

/** The worker registry; empty when the store has none yet (a Java KCL table has no kcl registry). */
export async function listWorkersIfPresent(
  store: LeaseStore,
  options?: StoreCallOptions,
): Promise<WorkerRecord[]> {
  try {
    return await store.workers.list(options);
  } catch (error) {
    if (isSchemaMissing(error)) return [];
    throw error;
  }
}
