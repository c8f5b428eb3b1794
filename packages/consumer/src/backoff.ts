import type { RandomSource } from '@kcl/core';

export interface BackoffOptions {
  readonly initialMs: number;
  readonly maxMs: number;
  readonly random: RandomSource;
}

/**
 * Exponential backoff with "equal jitter": the n-th delay lies between half and all of
 * min(max, initial × 2^n), so retries spread out without ever collapsing to zero.
 */
export class Backoff {
  readonly #options: BackoffOptions;
  #attempt = 0;

  constructor(options: BackoffOptions) {
    this.#options = options;
  }

  /** The delay before the next retry; each call doubles the ceiling up to the maximum. */
  next(): number {
    const ceiling = Math.min(this.#options.maxMs, this.#options.initialMs * 2 ** this.#attempt);
    this.#attempt = Math.min(this.#attempt + 1, 30);
    return ceiling / 2 + (ceiling / 2) * this.#options.random();
  }

  reset(): void {
    this.#attempt = 0;
  }

  /** Failures since the last reset. */
  get attempts(): number {
    return this.#attempt;
  }
}
