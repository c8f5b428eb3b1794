import type { Lease, LeaseInit } from '@kcl/core';
import { ExtendedSequenceNumber, shardIdOfLeaseKey } from '@kcl/core';
import type { InitialPosition } from './initial-position.js';
import { initialCheckpointOf, initialPositionKind } from './initial-position.js';
import { leaseKeyForShard, streamIdentifierOfLeaseKey } from './lease-key.js';
import type { ShardDescription } from './shard-description.js';
import { compareShardsByStart, parentShardIdsOf } from './shard-description.js';
import { ShardLineage } from './shard-lineage.js';

export interface MissingLeaseOptions {
  readonly initialPosition: InitialPosition;
  /**
   * Skip open children of open parents (a listing that raced a reshard) instead of refusing the whole
   * plan. Default false, as in the Java KCL.
   */
  readonly ignoreUnexpectedChildShards?: boolean;
  /**
   * The stream of a multi-stream application: new lease keys get this prefix, and only existing leases
   * under it are considered.
   */
  readonly streamIdentifier?: string;
}

/**
 * Leases to add for an application that already has some.
 * - `ok: true`: create `leases` in the order given. `skippedShardIds` lists inconsistent shards that
 *   were ignored (only with `ignoreUnexpectedChildShards`).
 * - `ok: false`: the listing has open children of open parents; list the shards again later.
 */
export type MissingLeasePlan =
  | {
      readonly ok: true;
      readonly leases: readonly LeaseInit[];
      readonly skippedShardIds: readonly string[];
    }
  | {
      readonly ok: false;
      readonly reason: 'inconsistent-shards';
      readonly inconsistentShardIds: readonly string[];
      readonly message: string;
    };

/**
 * Fills the gaps of a non-empty lease table from an unfiltered ListShards, by the rules of the Java
 * KCL's NonEmptyLeaseTableSynchronizer. For each open shard without a lease it decides, recursively and
 * memoised, whether the shard is a *descendant*: it has a lease itself, or one of its listed parents is
 * a descendant, or a parent is marked "should create" (non-descendant roots are marked when the position
 * is TRIM_HORIZON or AT_TIMESTAMP, so the whole history gets read).
 * - A descendant's parents that lack a lease get one when the parent is marked "should create" or is not
 *   a descendant (the other side of a merge). Its checkpoint is TRIM_HORIZON when the parent is a
 *   descendant and the position is not AT_TIMESTAMP, otherwise the initial-position sentinel.
 * - A non-descendant open shard gets a lease at the initial position.
 * - A descendant open shard gets no lease now: it is created when its parents reach SHARD_END, so the
 *   parent-before-child order holds.
 */
export function planMissingLeases(
  shards: readonly ShardDescription[],
  leases: readonly Pick<Lease, 'leaseKey'>[],
  options: MissingLeaseOptions,
): MissingLeasePlan {
  const lineage = new ShardLineage(shards);
  const inconsistent = lineage.inconsistentShardIds();
  if (inconsistent.length > 0 && options.ignoreUnexpectedChildShards !== true) {
    return {
      ok: false,
      reason: 'inconsistent-shards',
      inconsistentShardIds: inconsistent,
      message: `@kcl/shard-graph: ${inconsistent.length} open child shard(s) (${inconsistent.join(', ')}) have open parents; the shard listing raced a reshard, so list the shards again later`,
    };
  }
  const inconsistentSet = new Set(inconsistent);
  const stream = options.streamIdentifier;
  const leasedShardIds = new Set<string>();
  for (const lease of leases) {
    if (streamIdentifierOfLeaseKey(lease.leaseKey) === stream || stream === undefined) {
      leasedShardIds.add(shardIdOfLeaseKey(lease.leaseKey));
    }
  }

  const kind = initialPositionKind(options.initialPosition);
  const initialCheckpoint = initialCheckpointOf(kind);
  const planned = new Map<string, ExtendedSequenceNumber>();
  const isDescendantMemo = new Map<string, boolean>();
  const shouldCreate = new Set<string>();

  const isDescendant = (shardId: string): boolean => {
    const known = isDescendantMemo.get(shardId);
    if (known !== undefined) return known;
    let descendant = false;
    if (lineage.has(shardId)) {
      if (leasedShardIds.has(shardId)) {
        // Its ancestors were handled when its own lease was created (or have aged out).
        descendant = true;
      } else {
        const parents = lineage.parentsOf(shardId);
        const descendantParents = new Set<string>();
        for (const parent of parents) {
          if (isDescendant(parent) || shouldCreate.has(parent)) {
            descendant = true;
            descendantParents.add(parent);
          }
        }
        if (descendant) {
          for (const parent of parents) {
            if (leasedShardIds.has(parent)) continue;
            let willCreate = planned.has(parent);
            if (!willCreate && (shouldCreate.has(parent) || !descendantParents.has(parent))) {
              willCreate = true;
            }
            if (willCreate) {
              planned.set(
                parent,
                descendantParents.has(parent) && kind !== 'AT_TIMESTAMP'
                  ? ExtendedSequenceNumber.TRIM_HORIZON
                  : initialCheckpoint,
              );
            }
          }
        } else if (kind === 'TRIM_HORIZON' || kind === 'AT_TIMESTAMP') {
          shouldCreate.add(shardId);
        }
      }
    }
    isDescendantMemo.set(shardId, descendant);
    return descendant;
  };

  const skipped: string[] = [];
  for (const shard of lineage.openShards()) {
    if (leasedShardIds.has(shard.shardId)) continue;
    if (inconsistentSet.has(shard.shardId)) {
      skipped.push(shard.shardId);
      continue;
    }
    if (!isDescendant(shard.shardId)) planned.set(shard.shardId, initialCheckpoint);
  }

  const newLeases = [...planned.entries()]
    .map(([shardId, checkpoint]) => ({ shard: lineage.shard(shardId) as ShardDescription, checkpoint }))
    .sort((a, b) => compareShardsByStart(a.shard, b.shard))
    .map(
      ({ shard, checkpoint }): LeaseInit => ({
        leaseKey: leaseKeyForShard(shard.shardId, stream),
        checkpoint,
        parentShardIds: parentShardIdsOf(shard),
        hashKeyRange: shard.hashKeyRange,
      }),
    );
  return { ok: true, leases: newLeases, skippedShardIds: skipped };
}
