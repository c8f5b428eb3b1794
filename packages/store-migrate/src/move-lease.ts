import type { Clock, Lease, LeaseStore } from '@kcl/core';
import { leaseFromInit, leasesEqual, systemClock } from '@kcl/core';
import { isSealedLease, REPAIR_OWNER, SEAL_OWNER } from './migration-phase.js';
import { exactCopyOf } from './plan-lease-copy.js';

/**
 * What moving a lease did: `moved`; `already-moved` (its source row is sealed); `gone` (no source
 * row); `busy` (it kept changing); `taken-seal` (it was moved before and a worker without the
 * migrating store took the sealed source row since: the target row is the lease and is left alone).
 */
export type MoveOutcome = 'moved' | 'already-moved' | 'gone' | 'busy' | 'taken-seal';

/** A lease whose seal was taken: two live rows, and the target's is the one the migration keeps. */
export interface TakenSeal {
  readonly leaseKey: string;
  /** Who holds the source row now (null when it was released again). */
  readonly sourceOwner: string | null;
  readonly sourceCounter: number;
  readonly targetOwner: string | null;
  readonly targetCounter: number;
  /** What shows the lease was moved before. */
  readonly reason: string;
}

/** How the target row of an unsealed source row relates to it. */
export type TargetRowVerdict =
  | { readonly kind: 'missing' }
  | { readonly kind: 'exact' }
  /** A copy that is behind (mirroring lost writes): the source row may replace it. */
  | { readonly kind: 'behind' }
  /** Not a copy of this source row: the lease was moved and its seal taken since. */
  | { readonly kind: 'taken-seal'; readonly reason: string };

/**
 * Tells a copy that is behind from the row of a lease that was moved and whose seal was taken since.
 * A copy only ever moves along the source row's own history (mirrored writes with the same counter,
 * exact copies of the source), so it is at most at the source's counter and checkpoint (at the same
 * counter it can lack only an unconditional meta update), and it lags only by writes of workers
 * running the migrating store. A target row at or above the source's
 * counter, checkpointed further, or whose source row changed owner to a worker that does not run the
 * migrating store, has a history of its own: the lease went on in the target after it was sealed.
 */
export function judgeTargetRow(
  source: Lease,
  target: Lease | null,
  migratingWorkers: ReadonlySet<string>,
): TargetRowVerdict {
  if (target === null) return { kind: 'missing' };
  if (leasesEqual(target, leaseFromInit(exactCopyOf(source)))) return { kind: 'exact' };
  // A repair lock (a repair that died) or a seal left from a migration in the other direction: never a lease.
  if (target.owner === REPAIR_OWNER || target.owner === SEAL_OWNER) return { kind: 'behind' };
  if (
    target.leaseCounter > source.leaseCounter ||
    (target.leaseCounter === source.leaseCounter && !differsOnlyByCounterlessWrites(target, source))
  ) {
    return {
      kind: 'taken-seal',
      reason: `its target row is at counter ${target.leaseCounter}, at or above the source row's ${source.leaseCounter}`,
    };
  }
  if (target.checkpoint.isAfter(source.checkpoint)) {
    return {
      kind: 'taken-seal',
      reason: `its target row is checkpointed further (${target.checkpoint.toString()}) than the source row (${source.checkpoint.toString()})`,
    };
  }
  if (source.owner !== target.owner && source.owner !== null && !migratingWorkers.has(source.owner)) {
    return {
      kind: 'taken-seal',
      reason: `its source row is held by ${JSON.stringify(source.owner)}, which does not run the migrating store, and its target row by ${JSON.stringify(target.owner)}`,
    };
  }
  return { kind: 'behind' };
}

/**
 * True when two rows at one counter differ only by writes that leave the counter alone: the facts
 * `updateLeaseMeta` writes (children, hash range), and a hand-off request the copy lacks. A copy that
 * lost the mirror of such a write is at the source's counter without it. (A copy cannot have a
 * hand-off its source lacks at the same counter: only a take or release ends one, and both count.)
 */
