import type { ExtendedSequenceNumber, Lease, LeaseStore } from '@kcl/core';

/** The owner a lease has for the moment a reset writes it: no worker has this id. */
export const RESET_OWNER = 'kcl-cli:reset';

export type ResetOutcome =
  | { readonly leaseKey: string; readonly result: 'reset'; readonly leaseCounter: number }
  /** Another worker took the lease between two of the reset's writes; it took it at the new checkpoint. */
  | { readonly leaseKey: string; readonly result: 'reset-and-taken'; readonly owner: string | null }
  | { readonly leaseKey: string; readonly result: 'gone' }
  | { readonly leaseKey: string; readonly result: 'contended' };

/** Attempts per lease when a worker writes it between the read and the reset's first write. */
const ATTEMPTS = 8;

/**
 * Moves one lease's checkpoint, fenced through the lease counter so that a running owner cannot write
 * over it: the lease is first taken by `RESET_OWNER` (the counter moves and the owner changes, so the
 * owner's next renewal or checkpoint fails and it drops the lease), then checkpointed, then released —
 * every write conditional on the counter the previous one produced. Whoever takes the lease next
 * (the old owner included) starts from the new checkpoint. A lost race before the first write is
 * retried on a fresh read.
 */
export async function resetLease(
  store: LeaseStore,
  leaseKey: string,
  checkpoint: ExtendedSequenceNumber,
): Promise<ResetOutcome> {
  for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
    const lease: Lease | null = await store.leases.get(leaseKey);
    if (lease === null) return { leaseKey, result: 'gone' };
    const taken = await store.leases.take(leaseKey, lease.leaseCounter, RESET_OWNER);
    if (!taken.ok) {
      if (taken.reason === 'not-found') return { leaseKey, result: 'gone' };
      continue;
    }
    const written = await store.leases.checkpoint(leaseKey, taken.lease.leaseCounter, {
      checkpoint,
      pendingCheckpoint: null,
    });
    if (!written.ok) {
      // A worker stole the lease from the placeholder owner before the checkpoint: try again.
      if (written.reason === 'not-found') return { leaseKey, result: 'gone' };
      continue;
    }
    const released = await store.leases.release(leaseKey, written.lease.leaseCounter);
    if (released.ok) return { leaseKey, result: 'reset', leaseCounter: released.lease.leaseCounter };
    if (released.reason === 'not-found') return { leaseKey, result: 'gone' };
    const now = await store.leases.get(leaseKey);
    return { leaseKey, result: 'reset-and-taken', owner: now?.owner ?? null };
  }
  return { leaseKey, result: 'contended' };
}

export type ReleaseOutcome =
  | { readonly leaseKey: string; readonly result: 'released' }
  | { readonly leaseKey: string; readonly result: 'moved'; readonly owner: string | null }
  | { readonly leaseKey: string; readonly result: 'gone' };

/**
 * Gives a lease of `workerId` back (no owner), conditional on its counter: the owner, if it still
 * runs, finds its next renewal refused and drops the lease; any worker takes it up from its
 * checkpoint. A lease that moved on meanwhile is left as it is.
 */
export async function releaseLeaseOf(
  store: LeaseStore,
  leaseKey: string,
  workerId: string,
): Promise<ReleaseOutcome> {
  for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
    const lease = await store.leases.get(leaseKey);
    if (lease === null) return { leaseKey, result: 'gone' };
    if (lease.owner !== workerId) return { leaseKey, result: 'moved', owner: lease.owner };
    const released = await store.leases.release(leaseKey, lease.leaseCounter);
    if (released.ok) return { leaseKey, result: 'released' };
    if (released.reason === 'not-found') return { leaseKey, result: 'gone' };
  }
  const lease = await store.leases.get(leaseKey);
  return { leaseKey, result: 'moved', owner: lease?.owner ?? null };
}
