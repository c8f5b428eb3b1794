import type { HashKeyRange, Lease } from '@kcl/core';
import { ConfigurationError, FULL_HASH_KEY_RANGE } from '@kcl/core';
import { analyzeHashRangeCoverage, formatHashKeyRange } from './hash-range-coverage.js';

/**
 * - `complete`: the incomplete leases cover the whole key space.
 * - `holes`: part of the key space has no incomplete lease.
 * - `unknown`: the known ranges leave holes, but some incomplete leases have no hash range and might
 *   fill them; record their ranges (from ListShards) before judging.
 * - `no-leases`: the application has no leases at all.
 */
export type HashRangeAuditStatus = 'complete' | 'holes' | 'unknown' | 'no-leases';

export interface HashRangeAuditResult {
  readonly status: HashRangeAuditStatus;
  /** Uncovered ranges among the known ones (the whole key space when only finished leases remain). */
  readonly holes: readonly HashKeyRange[];
  /** Ranges held by more than one incomplete lease (normal while a reshard is in flight). */
  readonly overlaps: readonly HashKeyRange[];
  /** Incomplete leases without a hash range. */
  readonly leasesWithoutHashRange: readonly string[];
  readonly incompleteLeaseCount: number;
}

/** What the hole audit reads from a lease. */
export type AuditedLease = Pick<Lease, 'leaseKey' | 'checkpoint' | 'hashKeyRange'>;

/**
 * One audit of the lease table's coverage, like the Java KCL's periodic auditor: over the leases not at
 * SHARD_END (finished leases stay until cleanup and say nothing about what is being read), sort the
 * ranges, merge overlaps and report holes (first start ≠ 0, last end ≠ 2^128 − 1, gaps between) and
 * overlaps. Leases without a range make an otherwise holed result `unknown` instead of guessing.
 */
export function auditHashRangeCoverage(leases: readonly AuditedLease[]): HashRangeAuditResult {
  if (leases.length === 0) {
    return {
      status: 'no-leases',
      holes: [FULL_HASH_KEY_RANGE],
      overlaps: [],
      leasesWithoutHashRange: [],
      incompleteLeaseCount: 0,
    };
  }
  const incomplete = leases.filter((lease) => !lease.checkpoint.isShardEnd);
  const ranges: HashKeyRange[] = [];
  const withoutRange: string[] = [];
  for (const lease of incomplete) {
    if (lease.hashKeyRange === null) withoutRange.push(lease.leaseKey);
    else ranges.push(lease.hashKeyRange);
  }
  const coverage = analyzeHashRangeCoverage(ranges);
  const status: HashRangeAuditStatus = coverage.complete
    ? 'complete'
    : withoutRange.length > 0
      ? 'unknown'
      : 'holes';
  return {
    status,
    holes: coverage.holes,
    overlaps: coverage.overlaps,
    leasesWithoutHashRange: withoutRange.sort(),
    incompleteLeaseCount: incomplete.length,
  };
}

export interface HashRangeAuditorOptions {
  /** How many consecutive audits must see the same holes before a shard sync is advised. Default 3. */
  readonly confidenceThreshold?: number;
}

export interface HashRangeAuditVerdict {
  readonly result: HashRangeAuditResult;
  /** True when a shard sync should run now (gap filling from ListShards). */
  readonly shouldSync: boolean;
  /** How many consecutive audits have seen these same holes (0 unless `status` is `holes`). */
  readonly consecutiveObservations: number;
  readonly confidenceThreshold: number;
}

/** The default number of identical consecutive observations before a hole is acted on. */
export const DEFAULT_HOLE_CONFIDENCE_THRESHOLD = 3;

/**
 * The periodic hole auditor with its memory. A reshard in flight opens short-lived holes (a parent
 * finished before its child lease is visible), so a hole is acted on only after the same holes are seen
 * on `confidenceThreshold` consecutive audits. Different holes restart the count; a complete or
 * `unknown` audit clears it. An empty lease table advises a sync at once. While the same holes persist
 * past the threshold every audit keeps advising a sync (syncs are idempotent).
 */
export class HashRangeAuditor {
  readonly confidenceThreshold: number;
  #lastHoles: string | null = null;
  #consecutive = 0;

  constructor(options: HashRangeAuditorOptions = {}) {
    const threshold = options.confidenceThreshold ?? DEFAULT_HOLE_CONFIDENCE_THRESHOLD;
    if (!Number.isSafeInteger(threshold) || threshold < 1) {
      throw new ConfigurationError('@kcl/shard-graph HashRangeAuditor', [
        `confidenceThreshold must be a positive integer, got ${String(threshold)}`,
      ]);
    }
    this.confidenceThreshold = threshold;
  }

  /** Audits one listing and says whether to sync. */
  check(leases: readonly AuditedLease[]): HashRangeAuditVerdict {
    const result = auditHashRangeCoverage(leases);
    if (result.status === 'no-leases') {
      this.reset();
      return {
        result,
        shouldSync: true,
        consecutiveObservations: 0,
        confidenceThreshold: this.confidenceThreshold,
      };
    }
    if (result.status !== 'holes') {
      this.reset();
      return {
        result,
        shouldSync: false,
        consecutiveObservations: 0,
        confidenceThreshold: this.confidenceThreshold,
      };
    }
    const identity = result.holes.map(formatHashKeyRange).join(',');
    this.#consecutive = identity === this.#lastHoles ? this.#consecutive + 1 : 1;
    this.#lastHoles = identity;
    return {
      result,
      shouldSync: this.#consecutive >= this.confidenceThreshold,
      consecutiveObservations: this.#consecutive,
      confidenceThreshold: this.confidenceThreshold,
    };
  }

  /** Forgets the holes seen so far (e.g. after a sync ran). */
  reset(): void {
    this.#lastHoles = null;
    this.#consecutive = 0;
  }
}
