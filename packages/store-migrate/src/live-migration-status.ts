import type { LeaseStore } from '@kcl/core';
import { compareLeaseKeys } from '@kcl/core';
import type { LiveMigrationOptions, LiveMigrationState } from './live-migration.js';
import { isMigratingWorker, migratingWorkerIds, readLiveMigrationState } from './live-migration.js';
import type { MarkerTag } from './migration-phase.js';
import { isSealedLease, MIGRATING_WORKER_METADATA, markerTag } from './migration-phase.js';
import type { TakenSeal } from './move-lease.js';
import { judgeTargetRow } from './move-lease.js';
import type { UnreadableLeaseRow } from './read-lease-source.js';
import { readLeasesIfPresent } from './read-lease-source.js';
import { listWorkersIfPresent } from './watch-source-activity.js';

export interface LiveWorkerStatus {
  readonly workerId: string;
  /** Which registries list it. */
  readonly registries: readonly ('source' | 'target')[];
  readonly migrating: boolean;
  /** The phase it last reported (migrating workers only). */
  readonly phase: string | null;
  readonly heartbeat: number;
  readonly lastHeartbeatAt: Date;
}

export interface LiveMigrationStatus extends LiveMigrationState {
  readonly sourceTag: MarkerTag | null;
  readonly sourceLeases: number;
  readonly sealedLeases: number;
  readonly unmovedLeases: number;
  /** Unmoved leases whose target copy is exact (counter and owner included). */
  readonly copiesInSync: number;
  readonly copiesBehind: number;
  readonly copiesMissing: number;
  /** Target rows, including moved leases. */
  readonly targetLeases: number;
  /**
   * From the cut-over on: moved leases whose sealed source row a worker without the migrating store
   * took since (not counted as unmoved). Their target rows are the leases; those workers must stop.
   */
  readonly takenSeals: readonly TakenSeal[];
  /** Source lease rows that cannot be read: the cut-over refuses to run until they are fixed or deleted. */
  readonly unreadableSourceRows: readonly UnreadableLeaseRow[];
  readonly workers: readonly LiveWorkerStatus[];
  readonly nextStep: string;
}

/** Where a live migration stands: phase, leases moved and in sync, workers and what they run. */
export async function liveMigrationStatus(options: LiveMigrationOptions): Promise<LiveMigrationStatus> {
  const { from, to } = options;
  const state = await readLiveMigrationState(from, to);
  const source = await readLeasesIfPresent(from);
  const target = await readLeasesIfPresent(to);
  const copies = new Map(target.leases.map((lease) => [lease.leaseKey, lease]));
  let sealedLeases = 0;
  let copiesInSync = 0;
  let copiesBehind = 0;
  let copiesMissing = 0;
  const takenSeals: TakenSeal[] = [];
  // Seals exist only from the cut-over on; before, a copy that differs is simply behind.
  const sealsExist = state.phase === 'cutover' || state.phase === 'target' || state.phase === 'complete';
  const migratingWorkers = sealsExist ? await migratingWorkerIds(from, to) : new Set<string>();
  for (const row of source.leases) {
    if (isSealedLease(row)) {
      sealedLeases += 1;
      continue;
    }
    const copy = copies.get(row.leaseKey) ?? null;
    const verdict = judgeTargetRow(row, copy, migratingWorkers);
    if (sealsExist && verdict.kind === 'taken-seal') {
      takenSeals.push({
        leaseKey: row.leaseKey,
        sourceOwner: row.owner,
        sourceCounter: row.leaseCounter,
        targetOwner: copy?.owner ?? null,
        targetCounter: copy?.leaseCounter ?? -1,
        reason: verdict.reason,
      });
    } else if (verdict.kind === 'missing') copiesMissing += 1;
    else if (verdict.kind === 'exact') copiesInSync += 1;
    else copiesBehind += 1;
  }
  const workers = await workerStatuses(state, from, to);
  const unmovedLeases = source.leases.length - sealedLeases - takenSeals.length;
  const unreadable = state.phase === 'complete' || state.phase === 'foreign' ? [] : source.unreadable;
  const step =
    unreadable.length === 0
      ? nextStep(state, unmovedLeases, copiesBehind + copiesMissing)
      : `${unreadable.length} source lease rows cannot be read (${unreadable
          .slice(0, 5)
          .map((row) => row.leaseKey)
          .join(
            ', ',
          )}): fix or delete them in the source (the cut-over refuses to run while they are there). Then: ${nextStep(state, unmovedLeases, copiesBehind + copiesMissing)}`;
  return {
    ...state,
    sourceTag: state.sourceMarker === null ? null : markerTag(state.sourceMarker.migratedTo),
    sourceLeases: source.leases.length,
    sealedLeases,
    unmovedLeases,
    copiesInSync,
    copiesBehind,
    copiesMissing,
    targetLeases: target.leases.length,
    takenSeals,
    unreadableSourceRows: unreadable,
    workers,
    nextStep:
      takenSeals.length === 0
        ? step
        : `${takenSeals.length} moved leases (${takenSeals
            .slice(0, 5)
            .map((taken) => taken.leaseKey)
            .join(', ')}) were taken in the source by ${[
            ...new Set(takenSeals.map((taken) => JSON.stringify(taken.sourceOwner))),
          ].join(
            ', ',
          )}, which do not run the migrating store: stop those workers (they process those shards from stale checkpoints); the target rows are kept. Then: ${step}`,
  };
}

