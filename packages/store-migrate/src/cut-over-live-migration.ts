import type { Clock, Lease, LeaseStore } from '@kcl/core';
import { compareLeaseKeys, systemClock } from '@kcl/core';
import type { LiveMigrationOptions } from './live-migration.js';
import { isMigratingWorker, migratingWorkerIds, readLiveMigrationState } from './live-migration.js';
import { mapConcurrently } from './map-concurrently.js';
import { LiveMigrationRefusedError, MigrationInterruptedError } from './migration-errors.js';
import type { LiveMigrationPhase } from './migration-phase.js';
import {
  isSealedLease,
  MIGRATING_WORKER_METADATA,
  pendingMarkerText,
  phaseMarkerText,
  SEAL_OWNER,
} from './migration-phase.js';
import type { TakenSeal } from './move-lease.js';
import { moveLease } from './move-lease.js';
import type { UnreadableLeaseRow } from './read-lease-source.js';
import { readLeasesIfPresent } from './read-lease-source.js';
import type { SourceActivity } from './watch-source-activity.js';
import { listWorkersIfPresent, watchSourceActivity } from './watch-source-activity.js';

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
  const state = await readLiveMigrationState(options.from, options.to);
  if (state.phase === 'foreign') {
    throw new LiveMigrationRefusedError('the cut-over', [
      `the source is marked as migrated to ${state.sourceMarker?.migratedTo}, not to this target`,
    ]);
  }
  return new CutOver(options).run(state.phase);
}

/** One run of the cut-over: the steps above, and what the run counted and found on the way. */
class CutOver {
  readonly #options: CutOverOptions;
  readonly #from: LeaseStore;
  readonly #to: LeaseStore;
  readonly #clock: Clock;
  readonly #signal: AbortSignal | undefined;
  readonly #counts = { moved: 0, alreadyMoved: 0, removedStaleCopies: 0, passes: 0 };
  /** Leases this run moved: a later pass that finds one unsealed tells a moved lease from a new one. */
  readonly #movedThisRun = new Set<string>();
  readonly #takenSeals = new Map<string, TakenSeal>();

  constructor(options: CutOverOptions) {
    this.#options = options;
    this.#from = options.from;
    this.#to = options.to;
    this.#clock = options.clock ?? systemClock;
    this.#signal = options.signal;
  }

