import type { Clock } from '@kcl/core';

/**
 * Runs `call` with a deadline on the injected clock: when `ms` pass first, the call's signal aborts and
 * the returned promise rejects with `onTimeout()` at once, whatever the call does afterwards. A call
 * that cannot be cancelled may still complete later; its result is then ignored.
 */
export function withDeadline<T>(
  clock: Clock,
  ms: number,
  call: (signal: AbortSignal) => Promise<T>,
  onTimeout: () => Error,
): Promise<T> {
  const cancel = new AbortController();
  const timer = new AbortController();
  return new Promise<T>((resolve, reject) => {
    let settled = false;
    void clock.sleep(ms, timer.signal).then(() => {
      if (settled) return;
      settled = true;
      cancel.abort(onTimeout());
      reject(onTimeout());
    });
    let pending: Promise<T>;
    try {
      pending = call(cancel.signal);
    } catch (error) {
      pending = Promise.reject(error);
    }
    pending.then(
      (value) => {
        if (settled) return;
        settled = true;
        timer.abort();
        resolve(value);
      },
      (error: unknown) => {
        if (settled) return;
        settled = true;
        timer.abort();
        reject(error);
      },
    );
  });
}

/** Waits for `work` at most `ms` on the injected clock; true when it settled (either way) in time. */
export async function within(clock: Clock, ms: number, work: Promise<unknown>): Promise<boolean> {
  const timer = new AbortController();
  const settled = work.then(
    () => true,
    () => true,
  );
  try {
    return await Promise.race([settled, clock.sleep(ms, timer.signal).then(() => false)]);
  } finally {
    timer.abort();
  }
}
