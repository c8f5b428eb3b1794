import { FULL_HASH_KEY_RANGE, MAX_HASH_KEY } from '@kcl/core';
import { describe, expect, it } from 'vitest';
import { range } from '../test/fixtures.js';
import { analyzeHashRangeCoverage, formatHashKeyRange } from './hash-range-coverage.js';

const M = MAX_HASH_KEY;

describe('analyzeHashRangeCoverage', () => {
  it.each([
    ['nothing', [], [FULL_HASH_KEY_RANGE], []],
    ['the whole space in one range', [FULL_HASH_KEY_RANGE], [], []],
    ['adjacent ranges in any order', [range(10n, M), range(0n, 9n)], [], []],
    ['a missing start', [range(5n, M)], [range(0n, 4n)], []],
    ['a missing end', [range(0n, M - 2n)], [range(M - 1n, M)], []],
    ['a one-key gap', [range(0n, 9n), range(11n, M)], [range(10n, 10n)], []],
    ['several gaps', [range(1n, 2n), range(4n, 5n)], [range(0n, 0n), range(3n, 3n), range(6n, M)], []],
    ['an overlap', [range(0n, 10n), range(5n, M)], [], [range(5n, 10n)]],
    ['a range inside another', [range(0n, M), range(3n, 4n)], [], [range(3n, 4n)]],
    [
      'touching overlaps merged',
      [range(0n, 10n), range(0n, 5n), range(3n, 10n), range(11n, M)],
      [],
      [range(0n, 10n)],
    ],
    [
      'an overlap beside a hole',
      [range(0n, 5n), range(3n, 8n), range(10n, M)],
      [range(9n, 9n)],
      [range(3n, 5n)],
    ],
    ['duplicates', [range(0n, M), range(0n, M)], [], [FULL_HASH_KEY_RANGE]],
  ])('%s', (_name, ranges, holes, overlaps) => {
    const coverage = analyzeHashRangeCoverage(ranges);
    expect(coverage).toEqual({ complete: holes.length === 0, holes, overlaps });
  });

  it('formats ranges for messages', () => {
    expect(formatHashKeyRange(range(1n, 2n))).toBe('1…2');
  });
});
