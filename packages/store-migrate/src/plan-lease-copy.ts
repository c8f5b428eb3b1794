import type { ExtendedSequenceNumber, Lease, LeaseInit } from '@kcl/core';
import { compareLeaseKeys, hashKeyRangesEqual, leaseFromInit, leasesEqual } from '@kcl/core';

/**
 * The facts of a lease a copy must keep exactly. Owners, hand-offs and counters are not among them: an
 * offline copy clears owners (the new fleet takes over cleanly), and with them any hand-off (one from an
 * owner that no longer holds the lease is void, as a release ends it), and starts the counter above
 * the source's. A live (exact) copy keeps those too; it is compared whole (`leasesEqual`).
 */
export type LeaseField =
  | 'checkpoint'
  | 'pendingCheckpoint'
  | 'parentShardIds'
  | 'childShardIds'
  | 'hashKeyRange'
  | 'streamIdentifier';

export const LEASE_FIELDS: readonly LeaseField[] = [
  'checkpoint',
  'pendingCheckpoint',
  'parentShardIds',
  'childShardIds',
  'hashKeyRange',
  'streamIdentifier',
];

/**
 * What an offline copy does with one lease:
 * - `create`: absent on the target.
 * - `unchanged`: the target already holds exactly this copy (a re-run).
 * - `update`: the target holds an older copy (the source moved on since an interrupted run).
 * - `target-ahead`: the target lease moved on since it was copied (taken, checkpointed further or
 *   written by someone else); it is kept.
 * - `overwrite`: as `target-ahead`, but `force` was given, so the source's state replaces it.
 */
export type LeaseCopyAction = 'create' | 'unchanged' | 'update' | 'target-ahead' | 'overwrite';

export interface PlannedLeaseCopy {
  readonly leaseKey: string;
  readonly action: LeaseCopyAction;
  readonly source: Lease;
  /** The target lease as read when planning; null when absent. */
  readonly target: Lease | null;
  /** What the target lease becomes (for `create`, `update` and `overwrite`). */
  readonly copy: LeaseInit;
  /** Why the target counts as ahead; null otherwise. */
  readonly reason: string | null;
}

/**
 * The target lease an offline copy writes for a source lease: every fact kept exactly, no owner (and so
 * no hand-off, which only an owner can be in the middle of), and a counter one above the source's, so
 * no counter a source worker saw is ever valid on the target.
 */
export function offlineCopyOf(source: Lease): LeaseInit {
  return {
    leaseKey: source.leaseKey,
    owner: null,
    leaseCounter: source.leaseCounter + 1,
    checkpoint: source.checkpoint,
    pendingCheckpoint: source.pendingCheckpoint,
    ownerSwitchesSinceCheckpoint: source.ownerSwitchesSinceCheckpoint,
    parentShardIds: source.parentShardIds,
    childShardIds: source.childShardIds,
    hashKeyRange: source.hashKeyRange,
    streamIdentifier: source.streamIdentifier,
    handoff: null,
  };
}

/** An exact copy, owner, hand-off and counter included: what a live migration moves. */
export function exactCopyOf(source: Lease): LeaseInit {
  return {
    ...offlineCopyOf(source),
    owner: source.owner,
    leaseCounter: source.leaseCounter,
    handoff: source.handoff,
  };
}

/** The fields in which two leases differ (owners, hand-offs, counters and owner switches are not compared). */
export function leaseFieldDifferences(a: Lease, b: Lease): LeaseField[] {
  const differences: LeaseField[] = [];
  if (!a.checkpoint.equals(b.checkpoint)) differences.push('checkpoint');
  if (!samePosition(a.pendingCheckpoint, b.pendingCheckpoint)) differences.push('pendingCheckpoint');
  if (!sameIds(a.parentShardIds, b.parentShardIds)) differences.push('parentShardIds');
  if (!sameIds(a.childShardIds, b.childShardIds)) differences.push('childShardIds');
  if (!hashKeyRangesEqual(a.hashKeyRange, b.hashKeyRange)) differences.push('hashKeyRange');
  if (a.streamIdentifier !== b.streamIdentifier) differences.push('streamIdentifier');
  return differences;
}

