import type { RandomSource } from '@kcl/core';
import { jitter } from '@kcl/core';

/** The jitter of the rebalance interval: ±25%. */
export const REBALANCE_JITTER_FRACTION = 0.25;

/**
 * How long to sleep before the next rebalance: `baseMs` ± 25%, uniformly. Workers started together
 * drift apart this way, so they rarely list and take at the same moment and collide on the same leases.
 */
export function nextRebalanceDelay(baseMs: number, random: RandomSource): number {
  return jitter(baseMs, REBALANCE_JITTER_FRACTION, random);
}
