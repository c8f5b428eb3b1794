import type { Lease } from '@kcl/core';

/**
 * A lookup of current leases by lease key: a `Map#get`, a store snapshot, or leases fetched one by one.
 * Null and undefined both mean "no such lease".
 */
export type LeaseLookup = (leaseKey: string) => Lease | null | undefined;

/** A lookup over a listing, for callers that hold all leases at once. */
export function leaseLookupOf(leases: Iterable<Lease>): LeaseLookup {
  const byKey = new Map<string, Lease>();
  for (const lease of leases) byKey.set(lease.leaseKey, lease);
  return (leaseKey) => byKey.get(leaseKey);
}

/**
 * The lease key of a shard: the shard id itself, or `streamIdentifier:shardId` when one application
 * reads several streams (the Java KCL's multi-stream layout).
 */
export function leaseKeyForShard(shardId: string, streamIdentifier?: string): string {
  return streamIdentifier === undefined ? shardId : `${streamIdentifier}:${shardId}`;
}

/**
 * The stream identifier part of a lease key (everything before the last `:`), or undefined for a
 * single-stream key. Parent and child leases of a lease live under the same prefix.
 */
export function streamIdentifierOfLeaseKey(leaseKey: string): string | undefined {
  const index = leaseKey.lastIndexOf(':');
  return index === -1 ? undefined : leaseKey.slice(0, index);
}

/** The lease keys of a lease's parents, under the lease's own stream prefix. */
export function parentLeaseKeysOf(lease: Pick<Lease, 'leaseKey' | 'parentShardIds'>): readonly string[] {
  const stream = streamIdentifierOfLeaseKey(lease.leaseKey);
  return lease.parentShardIds.map((shardId) => leaseKeyForShard(shardId, stream));
}

/** The lease keys of a lease's recorded children, under the lease's own stream prefix. */
export function childLeaseKeysOf(
  lease: Pick<Lease, 'leaseKey' | 'childShardIds'>,
  childShardIds: readonly string[] = lease.childShardIds,
): readonly string[] {
  const stream = streamIdentifierOfLeaseKey(lease.leaseKey);
  return childShardIds.map((shardId) => leaseKeyForShard(shardId, stream));
}
