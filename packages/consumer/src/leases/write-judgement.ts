import type { Lease, LeaseLossReason, LeaseStore, LeaseWriteResult } from '@kcl/core';
import type { LeaseEntry } from './held-lease.js';

/**
 * How to read the stored lease when a write lost its race on the counter, to tell "our own earlier
 * attempt applied" from "someone else wrote".
 */
export interface WriteJudgement {
  /** The stored lease shows exactly this write (a retried request of it applied). */
  readonly reflects?: (stored: Lease) => boolean;
  /**
   * The stored lease already holds this write's effect, or more (an earlier unanswered write of ours
   * got further): nothing to write. Without it, the write is made again on the stored counter.
   */
  readonly covers?: (stored: Lease) => boolean;
}

export type MismatchVerdict =
  | { readonly kind: 'applied'; readonly lease: Lease }
  | { readonly kind: 'covered'; readonly lease: Lease }
  | { readonly kind: 'resynced'; readonly lease: Lease }
  | { readonly kind: 'lost'; readonly reason: LeaseLossReason };

/** What the judgement needs to know about the write and the lease. */
export interface Mismatch {
  readonly store: LeaseStore;
  readonly workerId: string;
  /** The lease's entry: read after the stored lease, as a write may go unanswered meanwhile. */
  readonly entry: Pick<LeaseEntry, 'leaseKey' | 'uncertain'>;
  /** The counter the write was conditioned on. */
  readonly sentCounter: number;
  readonly result: Extract<LeaseWriteResult, { ok: false }>;
  readonly judgement: WriteJudgement;
}

/**
 * A write lost its race on the counter. Reads the stored lease to tell why:
 * - `applied`: a retried request of this very write had applied (the stored lease shows the write,
 *   one counter ahead, and no earlier write of this lease went unanswered);
 * - `covered`: an earlier unanswered write of ours applied and already holds this write's effect
 *   (a checkpoint at or past this one): nothing to write — never write a checkpoint backwards;
 * - `resynced`: the lease is still this worker's but an earlier unanswered write of ours moved the
 *   counter: adopt the stored copy and write again;
 * - `lost`: another worker took it, or it is gone.
 */
export async function judgeMismatch(mismatch: Mismatch): Promise<MismatchVerdict> {
  const { result, workerId, sentCounter, entry, judgement } = mismatch;
  if (result.reason !== 'counter-mismatch') {
    return { kind: 'lost', reason: result.reason === 'not-found' ? 'deleted' : 'taken-by-other' };
  }
  let current: Lease | null;
  try {
    current = await mismatch.store.leases.get(entry.leaseKey);
  } catch {
    // Without a read nothing can be proven: give the lease up (the safe side).
    return { kind: 'lost', reason: 'taken-by-other' };
  }
  if (current === null) return { kind: 'lost', reason: 'deleted' };
  const reflects = judgement.reflects ?? ((stored: Lease) => stored.owner === workerId);
  if (!entry.uncertain && current.leaseCounter === sentCounter + 1 && reflects(current)) {
    return { kind: 'applied', lease: current };
  }
  // Only a write of ours that went unanswered explains a counter that moved under our own name;
  // without one, someone else writes as this worker (a second process with the same worker id).
  if (entry.uncertain && current.leaseCounter > sentCounter && judgement.covers?.(current) === true) {
    return { kind: 'covered', lease: current };
  }
  if (entry.uncertain && current.owner === workerId && current.leaseCounter > sentCounter) {
    return { kind: 'resynced', lease: current };
  }
  return { kind: 'lost', reason: 'taken-by-other' };
}
