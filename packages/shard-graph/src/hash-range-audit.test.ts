import { ConfigurationError, FULL_HASH_KEY_RANGE, MAX_HASH_KEY } from '@kcl/core';
import { describe, expect, it } from 'vitest';
import { lease, range } from '../test/fixtures.js';
import { auditHashRangeCoverage, HashRangeAuditor } from './hash-range-audit.js';

const M = MAX_HASH_KEY;
const half = M / 2n;
const covering = [lease('a', { range: range(0n, half) }), lease('b', { range: range(half + 1n, M) })];
const holed = [lease('a', { range: range(0n, half) }), lease('b', { range: range(half + 10n, M) })];

describe('auditHashRangeCoverage', () => {
  it('finds full coverage', () => {
    expect(auditHashRangeCoverage(covering)).toEqual({
      status: 'complete',
      holes: [],
      overlaps: [],
      leasesWithoutHashRange: [],
      incompleteLeaseCount: 2,
    });
  });

  it('finds holes and overlaps', () => {
    const result = auditHashRangeCoverage([...holed, lease('c', { range: range(0n, 5n), checkpoint: '12' })]);
    expect(result.status).toBe('holes');
    expect(result.holes).toEqual([range(half + 1n, half + 9n)]);
    expect(result.overlaps).toEqual([range(0n, 5n)]);
  });

  it('ignores finished leases: a SHARD_END parent does not cover its missing children', () => {
    const result = auditHashRangeCoverage([
      lease('a', { range: range(0n, half) }),
      lease('old', { range: range(0n, M), checkpoint: 'SHARD_END' }),
    ]);
    expect(result).toMatchObject({ status: 'holes', holes: [range(half + 1n, M)], incompleteLeaseCount: 1 });
  });

  it('reports the whole space as a hole when only finished leases remain', () => {
    const result = auditHashRangeCoverage([lease('old', { range: range(0n, M), checkpoint: 'SHARD_END' })]);
    expect(result).toMatchObject({ status: 'holes', holes: [FULL_HASH_KEY_RANGE] });
  });

  it('reports leases without hash range as unknown rather than as holes', () => {
    const result = auditHashRangeCoverage([lease('a', { range: range(0n, half) }), lease('legacy')]);
    expect(result).toMatchObject({ status: 'unknown', leasesWithoutHashRange: ['legacy'] });
    // When the known ranges already cover everything, the unknown lease cannot matter.
    expect(auditHashRangeCoverage([...covering, lease('legacy')])).toMatchObject({
      status: 'complete',
      leasesWithoutHashRange: ['legacy'],
    });
  });

  it('reports an empty table', () => {
    expect(auditHashRangeCoverage([])).toMatchObject({ status: 'no-leases', holes: [FULL_HASH_KEY_RANGE] });
  });
});

describe('HashRangeAuditor', () => {
  it('advises a sync only after the same holes on three consecutive audits', () => {
    const auditor = new HashRangeAuditor();
    expect(auditor.check(holed)).toMatchObject({ shouldSync: false, consecutiveObservations: 1 });
    expect(auditor.check(holed)).toMatchObject({ shouldSync: false, consecutiveObservations: 2 });
    expect(auditor.check(holed)).toMatchObject({
      shouldSync: true,
      consecutiveObservations: 3,
      confidenceThreshold: 3,
    });
    expect(auditor.check(holed)).toMatchObject({ shouldSync: true, consecutiveObservations: 4 });
  });

  it('restarts the count when the holes change', () => {
    const auditor = new HashRangeAuditor();
    const otherHole = [
      lease('a', { range: range(0n, half - 1n) }),
      lease('b', { range: range(half + 1n, M) }),
    ];
    auditor.check(holed);
    auditor.check(holed);
    expect(auditor.check(otherHole)).toMatchObject({ shouldSync: false, consecutiveObservations: 1 });
    expect(auditor.check(holed)).toMatchObject({ shouldSync: false, consecutiveObservations: 1 });
  });

  it('clears the count on a complete or unknown audit, and on reset', () => {
    const auditor = new HashRangeAuditor({ confidenceThreshold: 2 });
    auditor.check(holed);
    expect(auditor.check(covering)).toMatchObject({ shouldSync: false, consecutiveObservations: 0 });
    expect(auditor.check(holed)).toMatchObject({ consecutiveObservations: 1 });
    expect(auditor.check([...holed, lease('legacy')])).toMatchObject({
      shouldSync: false,
      consecutiveObservations: 0,
    });
    auditor.check(holed);
    auditor.reset();
    expect(auditor.check(holed)).toMatchObject({ shouldSync: false, consecutiveObservations: 1 });
    expect(auditor.check(holed)).toMatchObject({ shouldSync: true, consecutiveObservations: 2 });
  });

  it('advises a sync at once for an empty table', () => {
    expect(new HashRangeAuditor().check([])).toMatchObject({
      shouldSync: true,
      result: { status: 'no-leases' },
    });
  });

  it.each([0, -1, 1.5, Number.NaN])('rejects confidenceThreshold %d', (threshold) => {
    expect(() => new HashRangeAuditor({ confidenceThreshold: threshold })).toThrow(ConfigurationError);
  });
});