  async run(startedIn: LiveMigrationPhase): Promise<CutOverReport> {
    let preflight: PreflightReport | null = null;
    // Refuse before changing anything: a row that cannot be read would stop the moves half-way.
    if (startedIn !== 'complete') await sourceRowsForCutOver(this.#from);
    if (startedIn === 'mirroring') {
      preflight = await this.#preflight();
      await this.#guardTarget();
      await this.#setSourcePhase('cutover');
      this.#stage('cutover-marked', 'the source marker now says cutover');
      await this.#settle('for every worker to read the cutover phase');
    } else if (startedIn === 'cutover') {
      // An earlier run may have died right after marking the phase, before any worker read it: wait
      // again, so no worker still in the mirroring phase repairs a copy while it is being moved.
      await this.#guardTarget();
      await this.#settle('for every worker to read the cutover phase');
    }
    if (startedIn === 'mirroring' || startedIn === 'cutover') {
      await this.#movePasses('moving');
      await this.#removeStaleCopies();
      await this.#setSourcePhase('target');
      this.#stage('target-marked', 'every lease lives in the target; new leases are created there');
    }
    if (startedIn === 'target') await this.#guardTarget();
    if (startedIn !== 'complete') {
      await this.#settle('for every worker to read the target phase');
      await this.#movePasses('sweeping');
      await this.#setSourcePhase('complete');
    }
    // Only now may plain target workers start: no worker creates leases in the source any more. Also
    // when an earlier run died between marking the migration complete and this step.
    if ((await readLiveMigrationState(this.#from, this.#to)).targetGuarded) {
      await this.#to.admin.setMigrationMarker(null);
    }
    this.#stage('complete', 'every lease lives in the target; the source is no longer used');
    return { startedIn, ...this.#counts, preflight, takenSeals: [...this.#takenSeals.values()] };
  }

  #stage(stage: CutOverStage, detail: string): void {
    this.#options.onStage?.(stage, detail);
  }

  /** Watches both stores for workers that would not follow; refuses unless `force` says otherwise. */
  async #preflight(): Promise<PreflightReport> {
    const watchMs = this.#options.watchMs ?? 45_001;
    this.#stage(
      'preflight',
      `watching both stores for ${watchMs} ms for workers that do not run the migrating store`,
    );
    const preflight = await preflightCutOver({ ...this.#options, watchMs });
    throwIfAborted(this.#signal);
    if (preflight.problems.length > 0 && this.#options.force !== true) {
      throw new LiveMigrationRefusedError('the cut-over', [
        ...preflight.problems,
        'nothing was changed; fix the above and run `kcl-migrate cutover` again (--force skips this check)',
      ]);
    }
    return preflight;
  }

  /** Waits until every migrating worker has read the phase just written (its longest refresh, and a margin). */
  async #settle(why: string): Promise<void> {
    const margin = this.#options.settleMarginMs ?? 2_000;
    const waitMs =
      (await longestPhaseRefresh(this.#from, this.#to, this.#options.phaseRefreshMs ?? 5_000)) + margin;
    this.#stage('settling', `waiting ${waitMs} ms ${why}`);
    const started = this.#clock.monotonicNow();
    for (;;) {
      const elapsed = this.#clock.monotonicNow() - started;
      this.#options.onProgress?.({ stage: 'settling', done: Math.min(elapsed, waitMs), total: waitMs });
      if (elapsed >= waitMs || this.#signal?.aborted === true) break;
      await this.#clock.sleep(Math.min(250, waitMs - elapsed), this.#signal);
    }
    throwIfAborted(this.#signal);
  }

  #setSourcePhase(phase: 'cutover' | 'target' | 'complete'): Promise<void> {
    return this.#from.admin.setMigrationMarker({
      migratedTo: phaseMarkerText(this.#options.targetName ?? this.#to.description, phase),
      migratedAt: new Date(this.#clock.now()),
    });
  }

  /** Keeps plain target workers off the target until the migration is complete (idempotent). */
  async #guardTarget(): Promise<void> {
    if ((await readLiveMigrationState(this.#from, this.#to)).targetGuarded) return;
    await this.#to.admin.ensureSchema();
    await this.#to.admin.setMigrationMarker({
      migratedTo: pendingMarkerText(this.#options.sourceName ?? this.#from.description),
      migratedAt: new Date(this.#clock.now()),
    });
  }

  /** Moves the unmoved source leases, pass after pass, until none is left or `maxPasses` is reached. */
  async #movePasses(which: 'moving' | 'sweeping'): Promise<void> {
    const maxPasses = this.#options.maxPasses ?? 20;
    for (let pass = 1; ; pass++) {
      throwIfAborted(this.#signal);
      const pending = (await sourceRowsForCutOver(this.#from)).filter(
        (row) => !isSealedLease(row) && !this.#takenSeals.has(row.leaseKey),
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
      this.#counts.passes += 1;
      this.#stage(which, `pass ${pass}: ${pending.length} leases to move`);
      const migratingWorkers = await migratingWorkerIds(this.#from, this.#to);
      let done = 0;
      await mapConcurrently(
        pending,
        this.#options.concurrency ?? 16,
        async (row) => {
          await this.#move(row.leaseKey, migratingWorkers);
          done += 1;
          this.#options.onProgress?.({ stage: which, done, total: pending.length });
        },
        this.#signal,
      );
    }
  }

  /** Moves one lease (copy exactly, then seal the source row) and counts what happened. */
  async #move(leaseKey: string, migratingWorkers: ReadonlySet<string>): Promise<void> {
    const outcome = await moveLease(this.#from, this.#to, leaseKey, {
      clock: this.#clock,
      migratingWorkers,
      movedBefore: this.#movedThisRun.has(leaseKey),
      onTakenSeal: (taken) => {
        this.#takenSeals.set(taken.leaseKey, taken);
        this.#stage(
          'taken-seal',
          `lease ${JSON.stringify(taken.leaseKey)} was moved, and its sealed source row was taken since by ${JSON.stringify(taken.sourceOwner)} (source counter ${taken.sourceCounter}, target counter ${taken.targetCounter}: ${taken.reason}); its target row is kept. Stop that worker: it does not run the migrating store and processes the shard from stale state`,
        );
      },
      ...(this.#signal ? { signal: this.#signal } : {}),
    });
    if (outcome === 'moved') {
      this.#counts.moved += 1;
      this.#movedThisRun.add(leaseKey);
    } else if (outcome === 'already-moved') {
      this.#counts.alreadyMoved += 1;
    }
  }

  /** Deletes target rows whose lease the source does not have (left from an earlier, abandoned run). */
  async #removeStaleCopies(): Promise<void> {
    const sourceKeys = new Set((await sourceRowsForCutOver(this.#from)).map((row) => row.leaseKey));
    for (const copy of (await readLeasesIfPresent(this.#to)).leases) {
      if (!sourceKeys.has(copy.leaseKey)) {
        await this.#to.leases.delete(copy.leaseKey);
        this.#counts.removedStaleCopies += 1;
      }
    }
    this.#stage('cleaning', `removed ${this.#counts.removedStaleCopies} stale target copies`);
  }
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

function throwIfAborted(signal: AbortSignal | undefined): void {
  if (signal?.aborted === true) throw new MigrationInterruptedError();
}

/**
 * The source's lease rows for the cut-over, unreadable ones included: `leases.list()` skips a row it
 * cannot read, and a cut-over that did not see one would neither move that lease nor keep its target
 * copy (it would look stale), so the lease would be gone once the source is left behind. Such rows
 * stop the cut-over until an operator fixes or deletes them.
 */
async function sourceRowsForCutOver(from: LeaseStore): Promise<Lease[]> {
  const scan = await from.admin.scan();
  if (scan.unreadable.length > 0) throw unreadableRowsRefusal(scan.unreadable);
  return [...scan.leases];
}

function unreadableRowsRefusal(rows: readonly UnreadableLeaseRow[]): LiveMigrationRefusedError {
  return new LiveMigrationRefusedError('the cut-over', [
    `${rows.length} source lease rows cannot be read (${rows
      .slice(0, 3)
      .map((row) => `${JSON.stringify(row.leaseKey)}: ${row.problem}`)
      .join(
        '; ',
      )}${rows.length > 3 ? '; …' : ''}); a lease that cannot be read cannot be moved: fix or delete those rows in the source, then run \`kcl-migrate cutover\` again`,
  ]);
}
