import type { Clock } from '@kcl/core';

interface Timer {
  readonly wakeAt: number;
  readonly order: number;
  readonly resolve: () => void;
  readonly owner: FreezableClock | null;
  cancelled: boolean;
}

/** A clock whose timers can be frozen for good: a crashed process's timers never fire. */
export interface FreezableClock extends Clock {
  readonly frozen: boolean;
  /** From now on nothing sleeping on this clock wakes, and new sleeps never end. */
  freeze(): void;
}

/**
 * Simulated time. Nothing moves until `runUntil` moves it: it lets every pending promise chain run
 * (one event-loop turn drains the microtask queue, and everything the simulation runs is promise
 * based), then wakes the earliest timer, and repeats. Timers due at the same instant wake in the order
 * they were set, so a run is a pure function of its inputs.
 */
export class SimulationClock implements Clock {
  readonly #heap: Timer[] = [];
  #now = 0;
  #order = 0;
  readonly #epoch: number;
  #steps = 0;

  constructor(options: { readonly epochMs?: number } = {}) {
    this.#epoch = options.epochMs ?? Date.UTC(2026, 0, 1);
  }

  now(): number {
    return this.#epoch + this.#now;
  }

  monotonicNow(): number {
    return this.#now;
  }

  /** Timers woken so far (a measure of how much a run did). */
  get steps(): number {
    return this.#steps;
  }

  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return this.#sleep(ms, signal, null);
  }

  /** A view of this clock for one simulated process, which a crash can freeze. */
  processClock(): FreezableClock {
    let frozen = false;
    const view: FreezableClock = {
      get frozen() {
        return frozen;
      },
      freeze() {
        frozen = true;
      },
      now: () => this.now(),
      monotonicNow: () => this.monotonicNow(),
      sleep: (ms, signal) => (frozen ? new Promise<void>(() => {}) : this.#sleep(ms, signal, view)),
    };
    return view;
  }

  #sleep(ms: number, signal: AbortSignal | undefined, owner: FreezableClock | null): Promise<void> {
    if (signal?.aborted) return Promise.resolve();
    return new Promise<void>((resolve) => {
      const timer: Timer = {
        wakeAt: this.#now + Math.max(0, Number.isFinite(ms) ? ms : 0),
        order: this.#order++,
        resolve: () => {
          signal?.removeEventListener('abort', onAbort);
          resolve();
        },
        owner,
        cancelled: false,
      };
      const onAbort = (): void => {
        if (timer.cancelled) return;
        timer.cancelled = true;
        if (owner?.frozen !== true) resolve();
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.#push(timer);
    });
  }

  /**
   * Runs the simulation until `until` (monotonic ms) or until `stop()` says so (checked after every
   * timer). Returns the time reached.
   */
  async runUntil(until: number, stop: () => boolean = () => false): Promise<number> {
    for (;;) {
      await drain();
      if (stop()) return this.#now;
      const next = this.#pop();
      if (next === undefined || next.wakeAt > until) {
        if (next !== undefined) this.#push(next);
        this.#now = Math.max(this.#now, until);
        await drain();
        return this.#now;
      }
      this.#now = Math.max(this.#now, next.wakeAt);
      this.#steps += 1;
      if (next.owner?.frozen === true) continue;
      next.cancelled = true;
      next.resolve();
    }
  }

  #push(timer: Timer): void {
    const heap = this.#heap;
    heap.push(timer);
    let index = heap.length - 1;
    while (index > 0) {
      const parent = (index - 1) >> 1;
      if (!before(heap[index] as Timer, heap[parent] as Timer)) break;
      [heap[index], heap[parent]] = [heap[parent] as Timer, heap[index] as Timer];
      index = parent;
    }
  }

  /** The earliest live timer (cancelled ones are dropped on the way). */
  #pop(): Timer | undefined {
    for (;;) {
      const heap = this.#heap;
      const top = heap[0];
      if (top === undefined) return undefined;
      const last = heap.pop() as Timer;
      if (heap.length > 0) {
        heap[0] = last;
        let index = 0;
        for (;;) {
          const left = index * 2 + 1;
          const right = left + 1;
          let smallest = index;
          if (left < heap.length && before(heap[left] as Timer, heap[smallest] as Timer)) smallest = left;
          if (right < heap.length && before(heap[right] as Timer, heap[smallest] as Timer)) smallest = right;
          if (smallest === index) break;
          [heap[index], heap[smallest]] = [heap[smallest] as Timer, heap[index] as Timer];
          index = smallest;
        }
      }
      if (!top.cancelled) return top;
    }
  }
}

function before(a: Timer, b: Timer): boolean {
  return a.wakeAt < b.wakeAt || (a.wakeAt === b.wakeAt && a.order < b.order);
}

/** One event-loop turn: every queued microtask (and whatever they queue) runs before it ends. */
function drain(): Promise<void> {
  return new Promise<void>((resolve) => setImmediate(resolve));
}
