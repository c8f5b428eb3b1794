import type { Clock, LeaseStore, MigrationMarker, WorkerRecord } from '@kcl/core';
import { compareLeaseKeys, KclError, systemClock } from '@kcl/core';
import { mapConcurrently } from './map-concurrently.js';
import type { LiveMigrationPhase, MarkerTag } from './migration-phase.js';
import {
  isSealedLease,
  MIGRATING_WORKER_METADATA,
  markerTag,
  pendingMarkerText,
  phaseMarkerText,
  readSourceMarker,
  SEAL_OWNER,
} from './migration-phase.js';
import type { TakenSeal } from './move-lease.js';
import { judgeTargetRow, moveLease } from './move-lease.js';
import { PACKAGE_NAME } from './package-name.js';
import { readLeasesIfPresent, readMigrationMarker } from './read-lease-source.js';
import type { SourceActivity } from './watch-source-activity.js';
import { listWorkersIfPresent, watchSourceActivity } from './watch-source-activity.js';

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

/** A refusal: the stores are not in a state where the step is safe. Names what to do. */
export class LiveMigrationRefusedError extends KclError {
  readonly problems: readonly string[];

  constructor(step: string, problems: readonly string[]) {
    super(
      'CONFIGURATION',
      `${PACKAGE_NAME}: ${step} refused:\n${problems.map((problem) => `  - ${problem}`).join('\n')}`,
    );
    this.problems = [...problems];
  }
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

// ── cut-over ─────────────────────────────────────────────────────────────────────────────────────

export interface CutOverOptions extends LiveMigrationOptions {
  /**
   * How long to watch the registries and leases before starting, so workers that do not run the
   * migrating store are found (default 45,001 ms, the consumer's default lease expiry).
   */
  readonly watchMs?: number;
  /** The workers' `phaseRefreshMs` (default 5,000); a larger value advertised in a heartbeat wins. */
  readonly phaseRefreshMs?: number;
  /** Added to every wait for a phase to reach all workers: covers calls still in flight (default 2,000 ms). */
  readonly settleMarginMs?: number;
  /** Start even when the preflight finds workers that do not run the migrating store. */
  readonly force?: boolean;
  /** Passes over the unmoved leases before giving up (default 20). */
  readonly maxPasses?: number;
  readonly onStage?: (stage: CutOverStage, detail: string) => void;
}

export type CutOverStage =
  | 'preflight'
  | 'cutover-marked'
  | 'settling'
  | 'moving'
  | 'cleaning'
  | 'target-marked'
  | 'sweeping'
  | 'taken-seal'
  | 'complete';

export interface CutOverReport {
  /** The phase the cut-over started from. */
  readonly startedIn: LiveMigrationPhase;
  readonly moved: number;
  readonly alreadyMoved: number;
  /** Stale target rows (no source lease) that were removed. */
  readonly removedStaleCopies: number;
  readonly passes: number;
  readonly preflight: PreflightReport | null;
  /**
   * Leases that were moved and whose sealed source row a worker without the migrating store took
   * since (a Java worker, or a plain kcl worker): their target rows are kept and they are not moved
   * again. The workers named in them must be stopped: they process those shards from stale state.
   */
  readonly takenSeals: readonly TakenSeal[];
}

export interface PreflightReport {
  readonly problems: readonly string[];
  readonly migratingWorkers: readonly string[];
  readonly activity: SourceActivity;
}

function isMigratingWorker(worker: Pick<WorkerRecord, 'metadata'>): boolean {
  return worker.metadata[MIGRATING_WORKER_METADATA.store] === 'migrating';
}

/** The workers either registry lists as running the migrating store. */
async function migratingWorkerIds(from: LeaseStore, to: LeaseStore): Promise<Set<string>> {
  const workers = [...(await listWorkersIfPresent(from)), ...(await listWorkersIfPresent(to))];
  return new Set(workers.filter(isMigratingWorker).map((worker) => worker.workerId));
}

/**
 * Finds workers that would not follow the migration: workers heartbeating in either registry without
 * the migrating store, and source leases written by owners that are not migrating workers (a Java or
 * plain kcl worker, which would keep using sealed source rows).
 */
export async function preflightCutOver(
  options: CutOverOptions & { readonly watchMs: number },
): Promise<PreflightReport> {
  const clock = options.clock ?? systemClock;
  const watch = (store: LeaseStore) =>
    watchSourceActivity({
      store,
      watchMs: options.watchMs,
      clock,
      stopEarly: false,
      ...(options.signal === undefined ? {} : { signal: options.signal }),
      onTick: (elapsed, total) =>
        options.onProgress?.({ stage: 'watching', done: Math.round(elapsed), total: Math.round(total) }),
    });
  const [source, target] = await Promise.all([watch(options.from), watch(options.to)]);
  const problems: string[] = [];
  const migrating = new Set<string>();
  for (const worker of [...source.workers, ...target.workers]) {
    if (isMigratingWorker(worker)) migrating.add(worker.workerId);
  }
  for (const worker of source.liveWorkers) {
    if (!isMigratingWorker(worker)) {
      problems.push(
        `worker ${JSON.stringify(worker.workerId)} heartbeats on the source without the migrating store; redeploy it with createMigratingLeaseStore (or stop it)`,
      );
    }
  }
  for (const worker of target.liveWorkers) {
    if (!isMigratingWorker(worker)) {
      problems.push(
        `worker ${JSON.stringify(worker.workerId)} runs on the plain target store; stop it until the cut-over is complete`,
      );
    }
  }
  for (const change of source.changedLeases) {
    const owner = change.owner;
    if (owner === null || owner === SEAL_OWNER || migrating.has(owner)) continue;
    problems.push(
      `source lease ${JSON.stringify(change.leaseKey)} is being written by ${JSON.stringify(owner)}, which does not heartbeat as a migrating worker (a Java KCL or plain worker?)`,
    );
  }
  return { problems, migratingWorkers: [...migrating].sort(compareLeaseKeys), activity: source };
}

/** The longest phase refresh any migrating worker advertises, and at least `minimum`. */
async function longestPhaseRefresh(from: LeaseStore, to: LeaseStore, minimum: number): Promise<number> {
  const workers = [...(await listWorkersIfPresent(from)), ...(await listWorkersIfPresent(to))];
  let longest = minimum;
  for (const worker of workers) {
    const advertised = Number(worker.metadata[MIGRATING_WORKER_METADATA.phaseRefreshMs]);
    if (isMigratingWorker(worker) && Number.isSafeInteger(advertised))
      longest = Math.max(longest, advertised);
  }
  return longest;
}

/**
 * Cuts the fleet over to the target, step by step, and resumes from wherever an earlier run stopped:
 *
 * 1. preflight (from `mirroring` only): every live worker must run the migrating store;
 * 2. the source's marker says `cutover` (plain workers still on the source stop); wait for every
 *    migrating worker to have read it;
 * 3. move every lease (copy exactly, then seal the source row), pass after pass, until none is left;
 *    remove target rows that have no source lease (stale copies);
 * 4. the source's marker says `target`; wait again, then move any lease a worker created in the
 *    source before it saw the new phase;
 * 5. the source's marker says `complete` and the target's guard marker goes: the source is no longer
 *    used, and plain target workers may start.
 *
 * Every step is idempotent and a run starts from the phase the source's marker records, so a run
 * killed between any two writes is finished by running it again: a run that finds `cutover` waits for
 * the workers again before moving anything, and one that finds `complete` with the guard still in
 * place lifts it.
 */
export async function cutOverLiveMigration(options: CutOverOptions): Promise<CutOverReport> {
  const { from, to } = options;
  const clock = options.clock ?? systemClock;
  const stage = options.onStage ?? (() => undefined);
  const state = await readLiveMigrationState(from, to);
  if (state.phase === 'foreign') {
    throw new LiveMigrationRefusedError('the cut-over', [
      `the source is marked as migrated to ${state.sourceMarker?.migratedTo}, not to this target`,
    ]);
  }
  const startedIn = state.phase;
  const targetName = options.targetName ?? to.description;
  const margin = options.settleMarginMs ?? 2_000;
  const signal = options.signal;
  const counts = { moved: 0, alreadyMoved: 0, removedStaleCopies: 0, passes: 0 };
  let preflight: PreflightReport | null = null;

  const settle = async (why: string): Promise<void> => {
    const waitMs = (await longestPhaseRefresh(from, to, options.phaseRefreshMs ?? 5_000)) + margin;
    stage('settling', `waiting ${waitMs} ms ${why}`);
    const started = clock.monotonicNow();
    for (;;) {
      const elapsed = clock.monotonicNow() - started;
      options.onProgress?.({ stage: 'settling', done: Math.min(elapsed, waitMs), total: waitMs });
      if (elapsed >= waitMs || signal?.aborted === true) break;
      await clock.sleep(Math.min(250, waitMs - elapsed), signal);
    }
    throwIfAborted(signal);
  };

  const setSourcePhase = (phase: 'cutover' | 'target' | 'complete') =>
    from.setMigrationMarker({
      migratedTo: phaseMarkerText(targetName, phase),
      migratedAt: new Date(clock.now()),
    });

  /** Keeps plain target workers off the target until the migration is complete (idempotent). */
  const guardTarget = async (): Promise<void> => {
    if ((await readLiveMigrationState(from, to)).targetGuarded) return;
    await to.ensureSchema();
    await to.setMigrationMarker({
      migratedTo: pendingMarkerText(options.sourceName ?? from.description),
      migratedAt: new Date(clock.now()),
    });
  };

  const movedThisRun = new Set<string>();
  const takenSeals = new Map<string, TakenSeal>();
  const movePasses = async (which: 'moving' | 'sweeping'): Promise<void> => {
    const maxPasses = options.maxPasses ?? 20;
    for (let pass = 1; ; pass++) {
      throwIfAborted(signal);
      const pending = (await from.listLeases()).filter(
        (row) => !isSealedLease(row) && !takenSeals.has(row.leaseKey),
      );
      if (pending.length === 0) return;
      if (pass > maxPasses) {
        throw new LiveMigrationRefusedError('the cut-over', [
          `${pending.length} leases kept changing through ${maxPasses} passes (${pending
            .slice(0, 5)
            .map((row) => row.leaseKey)
            .join(', ')}); run \`kcl-migrate cutover\` again to continue`,
        ]);
      }
      counts.passes += 1;
      stage(which, `pass ${pass}: ${pending.length} leases to move`);
      const migratingWorkers = await migratingWorkerIds(from, to);
      let done = 0;
      await mapConcurrently(
        pending,
        options.concurrency ?? 16,
        async (row) => {
          const outcome = await moveLease(from, to, row.leaseKey, {
            clock,
            migratingWorkers,
            movedBefore: movedThisRun.has(row.leaseKey),
            onTakenSeal: (taken) => {
              takenSeals.set(taken.leaseKey, taken);
              stage(
                'taken-seal',
                `lease ${JSON.stringify(taken.leaseKey)} was moved, and its sealed source row was taken since by ${JSON.stringify(taken.sourceOwner)} (source counter ${taken.sourceCounter}, target counter ${taken.targetCounter}: ${taken.reason}); its target row is kept. Stop that worker: it does not run the migrating store and processes the shard from stale state`,
              );
            },
            ...(signal ? { signal } : {}),
          });
          if (outcome === 'moved') {
            counts.moved += 1;
            movedThisRun.add(row.leaseKey);
          } else if (outcome === 'already-moved') counts.alreadyMoved += 1;
          done += 1;
          options.onProgress?.({ stage: which, done, total: pending.length });
        },
        signal,
      );
    }
  };

  if (startedIn === 'mirroring') {
    const watchMs = options.watchMs ?? 45_001;
    stage(
      'preflight',
      `watching both stores for ${watchMs} ms for workers that do not run the migrating store`,
    );
    preflight = await preflightCutOver({ ...options, watchMs });
    throwIfAborted(signal);
    if (preflight.problems.length > 0 && options.force !== true) {
      throw new LiveMigrationRefusedError('the cut-over', [
        ...preflight.problems,
        'nothing was changed; fix the above and run `kcl-migrate cutover` again (--force skips this check)',
      ]);
    }
    await guardTarget();
    await setSourcePhase('cutover');
    stage('cutover-marked', 'the source marker now says cutover');
    await settle('for every worker to read the cutover phase');
  } else if (startedIn === 'cutover') {
    // An earlier run may have died right after marking the phase, before any worker read it: wait
    // again, so no worker still in the mirroring phase repairs a copy while it is being moved.
    await guardTarget();
    await settle('for every worker to read the cutover phase');
  }
  if (startedIn === 'mirroring' || startedIn === 'cutover') {
    await movePasses('moving');
    const sourceKeys = new Set((await from.listLeases()).map((row) => row.leaseKey));
    for (const copy of (await readLeasesIfPresent(to)).leases) {
      if (!sourceKeys.has(copy.leaseKey)) {
        await to.deleteLease(copy.leaseKey);
        counts.removedStaleCopies += 1;
      }
    }
    stage('cleaning', `removed ${counts.removedStaleCopies} stale target copies`);
    await setSourcePhase('target');
    stage('target-marked', 'every lease lives in the target; new leases are created there');
  }
  if (startedIn === 'target') await guardTarget();
  if (startedIn !== 'complete') {
    await settle('for every worker to read the target phase');
    await movePasses('sweeping');
    await setSourcePhase('complete');
  }
  // Only now may plain target workers start: no worker creates leases in the source any more. Also
  // when an earlier run died between marking the migration complete and this step.
  if ((await readLiveMigrationState(from, to)).targetGuarded) await to.setMigrationMarker(null);
  stage('complete', 'every lease lives in the target; the source is no longer used');
  return { startedIn, ...counts, preflight, takenSeals: [...takenSeals.values()] };
}

// ── status and abort ─────────────────────────────────────────────────────────────────────────────

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
  const step = nextStep(state, unmovedLeases, copiesBehind + copiesMissing);
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

/**
 * Abandons a live migration that has not been cut over: clears the target's guard marker. The
 * target's copies stay (an offline copy or a later live migration replaces them); workers still run
 * the migrating store until redeployed, which is harmless while the source is authoritative.
 */
export async function abortLiveMigration(options: LiveMigrationOptions): Promise<void> {
  const state = await readLiveMigrationState(options.from, options.to);
  if (state.phase !== 'mirroring') {
    throw new LiveMigrationRefusedError('aborting the live migration', [
      state.phase === 'foreign'
        ? `the source is marked as migrated to ${state.sourceMarker?.migratedTo}, not to this target; there is no live migration to abort`
        : `the migration is in phase ${state.phase}: leases have been moved, so the source is no longer authoritative; run \`kcl-migrate cutover\` again to finish it (and migrate back if needed)`,
    ]);
  }
  if (state.targetGuarded) await options.to.setMigrationMarker(null);
}

function throwIfAborted(signal: AbortSignal | undefined): void {
  if (signal?.aborted === true) {
    throw new KclError('SHUTDOWN', `${PACKAGE_NAME}: interrupted; run the same command again to continue`);
  }
}
