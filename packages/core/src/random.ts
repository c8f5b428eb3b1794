import type { RandomSource } from './clock.js';

/**
 * A small deterministic random source (mulberry32): the same seed gives the same sequence, so a
 * schedule, a benchmark table or a failing interleaving can be replayed from its seed. Not for
 * anything secret.
 */
export function seededRandom(seed: number): RandomSource {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let value = state;
    value = Math.imul(value ^ (value >>> 15), value | 1);
    value ^= value + Math.imul(value ^ (value >>> 7), value | 61);
    return ((value ^ (value >>> 14)) >>> 0) / 4_294_967_296;
  };
}

/** A shuffled copy of `items` (Fisher–Yates, as Java's `Collections.shuffle`) drawn from `random`. */
export function shuffled<T>(items: readonly T[], random: RandomSource): T[] {
  const copy = [...items];
  for (let index = copy.length - 1; index > 0; index--) {
    const other = Math.floor(random() * (index + 1));
    const swap = copy[index] as T;
    copy[index] = copy[other] as T;
    copy[other] = swap;
  }
  return copy;
}
