import type { WorkerRecord } from '@kcl/core';
import type { CounterReader } from './counter-change-tracker.js';
import { CounterChangeTracker } from './counter-change-tracker.js';

export interface WorkerLivenessTrackerOptions {
  /**
   * A worker whose heartbeat has not changed for longer than this is no longer live: a positive number
   * of milliseconds, already checked (`createRebalancer` checks its options).
   */
  readonly workerExpiryMs: number;
}

const WORKER_READER: CounterReader<Pick<WorkerRecord, 'workerId' | 'heartbeat'>> = {
  key: (worker) => worker.workerId,
  counter: (worker) => worker.heartbeat,
  firstSightAt: (_worker, now) => now,
};

/**
 * Judges worker liveness from registry heartbeats the way leases expire: a worker is live while its
 * `heartbeat` counter has been seen to change within `workerExpiryMs` of `now` (monotonic, this
 * process's clock). First sight counts as fresh, so a new observer gives every listed worker one full
 * period; workers missing from a listing are forgotten.
 */
export class WorkerLivenessTracker {
  readonly workerExpiryMs: number;
  readonly #tracker = new CounterChangeTracker();

  constructor(options: WorkerLivenessTrackerOptions) {
    this.workerExpiryMs = options.workerExpiryMs;
  }

  /** Records a full registry listing made at monotonic time `now`. */
  observe(workers: Iterable<Pick<WorkerRecord, 'workerId' | 'heartbeat'>>, now: number): void {
    this.#tracker.observeAll(workers, WORKER_READER, now);
  }

  /** True when the worker's heartbeat changed within the expiry. Unknown workers are not live. */
  isLive(workerId: string, now: number): boolean {
    const lastChange = this.#tracker.lastChangeAt(workerId);
    return lastChange !== undefined && now - lastChange <= this.workerExpiryMs;
  }

  /** The live workers at `now`, sorted. */
  liveWorkerIds(now: number): string[] {
    return [...this.#tracker.keys()].filter((workerId) => this.isLive(workerId, now)).sort();
  }

  /** The monotonic time the worker's heartbeat was last seen to change; undefined if unknown. */
  lastChangeAt(workerId: string): number | undefined {
    return this.#tracker.lastChangeAt(workerId);
  }
}
