import type { Clock, RandomSource } from '@kcl/core';
import { Backoff } from '../backoff.js';
import type { LeaseKeeper, RenewalRound } from './lease-keeper.js';

export interface RenewalLoopOptions {
  readonly keeper: LeaseKeeper;
  readonly renewIntervalMs: number;
  readonly clock: Clock;
  readonly random: RandomSource;
  /** After each round: what it did, the leases held after it, how long it took. */
  readonly onRound: (round: RenewalRound, held: number, durationMs: number) => void;
  readonly onStoreError: (operation: string, error: unknown) => void;
  /** The worker's heartbeat (it reports its own failures, and skips it once the worker leaves). */
  readonly heartbeat: () => Promise<void>;
  /** Ends the loop. */
  readonly signal: AbortSignal;
}

/**
 * Renews held leases and heartbeats every `renewIntervalMs`, until `signal` aborts. A renewal that
 * failed (the whole call, or some leases) is tried again after a short backoff rather than a whole
 * interval later. Expiry is not kept here but by the keeper's own watch, so a hung call cannot keep a
 * lease alive.
 */
export async function runRenewalLoop(options: RenewalLoopOptions): Promise<void> {
  const { clock, keeper, renewIntervalMs, signal } = options;
  const backoff = new Backoff({ initialMs: 200, maxMs: renewIntervalMs, random: options.random });
  let nextRenewAt = clock.monotonicNow() + renewIntervalMs;
  while (!signal.aborted) {
    const now = clock.monotonicNow();
    if (now >= nextRenewAt) {
      try {
        const started = clock.monotonicNow();
        const [result] = await Promise.all([keeper.renewAll(), options.heartbeat()]);
        options.onRound(result, keeper.size, clock.monotonicNow() - started);
        if (result.failed > 0) {
          nextRenewAt = clock.monotonicNow() + Math.min(renewIntervalMs, backoff.next());
        } else {
          backoff.reset();
          nextRenewAt = now + renewIntervalMs;
        }
      } catch (error) {
        options.onStoreError('renew leases', error);
        nextRenewAt = clock.monotonicNow() + Math.min(renewIntervalMs, backoff.next());
      }
    }
    await clock.sleep(Math.max(1, nextRenewAt - clock.monotonicNow()), signal);
  }
}
