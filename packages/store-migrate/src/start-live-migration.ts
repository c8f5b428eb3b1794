import type { LeaseStore } from '@kcl/core';
import { leaseFromInit, leasesEqual, systemClock } from '@kcl/core';
import type { LiveMigrationOptions } from './live-migration.js';
import { readLiveMigrationState } from './live-migration.js';
import { mapConcurrently } from './map-concurrently.js';
import { LiveMigrationRefusedError } from './migration-errors.js';
import { isSealedLease, pendingMarkerText } from './migration-phase.js';
import { exactCopyOf } from './plan-lease-copy.js';
import type { UnreadableLeaseRow } from './read-lease-source.js';
import { repairTargetCopy } from './repair-target-copy.js';

export interface LiveMigrationStartReport {
  readonly sourceLeases: number;
  /** Target copies created. */
  readonly created: number;
  /** Target copies that were behind (or left over from something else) and were replaced. */
  readonly replaced: number;
  readonly inSync: number;
  /**
   * Copies that were written while being copied (a newer write was mirrored, or a worker was
   * repairing it); mirroring brings them over, and `status` shows whether any is still behind.
   */
  readonly changing: number;
  /** Leases deleted (or moved) since they were listed: not copied, so nothing is put back. */
  readonly gone: number;
  /** Seals left from an earlier migration that were removed (`force`). */
  readonly removedSeals: number;
  /**
   * Source lease rows that cannot be read, so have no copy. The cut-over refuses to run until they
   * are fixed or deleted.
   */
  readonly unreadable: readonly UnreadableLeaseRow[];
}

const STEP = 'starting the live migration';

/**
 * Starts a live migration: guards the target with a marker (a worker started on the plain target
 * store stops), then brings every target copy in sync with its source row, exactly, owner and counter
 * included. Migrating workers keep the copies in sync by mirroring (and repairing) their writes.
 *
 * Safe to run again at any moment while the fleet runs: each lease is read again, target copy first
 * and source row second, right before its copy is written, so a copy is only ever replaced by the
 * source's current state, never by an older one; a replacement is conditional on the copy not having
 * changed since it was read; a lease deleted or moved since the listing is not put back. It writes
 * only while the source is in the `mirroring` phase (read right before each write): once a cut-over
 * has begun it stops, because the target rows are the cut-over's then.
 */
export async function startLiveMigration(
  options: LiveMigrationOptions & { readonly force?: boolean },
): Promise<LiveMigrationStartReport> {
  const { from, to } = options;
  const clock = options.clock ?? systemClock;
  const state = await readLiveMigrationState(from, to);
  if (state.phase !== 'mirroring') {
    throw new LiveMigrationRefusedError(STEP, [
      state.phase === 'foreign'
        ? `the source is marked as migrated to ${state.sourceMarker?.migratedTo}; clear that marker first if it is wrong`
        : state.phase === 'complete' && state.targetGuarded
          ? 'the cut-over stopped after marking the migration complete but before lifting the target’s guard; run `kcl-migrate cutover` again to finish it'
          : `the migration is already in phase ${state.phase}; see \`kcl-migrate status\` (or run \`kcl-migrate cutover\` to finish it)`,
    ]);
  }
  await to.admin.ensureSchema();
  await to.admin.setMigrationMarker({
    migratedTo: pendingMarkerText(options.sourceName ?? from.description),
    migratedAt: new Date(clock.now()),
  });

  const scan = await from.admin.scan();
  const rows = scan.leases;
  const seals = rows.filter(isSealedLease);
  if (seals.length > 0 && options.force !== true) {
    throw new LiveMigrationRefusedError(STEP, [
      `${seals.length} source leases (${seals
        .slice(0, 5)
        .map((row) => row.leaseKey)
        .join(
          ', ',
        )}${seals.length > 5 ? ', …' : ''}) are sealed by an earlier migration; pass --force to remove those seals`,
    ]);
  }
  for (const seal of seals) await from.leases.delete(seal.leaseKey);

  // The listing can take long on a big table: a cut-over may have begun meanwhile.
  await assertStillMirroring(from, to);
  const leases = rows.filter((row) => !isSealedLease(row));
  const counts = { created: 0, replaced: 0, inSync: 0, changing: 0, gone: 0 };
  let done = 0;
  await mapConcurrently(
    leases,
    options.concurrency ?? 16,
    async (listed) => {
      // The copy first, the source second: a copy on the source's history is then at most the
      // source's counter, so one above it is left over from something else and may be replaced.
      const current = await to.leases.get(listed.leaseKey);
      const source = await from.leases.get(listed.leaseKey);
      if (source === null || isSealedLease(source)) {
        counts.gone += 1;
      } else if (current !== null && leasesEqual(current, leaseFromInit(exactCopyOf(source)))) {
        counts.inSync += 1;
      } else {
        await assertStillMirroring(from, to);
        const outcome = await repairTargetCopy(to, source, { current, replaceAhead: true });
        if (outcome === 'in-sync') counts.inSync += 1;
        else if (outcome === 'created') counts.created += 1;
        else if (outcome === 'repaired') counts.replaced += 1;
        else counts.changing += 1;
      }
      done += 1;
      options.onProgress?.({ stage: 'backfill', done, total: leases.length });
    },
    options.signal,
  );
  return { sourceLeases: leases.length, ...counts, removedSeals: seals.length, unreadable: scan.unreadable };
}

/** Throws when the source has left the mirroring phase: the target rows are the cut-over's then. */
export async function assertStillMirroring(from: LeaseStore, to: LeaseStore): Promise<void> {
  const state = await readLiveMigrationState(from, to);
  if (state.phase === 'mirroring') return;
  if (state.phase === 'complete' && state.targetGuarded) {
    // This run may have put the guard back after the cut-over lifted it; nobody needs it now.
    await to.admin.setMigrationMarker(null);
  }
  throw new LiveMigrationRefusedError(STEP, [
    `the cut-over began while the backfill ran (the source is now in phase ${state.phase}); the backfill stopped, and the cut-over moves every lease itself`,
  ]);
}
