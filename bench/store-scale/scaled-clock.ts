import type { Clock } from '@kcl/core';
import { systemClock } from '@kcl/core';

/**
 * The system clock running `scale` times as fast (`scale` < 1: slower). The runtime keeps its default
 * intervals (renew 30 s, rebalance 6 s, expiry 45 s) on this clock, so a run of `w` seconds of wall
 * time is `w × scale` seconds of the fleet's own time: every figure per hour is counted against the
 * fleet's time, and every latency (a store call's answer takes real time) is reported in wall time.
 */
export interface ScaledClock extends Clock {
  readonly scale: number;
  /** Fleet milliseconds that `wallMs` of wall time stand for. */
  toFleetMs(wallMs: number): number;
  /** Wall milliseconds of `fleetMs` of the fleet's time. */
  toWallMs(fleetMs: number): number;
}

export function scaledClock(scale: number): ScaledClock {
  if (!(scale > 0) || !Number.isFinite(scale))
    throw new Error(`bench: time scale must be positive, not ${scale}`);
  const wallOrigin = Date.now();
  return {
    scale,
    now: () => wallOrigin + (Date.now() - wallOrigin) * scale,
    monotonicNow: () => performance.now() * scale,
    sleep: (ms, signal) => systemClock.sleep(ms / scale, signal),
    toFleetMs: (wallMs) => wallMs * scale,
    toWallMs: (fleetMs) => fleetMs / scale,
  };
}
