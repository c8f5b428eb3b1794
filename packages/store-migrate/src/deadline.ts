import type { Clock } from '@kcl/core';

/** What a call raced against a deadline resolves to when the deadline passed first. */
export const TIMED_OUT: unique symbol = Symbol('timed out');

/** A deadline on a clock. `cancel` once nothing waits for it any more, so no timer is left behind. */
export interface Deadline {
  /** `work`'s outcome, or `TIMED_OUT` when the deadline passes first (a late rejection is ignored then). */
  race<T>(work: Promise<T>): Promise<T | typeof TIMED_OUT>;
  cancel(): void;
}

/**
 * Starts a deadline `ms` from now. Several calls raced against one deadline share it, so a caller
 * that starts it before sending anything bounds the whole operation, not each step.
 */
export function startDeadline(clock: Clock, ms: number): Deadline {
  const stop = new AbortController();
  const expired: Promise<typeof TIMED_OUT> = clock.sleep(ms, stop.signal).then(() => TIMED_OUT);
  return {
    race: <T>(work: Promise<T>) => Promise.race<T | typeof TIMED_OUT>([work, expired]),
    cancel: () => stop.abort(),
  };
}
