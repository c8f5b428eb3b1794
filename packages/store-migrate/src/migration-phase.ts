import type { Lease, MigrationMarker } from '@kcl/core';

/**
 * The phases of a live migration, as the source store's migration marker records them:
 * - `mirroring`: no marker on the source. The source is authoritative; migrating workers mirror every
 *   write to the target, and `kcl-migrate --live` backfills it.
 * - `cutover`: `kcl-migrate cutover` is moving the leases one by one (copy, then seal the source row).
 *   Each lease is authoritative in the source until sealed, in the target after.
 * - `target`: every lease has been moved; new leases are created in the target (after a sealed
 *   placeholder in the source, so creation still has one place where it is decided). The target
 *   keeps its guard marker until `complete`.
 * - `complete`: the source is no longer read or written, the target's guard is lifted, and workers
 *   may be moved to the plain target store.
 */
export type LiveMigrationPhase = 'mirroring' | 'cutover' | 'target' | 'complete';

export const LIVE_MIGRATION_PHASES: readonly LiveMigrationPhase[] = [
  'mirroring',
  'cutover',
  'target',
  'complete',
];

/**
 * The owner written into a source lease when it is moved to the target (its "seal"). A sealed source
 * row is never handed to a worker: its counter is one no worker has seen, so every conditional write
 * on it fails and is redirected to the target.
 */
export const SEAL_OWNER = 'kcl-migrate:moved-to-target';

/**
 * The owner a target copy briefly gets while mirroring or `kcl-migrate --live` replaces it with the
 * source's newer state. Taking the copy with this owner, conditional on the counter just read, makes
 * the replacement conditional: a concurrent repair or mirrored write makes it give way instead of being
 * overwritten. Only ever on a copy (the target row of a lease that has not been moved).
 */
export const REPAIR_OWNER = 'kcl-migrate:repairing-copy';

/**
 * The counter of a source placeholder written when a lease is created during the `target` phase. No
 * worker ever holds such a counter.
 */
export const PLACEHOLDER_COUNTER = 2 ** 52;

/** Worker metadata keys a migrating store adds to its heartbeats, so `kcl-migrate` can see who runs it. */
export const MIGRATING_WORKER_METADATA = Object.freeze({
  store: 'kcl-migrate.store',
  phase: 'kcl-migrate.phase',
  phaseRefreshMs: 'kcl-migrate.phaseRefreshMs',
});

const TAG = /\s*\[kcl-migrate live migration: ([a-z]+)\]$/;

/** The tag of a marker text: a live-migration phase, `pending` (the target's guard), or null. */
export type MarkerTag = LiveMigrationPhase | 'pending';

export function isSealedLease(lease: Pick<Lease, 'owner'>): boolean {
  return lease.owner === SEAL_OWNER;
}

/** The source marker text of a phase: names the target (for workers still pointed at the source) and tags the phase. */
export function phaseMarkerText(targetName: string, phase: Exclude<LiveMigrationPhase, 'mirroring'>): string {
  return `${targetName} [kcl-migrate live migration: ${phase}]`;
}

/**
 * The marker left on the target while the source is still authoritative, so a worker started on the
 * plain target store stops instead of processing alone.
 */
export function pendingMarkerText(sourceName: string): string {
  return `nowhere yet: a live migration from ${sourceName} to this store is in progress and this store becomes authoritative at cut-over [kcl-migrate live migration: pending]`;
}

export function markerTag(text: string): MarkerTag | null {
  const match = TAG.exec(text);
  const tag = match?.[1];
  if (tag === 'pending') return 'pending';
  return LIVE_MIGRATION_PHASES.includes(tag as LiveMigrationPhase) ? (tag as LiveMigrationPhase) : null;
}

/** The marker text without its tag: the name of the store it points to. */
export function markerTarget(text: string): string {
  return text.replace(TAG, '');
}

/** How a source marker reads to a migrating store whose target is described by `targetDescription`. */
export type SourceMarkerReading =
  | { readonly kind: 'phase'; readonly phase: LiveMigrationPhase }
  /** The source was migrated somewhere else (or the marker is not understood): workers must stop. */
  | { readonly kind: 'foreign'; readonly marker: MigrationMarker };

/**
 * Reads the source's marker: none is `mirroring`; a tagged one is its phase; an untagged one (left by
 * an offline `kcl-migrate` copy) is `complete` when it names this target, and foreign otherwise.
 */
export function readSourceMarker(
  marker: MigrationMarker | null,
  targetDescription: string,
): SourceMarkerReading {
  if (marker === null) return { kind: 'phase', phase: 'mirroring' };
  const tag = markerTag(marker.migratedTo);
  if (tag !== null && tag !== 'pending') return { kind: 'phase', phase: tag };
  if (tag === null && marker.migratedTo.startsWith(targetDescription))
    return { kind: 'phase', phase: 'complete' };
  return { kind: 'foreign', marker };
}
