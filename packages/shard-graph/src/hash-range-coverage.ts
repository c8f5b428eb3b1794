import type { HashKeyRange } from '@kcl/core';
import { MAX_HASH_KEY, MIN_HASH_KEY } from '@kcl/core';

/** How a set of hash key ranges covers the key space 0 … 2^128 − 1. */
export interface HashRangeCoverage {
  /** True when the union of the ranges is the whole key space. Overlaps do not make it incomplete. */
  readonly complete: boolean;
  /** The uncovered ranges, in key order (the whole key space when there are no ranges). */
  readonly holes: readonly HashKeyRange[];
  /** The ranges covered more than once, in key order, merged. */
  readonly overlaps: readonly HashKeyRange[];
}

/**
 * Sorts the ranges by start (then end), merges overlapping ones and reports what is not covered and what
 * is covered twice. Holes decide whether the leases or shards are complete; overlaps are reported
 * separately because they are normal while a reshard is in flight (a parent still open beside the
 * child lease created at its end).
 */
export function analyzeHashRangeCoverage(ranges: Iterable<HashKeyRange>): HashRangeCoverage {
  const sorted = [...ranges].sort((a, b) =>
    a.startingHashKey !== b.startingHashKey
      ? compareBigInt(a.startingHashKey, b.startingHashKey)
      : compareBigInt(a.endingHashKey, b.endingHashKey),
  );
  const holes: HashKeyRange[] = [];
  const overlaps: HashKeyRange[] = [];
  // `next` is the first key not yet covered by the ranges seen so far.
  let next = MIN_HASH_KEY;
  for (const range of sorted) {
    if (range.startingHashKey > next) {
      holes.push({ startingHashKey: next, endingHashKey: range.startingHashKey - 1n });
    }
    if (range.startingHashKey < next) {
      const overlapEnd = range.endingHashKey < next - 1n ? range.endingHashKey : next - 1n;
      addMerged(overlaps, { startingHashKey: range.startingHashKey, endingHashKey: overlapEnd });
    }
    if (range.endingHashKey + 1n > next) next = range.endingHashKey + 1n;
  }
  if (next <= MAX_HASH_KEY) holes.push({ startingHashKey: next, endingHashKey: MAX_HASH_KEY });
  return { complete: holes.length === 0, holes, overlaps: overlaps.sort(compareRanges) };
}

/** A readable form of a range for messages: `start…end`. */
export function formatHashKeyRange(range: HashKeyRange): string {
  return `${range.startingHashKey}…${range.endingHashKey}`;
}

function addMerged(ranges: HashKeyRange[], range: HashKeyRange): void {
  // Overlaps are discovered in start order, so only the last one can touch the new one.
  const last = ranges[ranges.length - 1];
  if (last !== undefined && range.startingHashKey <= last.endingHashKey + 1n) {
    if (range.endingHashKey > last.endingHashKey) {
      ranges[ranges.length - 1] = {
        startingHashKey: last.startingHashKey,
        endingHashKey: range.endingHashKey,
      };
    }
    return;
  }
  ranges.push(range);
}

function compareRanges(a: HashKeyRange, b: HashKeyRange): number {
  return compareBigInt(a.startingHashKey, b.startingHashKey);
}

function compareBigInt(a: bigint, b: bigint): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