/**
 * The workers as the registry they write shows them. Migrating workers heartbeat in both registries
 * while the migration runs, but the secondary one only as a courtesy (it may lag or miss beats); from
 * `complete` on they write the target's only, and the source's entries are left behind, stale.
 */
async function workerStatuses(
  state: LiveMigrationState,
  from: LeaseStore,
  to: LeaseStore,
): Promise<LiveWorkerStatus[]> {
  const registries: Array<readonly ['source' | 'target', LeaseStore]> =
    state.phase === 'complete'
      ? [['target', to]]
      : state.phase === 'target'
        ? [
            ['target', to],
            ['source', from],
          ]
        : [
            ['source', from],
            ['target', to],
          ];
  const workers = new Map<string, LiveWorkerStatus>();
  for (const [registry, store] of registries) {
    for (const worker of await listWorkersIfPresent(store)) {
      const known = workers.get(worker.workerId);
      // The first registry read is the one the workers write: its entry wins.
      workers.set(worker.workerId, {
        workerId: worker.workerId,
        registries: [...(known?.registries ?? []), registry].sort(),
        migrating: known?.migrating ?? isMigratingWorker(worker),
        phase: known === undefined ? (worker.metadata[MIGRATING_WORKER_METADATA.phase] ?? null) : known.phase,
        heartbeat: known?.heartbeat ?? worker.heartbeat,
        lastHeartbeatAt: known?.lastHeartbeatAt ?? worker.lastHeartbeatAt,
      });
    }
  }
  return [...workers.values()].sort((a, b) => compareLeaseKeys(a.workerId, b.workerId));
}

function nextStep(state: LiveMigrationState, unmoved: number, outOfSync: number): string {
  switch (state.phase) {
    case 'foreign':
      return 'the source was migrated to another store; nothing to do here';
    case 'mirroring':
      if (!state.targetGuarded) return 'run `kcl-migrate --live` to guard and backfill the target';
      return outOfSync > 0
        ? `${outOfSync} target copies are behind or missing: make sure every worker runs createMigratingLeaseStore (its writes repair the copies of the leases it holds), run \`kcl-migrate --live\` again for the rest, then check \`kcl-migrate status\` again`
        : 'every target copy is in sync: once every worker shows the migrating store, run `kcl-migrate cutover`';
    case 'cutover':
      return `the cut-over was interrupted with ${unmoved} leases still to move; run \`kcl-migrate cutover\` again`;
    case 'target':
      return 'the cut-over is finishing (plain target workers must wait for complete); run `kcl-migrate cutover` again to complete it';
    case 'complete':
      return state.targetGuarded
        ? 'the cut-over stopped after marking the migration complete but before lifting the target’s guard (plain target workers stop on it); run `kcl-migrate cutover` again to finish'
        : 'complete: redeploy the workers with the plain target store at your pace; the source is no longer used';
  }
}
