import type { LeaseInit } from '@kcl/core';
import type { HashRangeCoverage } from './hash-range-coverage.js';
import { analyzeHashRangeCoverage, formatHashKeyRange } from './hash-range-coverage.js';
import type { InitialPosition } from './initial-position.js';
import { initialCheckpointOf } from './initial-position.js';
import { leaseKeyForShard } from './lease-key.js';
import type { ShardDescription } from './shard-description.js';
import { compareShardsByStart, isShardClosed, parentShardIdsOf } from './shard-description.js';

export interface InitialLeaseOptions {
  readonly initialPosition: InitialPosition;
  /** Prefix lease keys with `streamIdentifier:` (multi-stream applications). */
  readonly streamIdentifier?: string;
}

/**
 * The leases of an application that has none yet.
 * - `ok: true`: create `leases` in the order given (with create-if-absent, so concurrent creators are harmless).
 * - `ok: false`: the listing was empty, left part of the key space uncovered, or showed a parent still
 *   open beside its children (a reshard raced the listing); list the shards again and retry (the Java
 *   KCL tries three times, a second apart).
 */
export type InitialLeasePlan =
  | { readonly ok: true; readonly leases: readonly LeaseInit[]; readonly coverage: HashRangeCoverage }
  | {
      readonly ok: false;
      readonly reason: 'no-shards' | 'incomplete-hash-range' | 'open-parent';
      readonly coverage: HashRangeCoverage;
      readonly message: string;
    };

/**
 * Plans the leases of an application with an empty lease table. The caller lists the shards with the
 * ShardFilter of the initial position (`shardFilterFor`) and passes them all here: every returned shard,
 * open or closed, gets a lease at the initial-position sentinel with its parents and hash range, because
 * the filter already chose the shards that are live at that position. Closed shards find their children
 * later through ChildShards at their end. Leases come ordered by starting sequence number (then shard id),
 * so a crash half-way leaves a consistent prefix. The shards must cover the whole key space 0 … 2^128 − 1;
 * otherwise nothing is planned, so no part of the stream is silently skipped.
 */
export function planInitialLeases(
  shards: readonly ShardDescription[],
  options: InitialLeaseOptions,
): InitialLeasePlan {
  const unique = new Map<string, ShardDescription>();
  for (const shard of shards) if (!unique.has(shard.shardId)) unique.set(shard.shardId, shard);
  const listed = [...unique.values()];
  const coverage = analyzeHashRangeCoverage(listed.map((shard) => shard.hashKeyRange));
  if (listed.length === 0) {
    return {
      ok: false,
      reason: 'no-shards',
      coverage,
      message:
        '@kcl/shard-graph: the shard listing for the initial position is empty; check the stream is ACTIVE and list the shards again',
    };
  }
  if (!coverage.complete) {
    return {
      ok: false,
      reason: 'incomplete-hash-range',
      coverage,
      message: `@kcl/shard-graph: the ${listed.length} listed shards leave hash key ranges uncovered (${coverage.holes
        .map(formatHashKeyRange)
        .join(', ')}); a reshard probably raced the listing, so list the shards again`,
    };
  }
  // Children exist only once their parent has closed: an open parent listed beside a child means the
  // listing caught a reshard half-way. Leases from it would start the children at the initial position
  // (LATEST: the tip) although their parent's end is still to be read — refuse, as the Java KCL does.
  const open = new Set(listed.filter((shard) => !isShardClosed(shard)).map((shard) => shard.shardId));
  const racing = listed.filter((shard) => parentShardIdsOf(shard).some((parent) => open.has(parent)));
  if (racing.length > 0) {
    const parents = [
      ...new Set(racing.flatMap((shard) => parentShardIdsOf(shard).filter((id) => open.has(id)))),
    ];
    return {
      ok: false,
      reason: 'open-parent',
      coverage,
      message: `@kcl/shard-graph: the listing shows ${parents.join(', ')} still open beside its children ${racing
        .map((shard) => shard.shardId)
        .join(', ')}; a reshard raced the listing, so list the shards again`,
    };
  }
  const checkpoint = initialCheckpointOf(options.initialPosition);
  const leases = listed.sort(compareShardsByStart).map(
    (shard): LeaseInit => ({
      leaseKey: leaseKeyForShard(shard.shardId, options.streamIdentifier),
      checkpoint,
      parentShardIds: parentShardIdsOf(shard),
      hashKeyRange: shard.hashKeyRange,
    }),
  );
  return { ok: true, leases, coverage };
}
