import type { Shard } from '@aws-sdk/client-kinesis';
import type { KclEvent, Lease, LeaseStore, Logger } from '@kcl/core';
import { shardIdOfLeaseKey } from '@kcl/core';
import { findDeletableLeases } from '@kcl/shard-graph';
import { classifyKinesisError } from '../kinesis/kinesis-errors.js';
import type { StreamReader } from '../kinesis/kinesis-stream.js';
import { childrenInListing } from './child-leases.js';

export interface LeaseCleanupOptions {
  readonly store: LeaseStore;
  /** The stream of a lease's shard (null: a lease this worker cannot read, left alone). */
  readonly streamOf: (leaseKey: string) => StreamReader | null;
  readonly workerId: string;
  readonly logger: Logger;
  readonly emit: (event: KclEvent) => void;
  /** Counts the leases of shards that no longer exist, once per run that deleted some. */
  readonly onGarbageDeleted: (count: number) => void;
  readonly signal: AbortSignal;
}

/**
 * One run of the lease cleanup (ARCHITECTURE §5): deletes finished parent leases whose children have
 * all started and whose own parents are gone. A finished lease that knows no children ended because its
 * shard (or the whole stream) no longer exists, or its children were not recorded: the listing tells
 * which. Children found are recorded (the lease is then deleted the usual way); a shard Kinesis no
 * longer lists, and that has no children, is gone for good and its lease is deleted.
 */
export async function cleanUpLeases(options: LeaseCleanupOptions): Promise<void> {
  const { store, emit, workerId } = options;
  const leases = await store.leases.list();
  for (const lease of findDeletableLeases(leases)) {
    await store.leases.delete(lease.leaseKey);
    emit({ type: 'lease-deleted', workerId, leaseKey: lease.leaseKey });
  }
  // Finished leases that know no children, by stream: each stream's listing tells about its own.
  const childless = new Map<StreamReader, Lease[]>();
  for (const lease of leases) {
    if (!lease.checkpoint.isShardEnd || lease.childShardIds.length > 0) continue;
    const stream = options.streamOf(lease.leaseKey);
    if (stream === null) continue;
    childless.set(stream, [...(childless.get(stream) ?? []), lease]);
  }
  for (const [stream, streamLeases] of childless) await cleanUpChildless(options, stream, streamLeases);
}

async function cleanUpChildless(
  options: LeaseCleanupOptions,
  stream: StreamReader,
  childless: readonly Lease[],
): Promise<void> {
  const { store, emit, logger, workerId } = options;
  let listing: Shard[];
  let streamGone = false;
  try {
    listing = await stream.listShards(undefined, options.signal);
  } catch (error) {
    if (classifyKinesisError(error) !== 'not-found') throw error;
    listing = [];
    streamGone = true;
  }
  const listed = new Set(listing.map((shard) => shard.ShardId));
  let deleted = 0;
  for (const lease of childless) {
    const shardId = shardIdOfLeaseKey(lease.leaseKey);
    const children = childrenInListing(listing, shardId).map((shard) => shard.ShardId as string);
    if (children.length > 0) {
      await store.leases.updateMeta(lease.leaseKey, { childShardIds: children });
      continue;
    }
    if (listed.has(shardId)) continue;
    await store.leases.delete(lease.leaseKey);
    deleted += 1;
    emit({ type: 'lease-deleted', workerId, leaseKey: lease.leaseKey });
  }
  if (deleted > 0) {
    options.onGarbageDeleted(deleted);
    const message = streamGone
      ? 'the stream no longer exists: deleted the leases of its finished shards'
      : 'deleted the leases of finished shards that no longer exist';
    logger.warn(message, { stream: stream.name, deleted });
  }
}
