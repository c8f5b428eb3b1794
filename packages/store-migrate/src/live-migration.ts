import type { Clock, LeaseStore, MigrationMarker, WorkerRecord } from '@kcl/core';
import type { LiveMigrationPhase } from './migration-phase.js';
import { MIGRATING_WORKER_METADATA, markerTag, readSourceMarker } from './migration-phase.js';
import { readMigrationMarker } from './read-lease-source.js';
import { listWorkersIfPresent } from './watch-source-activity.js';

/**
 * What the steps of a live migration share: their options, the phase the stores record, and which
 * workers run the migrating store. The steps live in their own modules: `start-live-migration.ts`
 * (guard the target and backfill it), `cut-over-live-migration.ts` (move every lease and finish),
 * `live-migration-status.ts` (where it stands) and `abort-live-migration.ts` (give up before the
 * cut-over).
 */

/** The stores of a live migration and how to reach them. */
export interface LiveMigrationOptions {
  readonly from: LeaseStore;
  readonly to: LeaseStore;
  /** How the target is named in the source's marker (default: its description). */
  readonly targetName?: string;
  /** How the source is named in the target's guard marker (default: its description). */
  readonly sourceName?: string;
  readonly clock?: Clock;
  readonly signal?: AbortSignal;
  /** Leases copied or moved at once (default 16). */
  readonly concurrency?: number;
  readonly onProgress?: (progress: LiveMigrationProgress) => void;
}

export interface LiveMigrationProgress {
  readonly stage: 'backfill' | 'moving' | 'sweeping' | 'watching' | 'settling';
  readonly done: number;
  readonly total: number;
}

/** The phase of a live migration as the stores record it. */
export interface LiveMigrationState {
  /** From the source's marker; `foreign` when the source was migrated elsewhere. */
  readonly phase: LiveMigrationPhase | 'foreign';
  readonly sourceMarker: MigrationMarker | null;
  readonly targetMarker: MigrationMarker | null;
  /** True when the target carries the guard marker that keeps plain workers off it. */
  readonly targetGuarded: boolean;
}

export async function readLiveMigrationState(from: LeaseStore, to: LeaseStore): Promise<LiveMigrationState> {
  const [sourceMarker, targetMarker] = await Promise.all([
    readMigrationMarker(from),
    readMigrationMarker(to),
  ]);
  const reading = readSourceMarker(sourceMarker, to.description);
  return {
    phase: reading.kind === 'phase' ? reading.phase : 'foreign',
    sourceMarker,
    targetMarker,
    targetGuarded: targetMarker !== null && markerTag(targetMarker.migratedTo) === 'pending',
  };
}

/** Whether a worker's heartbeat says it runs the migrating store. */
export function isMigratingWorker(worker: Pick<WorkerRecord, 'metadata'>): boolean {
  return worker.metadata[MIGRATING_WORKER_METADATA.store] === 'migrating';
}

/** The workers either registry lists as running the migrating store. */
export async function migratingWorkerIds(from: LeaseStore, to: LeaseStore): Promise<Set<string>> {
  const workers = [...(await listWorkersIfPresent(from)), ...(await listWorkersIfPresent(to))];
  return new Set(workers.filter(isMigratingWorker).map((worker) => worker.workerId));
}