function differsOnlyByCounterlessWrites(target: Lease, source: Lease): boolean {
  return leasesEqual(
    {
      ...target,
      childShardIds: source.childShardIds,
      hashKeyRange: source.hashKeyRange,
      handoff: target.handoff === null ? source.handoff : target.handoff,
    },
    leaseFromInit(exactCopyOf(source)),
  );
}

export interface MoveLeaseOptions {
  readonly attempts?: number;
  readonly clock?: Clock;
  readonly signal?: AbortSignal;
  /** Workers that run the migrating store (from the registries); see `judgeTargetRow`. */
  readonly migratingWorkers?: ReadonlySet<string>;
  /** The caller moved this lease before (in the same cut-over run): an unsealed source row is a taken seal. */
  readonly movedBefore?: boolean;
  readonly onTakenSeal?: (taken: TakenSeal) => void;
}

/**
 * Moves one lease: copies the source row exactly into the target, then seals the source row with a
 * write conditional on the counter that was copied. The seal succeeds only if nobody wrote the
 * source row since it was read, so at the moment of the seal the target row is exactly the source
 * row, and the lease's counter goes on in the target from the value it had. Repeats (up to
 * `attempts` times) while the lease keeps changing under it.
 *
 * A target row is replaced only when it is a copy that is behind (`judgeTargetRow`). A lease that
 * was moved before and whose seal a worker without the migrating store took has two live rows; the
 * target's is kept, and the lease is reported (`taken-seal`), never moved over it.
 */
export async function moveLease(
  from: LeaseStore,
  to: LeaseStore,
  leaseKey: string,
  options: MoveLeaseOptions = {},
): Promise<MoveOutcome> {
  const clock = options.clock ?? systemClock;
  const attempts = options.attempts ?? 25;
  const migratingWorkers = options.migratingWorkers ?? new Set<string>();
  for (let attempt = 0; attempt < attempts && options.signal?.aborted !== true; attempt++) {
    if (attempt > 0) await clock.sleep(Math.min(200, 5 * 2 ** attempt), options.signal);
    const row = await from.leases.get(leaseKey);
    if (row === null) return 'gone';
    if (isSealedLease(row)) return 'already-moved';
    const current = await to.leases.get(leaseKey);
    const verdict: TargetRowVerdict = options.movedBefore
      ? { kind: 'taken-seal', reason: 'this cut-over moved it, and its source row is no longer sealed' }
      : judgeTargetRow(row, current, migratingWorkers);
    if (verdict.kind === 'taken-seal') {
      // A copy can also be ahead for a moment: a write landed in the source after it was read and was
      // mirrored. Then the source row has changed; read it again.
      if (!options.movedBefore && (await from.leases.get(leaseKey))?.leaseCounter !== row.leaseCounter)
        continue;
      options.onTakenSeal?.({
        leaseKey,
        sourceOwner: row.owner,
        sourceCounter: row.leaseCounter,
        targetOwner: current?.owner ?? null,
        targetCounter: current?.leaseCounter ?? -1,
        reason: verdict.reason,
      });
      return 'taken-seal';
    }
    const copy = exactCopyOf(row);
    if (verdict.kind === 'behind') await to.leases.delete(leaseKey);
    // Fails when a mirrored write created the row meanwhile; read again.
    if (verdict.kind !== 'exact' && !(await to.leases.create(copy)).ok) continue;
    const seal = await from.leases.take(leaseKey, row.leaseCounter, SEAL_OWNER);
    if (seal.ok) return 'moved';
    if (verdict.kind !== 'exact' && (await from.leases.get(leaseKey)) === null) {
      // The lease was deleted while it was being copied: take the copy back, so a deleted lease does
      // not come back in the target (the copy is not authoritative: nothing was sealed).
      const written = await to.leases.get(leaseKey);
      if (written !== null && leasesEqual(written, leaseFromInit(copy))) await to.leases.delete(leaseKey);
      return 'gone';
    }
  }
  return 'busy';
}
