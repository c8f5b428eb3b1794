import type { Lease } from '@kcl/core';
import type { LeaseLookup } from './lease-key.js';
import { parentLeaseKeysOf } from './lease-key.js';

/**
 * Whether a lease's shard may be processed.
 * - `ready: true`: every parent lease that still exists is at SHARD_END.
 * - `ready: false`: `waitingFor` lists the parent lease keys that exist and are not finished.
 */
export type ParentReadiness =
  | { readonly ready: true }
  | { readonly ready: false; readonly waitingFor: readonly string[] };

/**
 * Decides whether a lease may start processing: only when every parent lease still present is at
 * SHARD_END (both parents of a merge). A missing parent lease counts as done, because it was deleted
 * after finishing or its shard aged out of the stream. Records of a key stay in order only if the
 * parent is read to its end before the child starts. A blocked lease is still held and renewed; the
 * caller checks again later (the Java KCL polls every 10 s).
 */
export function checkParentReadiness(
  lease: Pick<Lease, 'leaseKey' | 'parentShardIds'>,
  lookup: LeaseLookup,
): ParentReadiness {
  const waitingFor: string[] = [];
  for (const parentKey of parentLeaseKeysOf(lease)) {
    const parent = lookup(parentKey);
    if (parent !== null && parent !== undefined && !parent.checkpoint.isShardEnd) waitingFor.push(parentKey);
  }
  return waitingFor.length === 0 ? { ready: true } : { ready: false, waitingFor };
}
