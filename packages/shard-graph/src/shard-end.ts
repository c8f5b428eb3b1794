import type { Lease, LeaseInit, RandomSource } from '@kcl/core';
import { ExtendedSequenceNumber, uniqueSorted } from '@kcl/core';
import type { LeaseLookup } from './lease-key.js';
import { leaseKeyForShard, streamIdentifierOfLeaseKey } from './lease-key.js';
import type { ChildShardDescription } from './shard-description.js';

/** The chance that a blocked merge parent gives its lease up instead of waiting, as in the Java KCL. */
export const DROP_BLOCKED_LEASE_PROBABILITY = 1 / 30;

export interface ShardEndInput {
  /** The lease whose shard was read to its end. */
  readonly lease: Pick<Lease, 'leaseKey'>;
  /** The `ChildShards` of the final GetRecords response (empty when the shard or stream is gone). */
  readonly childShards: readonly ChildShardDescription[];
  /** The current leases: at least the children and, for a merge, both parents. */
  readonly lookup: LeaseLookup;
  /**
   * When given, a blocked merge sets `dropLease` with probability 1/30, so a worker stuck waiting for
   * a partner that only another worker can create eventually lets someone else try.
   */
  readonly random?: RandomSource;
}

/**
 * What to do at the end of a shard.
 * - `proceed`: create `leasesToCreate` (create-if-absent), record `childShardIds` on the lease, then have
 *   the processor checkpoint SHARD_END. Empty lists when the shard has no children (deleted stream or
 *   trimmed shard): the lease just finishes.
 * - `blocked`: the only child is a merge whose other parent has no lease yet; keep the lease and retry
 *   after a backoff (or release it when `dropLease` is true).
 * - `invalid`: the ChildShards answer cannot be right; treat the response as invalid and read it again.
 */
export type ShardEndPlan =
  | {
      readonly kind: 'proceed';
      readonly leasesToCreate: readonly LeaseInit[];
      readonly childShardIds: readonly string[];
    }
  | {
      readonly kind: 'blocked';
      readonly reason: 'merge-parent-lease-missing';
      readonly childShardId: string;
      readonly presentParentLeaseKey: string;
      readonly missingParentLeaseKey: string;
      readonly dropLease: boolean;
      readonly message: string;
    }
  | {
      readonly kind: 'invalid';
      readonly reason: 'merge-child-without-two-parents' | 'child-without-parents';
      readonly childShardId: string;
      readonly message: string;
    };

/**
 * Plans the shard-end bookkeeping from ChildShards. Children always start at TRIM_HORIZON, whatever the
 * application's initial position, so no record written between the parent's end and the child's first
 * read is skipped; each child lease carries its parents (so it waits for them) and its hash range.
 *
 * The merge guard: a single child must name exactly two parents, and the two parent leases must be both
 * present or both absent. If only one exists, the other side of the merge has not been created yet (its
 * own ancestors are still being read); creating the child now would let it start once this parent
 * finishes, before the other parent's records are read. The guard applies only while some child lease
 * is still missing: once the child lease exists there is nothing left for it to protect.
 */
export function planShardEnd(input: ShardEndInput): ShardEndPlan {
  const { lease, childShards, lookup } = input;
  const stream = streamIdentifierOfLeaseKey(lease.leaseKey);
  for (const child of childShards) {
    if (child.parentShardIds.length === 0) {
      return {
        kind: 'invalid',
        reason: 'child-without-parents',
        childShardId: child.shardId,
        message: `@kcl/shard-graph: child shard ${JSON.stringify(child.shardId)} of ${JSON.stringify(lease.leaseKey)} lists no parents; read the shard end again`,
      };
    }
  }
  const missingChildren = childShards.filter(
    (child) => !exists(lookup(leaseKeyForShard(child.shardId, stream))),
  );

  const only = childShards.length === 1 ? childShards[0] : undefined;
  if (only !== undefined && missingChildren.length > 0) {
    const parents = uniqueSorted(only.parentShardIds);
    if (parents.length !== 2) {
      return {
        kind: 'invalid',
        reason: 'merge-child-without-two-parents',
        childShardId: only.shardId,
        message: `@kcl/shard-graph: ${JSON.stringify(lease.leaseKey)} has a single child shard ${JSON.stringify(only.shardId)} that names ${parents.length} parent(s) instead of the two of a merge; read the shard end again`,
      };
    }
    const [firstKey, secondKey] = parents.map((parent) => leaseKeyForShard(parent, stream)) as [
      string,
      string,
    ];
    const firstExists = exists(lookup(firstKey));
    const secondExists = exists(lookup(secondKey));
    if (firstExists !== secondExists) {
      const presentParentLeaseKey = firstExists ? firstKey : secondKey;
      const missingParentLeaseKey = firstExists ? secondKey : firstKey;
      return {
        kind: 'blocked',
        reason: 'merge-parent-lease-missing',
        childShardId: only.shardId,
        presentParentLeaseKey,
        missingParentLeaseKey,
        dropLease: input.random !== undefined && input.random() < DROP_BLOCKED_LEASE_PROBABILITY,
        message: `@kcl/shard-graph: merge child ${JSON.stringify(only.shardId)} cannot be created yet: parent lease ${JSON.stringify(missingParentLeaseKey)} does not exist while ${JSON.stringify(presentParentLeaseKey)} does; keep the lease and retry after a backoff`,
      };
    }
  }

  const leasesToCreate = missingChildren.map(
    (child): LeaseInit => ({
      leaseKey: leaseKeyForShard(child.shardId, stream),
      checkpoint: ExtendedSequenceNumber.TRIM_HORIZON,
      parentShardIds: uniqueSorted(child.parentShardIds),
      hashKeyRange: child.hashKeyRange,
    }),
  );
  return {
    kind: 'proceed',
    leasesToCreate,
    childShardIds: uniqueSorted(childShards.map((child) => child.shardId)),
  };
}

function exists(lease: Lease | null | undefined): lease is Lease {
  return lease !== null && lease !== undefined;
}