/** Why the target lease has moved on since it was copied from `source`, or null if it has not. */
export function targetAheadReason(source: Lease, target: Lease): string | null {
  const expected = source.leaseCounter + 1;
  if (target.owner !== null) return `held by ${JSON.stringify(target.owner)} on the target`;
  if (target.checkpoint.isAfter(source.checkpoint)) {
    return `target checkpoint ${target.checkpoint.toString()} is after the source's ${source.checkpoint.toString()}`;
  }
  if (target.leaseCounter > expected) {
    return `target counter ${target.leaseCounter} is above the copy's ${expected} (written since the copy)`;
  }
  return null;
}

/**
 * Decides, lease by lease, what an offline copy does. Pure: the caller reads both sides. Target
 * leases without a source lease are left alone (and reported by `compareLeaseSets`).
 */
export function planLeaseCopy(
  sources: readonly Lease[],
  targets: readonly Lease[],
  options: { readonly force?: boolean } = {},
): PlannedLeaseCopy[] {
  const targetByKey = new Map(targets.map((lease) => [lease.leaseKey, lease]));
  return [...sources]
    .sort((a, b) => compareLeaseKeys(a.leaseKey, b.leaseKey))
    .map((source): PlannedLeaseCopy => {
      const copy = offlineCopyOf(source);
      const target = targetByKey.get(source.leaseKey) ?? null;
      const base = { leaseKey: source.leaseKey, source, target, copy };
      if (target === null) return { ...base, action: 'create', reason: null };
      if (leasesEqual(leaseFromInit(copy), target)) return { ...base, action: 'unchanged', reason: null };
      const reason = targetAheadReason(source, target);
      if (reason === null) return { ...base, action: 'update', reason: null };
      return { ...base, action: options.force === true ? 'overwrite' : 'target-ahead', reason };
    });
}

/** One difference between the two sides found by a verification. */
export interface LeaseDifference {
  readonly leaseKey: string;
  readonly kind: 'missing-on-target' | 'only-on-target' | 'different';
  /** For `different`: the fields that differ. */
  readonly fields: readonly LeaseField[];
  readonly source: Lease | null;
  readonly target: Lease | null;
  /** For `different`: the target moved on since the copy (a new fleet has been working on it). */
  readonly targetAhead: boolean;
}

export interface LeaseSetComparison {
  readonly compared: number;
  readonly matching: number;
  readonly differences: readonly LeaseDifference[];
}

/** Compares the two sides lease by lease: presence, checkpoints, pending checkpoints, lineage, hash ranges, streams. */
export function compareLeaseSets(sources: readonly Lease[], targets: readonly Lease[]): LeaseSetComparison {
  const targetByKey = new Map(targets.map((lease) => [lease.leaseKey, lease]));
  const sourceKeys = new Set(sources.map((lease) => lease.leaseKey));
  const differences: LeaseDifference[] = [];
  let matching = 0;
  for (const source of [...sources].sort((a, b) => compareLeaseKeys(a.leaseKey, b.leaseKey))) {
    const target = targetByKey.get(source.leaseKey) ?? null;
    if (target === null) {
      differences.push({
        leaseKey: source.leaseKey,
        kind: 'missing-on-target',
        fields: [],
        source,
        target,
        targetAhead: false,
      });
      continue;
    }
    const fields = leaseFieldDifferences(source, target);
    if (fields.length === 0) {
      matching += 1;
    } else {
      differences.push({
        leaseKey: source.leaseKey,
        kind: 'different',
        fields,
        source,
        target,
        targetAhead: targetAheadReason(source, target) !== null,
      });
    }
  }
  for (const target of targets) {
    if (!sourceKeys.has(target.leaseKey)) {
      differences.push({
        leaseKey: target.leaseKey,
        kind: 'only-on-target',
        fields: [],
        source: null,
        target,
        targetAhead: false,
      });
    }
  }
  differences.sort((a, b) => compareLeaseKeys(a.leaseKey, b.leaseKey));
  return { compared: sources.length, matching, differences };
}

function samePosition(a: ExtendedSequenceNumber | null, b: ExtendedSequenceNumber | null): boolean {
  if (a === null || b === null) return a === b;
  return a.equals(b);
}

function sameIds(a: readonly string[], b: readonly string[]): boolean {
  if (a.length !== b.length) return false;
  const sortedB = [...b].sort();
  return [...a].sort().every((value, index) => value === sortedB[index]);
}
