import type { WorkerStatus } from '../status/application-status.js';

interface Watched {
  heartbeat: number;
  changedAt: number;
  /**
   * Whether `changedAt` is a change seen: the first observation is not one (the heartbeat may have
   * come just before), so the gap from it to the first change is no gap between heartbeats.
   */
  changed: boolean;
  /** The last gaps between two changes seen, newest last. */
  gaps: number[];
}

/**
 * Which workers are alive by the rule kcl's workers use among themselves: a worker is alive while its
 * heartbeat counter keeps moving on the observer's own clock. A worker is gone once its counter has
 * been still for longer than its usual gap between heartbeats (the largest of the last few, plus one
 * read interval for the observer's own granularity). The gap from the first observation to the first
 * change is not counted (it can be as short as a read interval): until two changes were seen, the
 * registry's heartbeat time decides (`WorkerStatus.alive`).
 */
export class HeartbeatWatch {
  readonly #readIntervalMs: number;
  readonly #watched = new Map<string, Watched>();
  readonly #fallback = new Map<string, boolean>();
  #now = 0;

  constructor(readIntervalMs: number) {
    this.#readIntervalMs = readIntervalMs;
  }

  /** Takes in one read of the registry, made at `now` (a monotonic clock). */
  observe(workers: readonly WorkerStatus[], now: number): void {
    this.#now = now;
    const present = new Set<string>();
    for (const worker of workers) {
      present.add(worker.workerId);
      this.#fallback.set(worker.workerId, worker.alive);
      const watched = this.#watched.get(worker.workerId);
      if (watched === undefined) {
        this.#watched.set(worker.workerId, {
          heartbeat: worker.heartbeat,
          changedAt: now,
          changed: false,
          gaps: [],
        });
      } else if (watched.heartbeat !== worker.heartbeat) {
        if (watched.changed) watched.gaps.push(now - watched.changedAt);
        if (watched.gaps.length > 5) watched.gaps.shift();
        watched.changed = true;
        watched.heartbeat = worker.heartbeat;
        watched.changedAt = now;
      }
    }
    for (const workerId of [...this.#watched.keys()]) {
      if (!present.has(workerId)) {
        this.#watched.delete(workerId);
        this.#fallback.delete(workerId);
      }
    }
  }

  /** Whether the worker looked alive at the last read; a worker not in the registry is not. */
  alive(workerId: string): boolean {
    const watched = this.#watched.get(workerId);
    if (watched === undefined) return false;
    if (watched.gaps.length === 0) return this.#fallback.get(workerId) === true;
    return this.#now - watched.changedAt <= Math.max(...watched.gaps) + this.#readIntervalMs;
  }
}
