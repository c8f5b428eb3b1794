import type { Clock } from '@kcl/core';

interface Sleeper {
  readonly wakeAt: number;
  readonly order: number;
  readonly resolve: () => void;
  readonly signal: AbortSignal | undefined;
  readonly onAbort: () => void;
}

export interface ManualClockOptions {
  /** Initial wall-clock time in epoch milliseconds. */
  readonly now?: number;
  /** Initial monotonic time in milliseconds. */
  readonly monotonic?: number;
}

/**
 * A clock that moves only when a test says so. `sleep` registers a timer; `advance(ms)` moves time
 * forward timer by timer, letting the woken code run (and schedule further sleeps) before the next
 * timer fires, so a loop of "work, then sleep" runs exactly as many times as the time allows.
 */
export class ManualClock implements Clock {
  #wall: number;
  #monotonic: number;
  #sleepers: Sleeper[] = [];
  #order = 0;

  constructor(options: ManualClockOptions = {}) {
    this.#wall = options.now ?? Date.UTC(2024, 0, 1);
    this.#monotonic = options.monotonic ?? 0;
  }

  now(): number {
    return this.#wall;
  }

  monotonicNow(): number {
    return this.#monotonic;
  }

  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    if (signal?.aborted) return Promise.resolve();
    return new Promise<void>((resolve) => {
      const sleeper: Sleeper = {
        wakeAt: this.#monotonic + Math.max(0, ms),
        order: this.#order++,
        resolve,
        signal,
        onAbort: () => {
          this.#sleepers = this.#sleepers.filter((other) => other !== sleeper);
          resolve();
        },
      };
      signal?.addEventListener('abort', sleeper.onAbort, { once: true });
      this.#sleepers.push(sleeper);
    });
  }

  /** How many sleeps are waiting. */
  get pendingSleeps(): number {
    return this.#sleepers.length;
  }

  /** The monotonic time of the next timer, or null. */
  get nextWakeAt(): number | null {
    const next = this.#next();
    return next === undefined ? null : next.wakeAt;
  }

  /**
   * Moves both clocks forward by `ms`, firing due timers in order. After each timer the event loop is
   * drained (`settle`) so code woken by it runs before time moves on.
   */
  async advance(ms: number): Promise<void> {
    const target = this.#monotonic + ms;
    for (;;) {
      await settle();
      const next = this.#next();
      if (next === undefined || next.wakeAt > target) break;
      this.#moveTo(next.wakeAt);
      this.#sleepers = this.#sleepers.filter((other) => other !== next);
      next.signal?.removeEventListener('abort', next.onAbort);
      next.resolve();
    }
    this.#moveTo(target);
    await settle();
  }

  /** Moves only the wall clock (a machine whose clock is wrong or jumps), never the monotonic one. */
  setWallClock(epochMs: number): void {
    this.#wall = epochMs;
  }

  /** Waits (in real time, by draining the event loop) until at least `count` sleeps are pending. */
  async waitForSleepers(count: number, maxTurns = 10_000): Promise<void> {
    for (let turn = 0; turn < maxTurns; turn++) {
      if (this.#sleepers.length >= count) return;
      await new Promise<void>((resolve) => setImmediate(resolve));
    }
    throw new Error(`ManualClock: expected ${count} pending sleeps, have ${this.#sleepers.length}`);
  }

  #next(): Sleeper | undefined {
    let best: Sleeper | undefined;
    for (const sleeper of this.#sleepers) {
      if (
        best === undefined ||
        sleeper.wakeAt < best.wakeAt ||
        (sleeper.wakeAt === best.wakeAt && sleeper.order < best.order)
      ) {
        best = sleeper;
      }
    }
    return best;
  }

  #moveTo(monotonic: number): void {
    if (monotonic <= this.#monotonic) return;
    this.#wall += monotonic - this.#monotonic;
    this.#monotonic = monotonic;
  }
}

/** Lets pending promise chains and immediates run: several event-loop turns. */
export async function settle(turns = 20): Promise<void> {
  for (let turn = 0; turn < turns; turn++) {
    await new Promise<void>((resolve) => setImmediate(resolve));
  }
}
