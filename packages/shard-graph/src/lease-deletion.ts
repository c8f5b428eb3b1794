import type { Lease } from '@kcl/core';
import { ExtendedSequenceNumber } from '@kcl/core';
import type { LeaseLookup } from './lease-key.js';
import { childLeaseKeysOf, leaseLookupOf, parentLeaseKeysOf } from './lease-key.js';

/** Why a finished lease must stay for now. */
export type LeaseRetentionReason =
  /** The shard has not been read to its end. */
  | 'not-at-shard-end'
  /** No child shard ids are recorded; look them up (GetRecords ChildShards) and pass them. */
  | 'children-unknown'
  /** A child has no lease yet: deleting the parent could get its lineage recreated or reprocessed. */
  | 'child-lease-missing'
  /** A child lease is still at TRIM_HORIZON or AT_TIMESTAMP: it has not started. */
  | 'child-not-started'
  /** A parent lease of this lease still exists: delete from the oldest generation down. */
  | 'parent-lease-present';

/**
 * Whether a finished lease may be deleted. `leaseKeys` names the child or parent leases behind a
 * `false` answer (empty for `not-at-shard-end` and `children-unknown`).
 */
export type LeaseDeletability =
  | { readonly deletable: true }
  | {
      readonly deletable: false;
      readonly reason: LeaseRetentionReason;
      readonly leaseKeys: readonly string[];
    };

export interface LeaseDeletionOptions {
  /**
   * Child shard ids to use when the lease has none recorded (read from the service at cleanup time).
   * Ignored when the lease records children.
   */
  readonly childShardIds?: readonly string[];
}

/**
 * True when a child lease has started: its checkpoint is past TRIM_HORIZON and AT_TIMESTAMP. LATEST
 * counts as started, as in the Java KCL: a LATEST lease reads from the tip by design, it owes nothing
 * to its parent's records (the parent is at SHARD_END already), and on an idle shard it might never
 * checkpoint a sequence number, which would otherwise keep the parent lease forever.
 */
export function hasLeaseStarted(lease: Pick<Lease, 'checkpoint'>): boolean {
  return lease.checkpoint.isAfter(ExtendedSequenceNumber.TRIM_HORIZON);
}

/**
 * Decides whether a finished lease may be deleted: it is at SHARD_END, every child shard has a lease and
 * that lease has started, and none of its own parent leases remain. Deleting earlier would let a later
 * shard sync or hole audit see the lineage as unprocessed and recreate or re-read it.
 */
export function checkLeaseDeletable(
  lease: Pick<Lease, 'leaseKey' | 'checkpoint' | 'parentShardIds' | 'childShardIds'>,
  lookup: LeaseLookup,
  options: LeaseDeletionOptions = {},
): LeaseDeletability {
  if (!lease.checkpoint.isShardEnd) return { deletable: false, reason: 'not-at-shard-end', leaseKeys: [] };
  const childShardIds = lease.childShardIds.length > 0 ? lease.childShardIds : (options.childShardIds ?? []);
  if (childShardIds.length === 0) return { deletable: false, reason: 'children-unknown', leaseKeys: [] };
  const childKeys = childLeaseKeysOf(lease, childShardIds);
  const missing = childKeys.filter((key) => !present(lookup(key)));
  if (missing.length > 0) return { deletable: false, reason: 'child-lease-missing', leaseKeys: missing };
  const notStarted = childKeys.filter((key) => !hasLeaseStarted(lookup(key) as Lease));
  if (notStarted.length > 0) return { deletable: false, reason: 'child-not-started', leaseKeys: notStarted };
  const parents = parentLeaseKeysOf(lease).filter((key) => present(lookup(key)));
  if (parents.length > 0) return { deletable: false, reason: 'parent-lease-present', leaseKeys: parents };
  return { deletable: true };
}

/**
 * The leases of a listing that may be deleted now (by `checkLeaseDeletable`, judged against the same
 * listing). Deleting one may make its children's parents gone, so a later pass can delete more.
 */
export function findDeletableLeases(leases: readonly Lease[]): Lease[] {
  const lookup = leaseLookupOf(leases);
  return leases.filter((lease) => checkLeaseDeletable(lease, lookup).deletable);
}

function present(lease: Lease | null | undefined): boolean {
  return lease !== null && lease !== undefined;
}
