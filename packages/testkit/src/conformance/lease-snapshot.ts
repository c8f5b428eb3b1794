import type { Lease } from '@kcl/core';

/** A lease as plain data (strings for positions and hash keys), for deep equality. */
export function leaseSnapshot(lease: Lease | null): Record<string, unknown> | null {
  if (lease === null) return null;
  return {
    leaseKey: lease.leaseKey,
    owner: lease.owner,
    leaseCounter: lease.leaseCounter,
    checkpoint: lease.checkpoint.toString(),
    pendingCheckpoint: lease.pendingCheckpoint?.toString() ?? null,
    ownerSwitchesSinceCheckpoint: lease.ownerSwitchesSinceCheckpoint,
    parentShardIds: [...lease.parentShardIds].sort(),
    childShardIds: [...lease.childShardIds].sort(),
    hashKeyRange:
      lease.hashKeyRange === null
        ? null
        : `${lease.hashKeyRange.startingHashKey}-${lease.hashKeyRange.endingHashKey}`,
    streamIdentifier: lease.streamIdentifier,
    handoff:
      lease.handoff === null
        ? null
        : `${lease.handoff.from}→${lease.handoff.to}@${lease.handoff.deadline?.toISOString() ?? 'none'}`,
  };
}
