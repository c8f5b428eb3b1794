import type { RandomSource } from '@kcl/core';

/**
 * A small deterministic random source (mulberry32): the same seed gives the same sequence, so a
 * failing interleaving or schedule can be replayed from its seed.
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
