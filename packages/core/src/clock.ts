/**
 * Time as kcl's runtime sees it. Runtime logic never reads `Date.now()` or calls `setTimeout` itself:
 * it is given a clock, so tests drive time with a manual one.
 */
export interface Clock {
  /** Wall-clock time in epoch milliseconds. Only for timestamps people read; never for expiry. */
  now(): number;
  /** Monotonic milliseconds from an arbitrary origin. All expiry and interval logic uses this. */
  monotonicNow(): number;
  /**
   * Resolves after `ms` milliseconds, or early (without rejecting) when `signal` aborts, so loops
   * written as "work, then sleep" end promptly on shutdown.
   */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}

/** A source of uniformly distributed numbers in [0, 1), injected wherever jitter is computed. */
export type RandomSource = () => number;

export const systemRandom: RandomSource = () => Math.random();

export const systemClock: Clock = {
  now: () => Date.now(),
  monotonicNow: () => performance.now(),
  sleep: (ms, signal) =>
    new Promise<void>((resolve) => {
      if (signal?.aborted) {
        resolve();
        return;
      }
      const onAbort = (): void => {
        clearTimeout(timer);
        resolve();
      };
      const timer = setTimeout(
        () => {
          signal?.removeEventListener('abort', onAbort);
          resolve();
        },
        Math.max(0, ms),
      );
      signal?.addEventListener('abort', onAbort, { once: true });
    }),
};

/** `base` moved up or down by at most `fraction` of itself, e.g. ±25% of a rebalance interval. */
export function jitter(base: number, fraction: number, random: RandomSource): number {
  return base * (1 - fraction + 2 * fraction * random());
}
