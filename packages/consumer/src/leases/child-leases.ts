import type { ChildShard, Shard } from '@aws-sdk/client-kinesis';
import type { KclEvent, Lease, LeaseStore, RandomSource } from '@kcl/core';
import { shardIdOfLeaseKey } from '@kcl/core';
import type { ShardEndPlan } from '@kcl/shard-graph';
import {
  childShardFromKinesis,
  leaseKeyForShard,
  planShardEnd,
  streamIdentifierOfLeaseKey,
} from '@kcl/shard-graph';
import type { StreamReader } from '../kinesis/kinesis-stream.js';
import { createMissingLeases } from './create-missing-leases.js';

/** What one attempt at a shard's end did: the children's leases exist, or why not yet. */
export type ChildLeasesOutcome =
  | { readonly kind: 'created'; readonly childShardIds: readonly string[] }
  | Exclude<ShardEndPlan, { readonly kind: 'proceed' }>;

export interface ChildLeasesInput {
  /** The finished shard's lease, as its holder last saw it. */
  readonly lease: Lease;
  /** The children from the shard's last GetRecords (or `lookUpChildShards`). */
  readonly childShards: readonly ChildShard[];
  readonly store: LeaseStore;
  readonly random: RandomSource;
  readonly workerId: string;
  readonly emit: (event: KclEvent) => void;
}

/**
 * The lease bookkeeping of a shard's end (ARCHITECTURE §5), one attempt: reads the leases of the
 * children and of their parents, plans with `planShardEnd` (a merge's child waits for both parents),
 * creates the missing child leases (`leases-created`, cause `shard-end`) and records the children on
 * the finished lease. A store failure rejects; the shard consumer retries with backoff.
 */
export async function createChildLeases(input: ChildLeasesInput): Promise<ChildLeasesOutcome> {
  const { lease, store } = input;
  // Multi-stream lease keys keep their stream prefix for the other shards of the stream.
  const stream = streamIdentifierOfLeaseKey(lease.leaseKey);
  const leases = new Map<string, Lease | null>();
  for (const child of input.childShards) {
    for (const shardId of [child.ShardId ?? '', ...(child.ParentShards ?? [])]) {
      const key = leaseKeyForShard(shardId, stream);
      if (!leases.has(key)) leases.set(key, await store.leases.get(key));
    }
  }
  const plan = planShardEnd({
    lease,
    childShards: input.childShards.map(childShardFromKinesis),
    lookup: (key) => leases.get(key),
    random: input.random,
  });
  if (plan.kind !== 'proceed') return plan;
  await createMissingLeases(plan.leasesToCreate, {
    store,
    workerId: input.workerId,
    emit: input.emit,
    cause: 'shard-end',
  });
  if (plan.childShardIds.length > 0) {
    await store.leases.updateMeta(lease.leaseKey, { childShardIds: plan.childShardIds });
  }
  return { kind: 'created', childShardIds: plan.childShardIds };
}

/** The children of a lease's shard from ListShards, for a shard end that came without ChildShards. */
export async function lookUpChildShards(
  stream: StreamReader,
  leaseKey: string,
  signal: AbortSignal,
): Promise<ChildShard[]> {
  const shards = await stream.listShards(undefined, signal);
  return childrenInListing(shards, shardIdOfLeaseKey(leaseKey)).map((shard) => ({
    ShardId: shard.ShardId,
    ParentShards: [shard.ParentShardId, shard.AdjacentParentShardId].filter(
      (id): id is string => id !== undefined && id !== null,
    ),
    HashKeyRange: shard.HashKeyRange,
  }));
}

/** The shards of a listing whose parent (or adjacent parent, for a merge) is `shardId`. */
export function childrenInListing(listing: readonly Shard[], shardId: string): Shard[] {
  return listing.filter(
    (shard) => shard.ParentShardId === shardId || shard.AdjacentParentShardId === shardId,
  );
}
