import type { Lease, LeaseStore, MigrationMarker } from '@kcl/core';
import { ConfigurationError } from '@kcl/core';
import { mapConcurrently } from './map-concurrently.js';
import type {
  CheckedMigrateLeasesOptions,
  MigrateLeasesOptions,
  MigrationPlanSummary,
} from './migrate-leases-options.js';
import { checkMigrateLeasesOptions, MIGRATE_LEASES } from './migrate-leases-options.js';
import { MigrationTargetChangingError } from './migration-errors.js';
import { markerTag } from './migration-phase.js';
import type { LeaseSetComparison, PlannedLeaseCopy } from './plan-lease-copy.js';
import { compareLeaseSets, planLeaseCopy } from './plan-lease-copy.js';
import type { LeaseSourceSnapshot } from './read-lease-source.js';
import { readLeaseSource, readLeasesIfPresent, readMigrationMarker } from './read-lease-source.js';
import type { SourceActivity } from './watch-source-activity.js';
import { watchSourceActivity } from './watch-source-activity.js';

/**
 * - `planned`: a dry run.
 * - `completed`: everything copied and verified (and the source marked, unless asked not to).
 * - `refused-live`: the source's leases or workers moved during the watch.
 * - `refused-marker`: a marker says the source was migrated elsewhere, or a live migration is running.
 * - `refused-unreadable`: some source lease rows cannot be read.
 * - `declined`: `confirm` said no.
 * - `differences`: copied, but the verification found differences (target leases that moved on).
 * - `interrupted`: aborted through `signal`; running again finishes the job.
 */
export type MigrationOutcome =
  | 'planned'
  | 'completed'
  | 'refused-live'
  | 'refused-marker'
  | 'refused-unreadable'
  | 'declined'
  | 'differences'
  | 'interrupted';

export interface CopyCounts {
  readonly created: number;
  readonly updated: number;
  readonly overwritten: number;
  readonly unchanged: number;
  readonly targetAhead: number;
}

export interface MigrationReport {
  readonly outcome: MigrationOutcome;
  /** Why a refusal happened, or notes worth showing, one sentence each. */
  readonly notes: readonly string[];
  readonly source: LeaseSourceSnapshot & {
    readonly description: string;
    readonly marker: MigrationMarker | null;
    /** Leases selected for the copy (all of them unless `select` was given). */
    readonly selected: number;
    /** How many of the selected leases each owner held (owners are cleared on the target). */
    readonly owners: Readonly<Record<string, number>>;
  };
  readonly target: {
    readonly description: string;
    readonly marker: MigrationMarker | null;
    /** Target leases (selected ones) before the copy. */
    readonly leasesBefore: number;
    /** True when the target's tables did not exist (a copy creates them). */
    readonly schemaMissing: boolean;
  };
  readonly plan: readonly PlannedLeaseCopy[];
  readonly summary: MigrationPlanSummary;
  readonly activity: SourceActivity | null;
  readonly counts: CopyCounts;
  readonly verification: LeaseSetComparison | null;
  readonly marked: boolean;
  readonly clearedTargetMarker: boolean;
  /** Monotonic milliseconds spent writing the target. */
  readonly copyMs: number;
}

/**
 * The offline migration: watches the source until it is sure no fleet is using it, copies every lease
 * exactly (checkpoint, sub-sequence, pending checkpoint, parents, children, hash range, stream; owners
 * and hand-offs cleared, counters one above the source's), verifies the target lease by lease, then
 * marks the source so a worker still pointed at it stops with `ApplicationMigratedError` naming the
 * target. Running it again after an interruption finishes the job; a target lease that moved on since
 * it was copied is kept unless `force` is given.
 */
export async function migrateLeases(given: MigrateLeasesOptions): Promise<MigrationReport> {
  const options = checkMigrateLeasesOptions(given);
  const { from, to, clock } = options;
  const force = options.force === true;
  const mark = options.mark !== false;
  const notes: string[] = [];
  let counts: CopyCounts = { created: 0, updated: 0, overwritten: 0, unchanged: 0, targetAhead: 0 };

  const [sourceMarker, targetMarker] = await Promise.all([
    readMigrationMarker(from),
    readMigrationMarker(to),
  ]);
  const markerProblems = checkMarkers(sourceMarker, targetMarker, to.description);

  let activity: SourceActivity | null = null;
  const refuseEarly = markerProblems.length > 0 && !force && options.dryRun !== true;
  if (!refuseEarly && options.dryRun !== true && !force) {
    activity = await watchSourceActivity({
      store: from,
      watchMs: options.watchMs,
      clock,
      ...(options.signal === undefined ? {} : { signal: options.signal }),
      onTick: (elapsed, total) => options.onProgress?.({ stage: 'watching', done: elapsed, total }),
    });
  }

  const snapshot = await readLeaseSource(from);
  const selected = options.select === undefined ? snapshot.leases : snapshot.leases.filter(options.select);
  if (mark && selected.length < snapshot.leases.length) {
    throw new ConfigurationError(MIGRATE_LEASES, [
      `the selection holds ${selected.length} of the source's ${snapshot.leases.length} leases; marking the source would stop the workers of the others: pass mark: false (--no-mark)`,
    ]);
  }
  const targetRead = await readLeasesIfPresent(to);
  const targets = options.select === undefined ? targetRead.leases : targetRead.leases.filter(options.select);
  const plan = planLeaseCopy(selected, targets, { force });
  const summary = summarize(plan);
  const owners: Record<string, number> = {};
  for (const lease of selected) {
    if (lease.owner !== null) owners[lease.owner] = (owners[lease.owner] ?? 0) + 1;
  }
  const report = (outcome: MigrationOutcome, rest: Partial<MigrationReport> = {}): MigrationReport => ({
    outcome,
    notes,
    source: {
      ...snapshot,
      description: from.description,
      marker: sourceMarker,
      selected: selected.length,
      owners,
    },
    target: {
      description: to.description,
      marker: targetMarker,
      leasesBefore: targets.length,
      schemaMissing: targetRead.schemaMissing,
    },
    plan,
    summary,
    activity,
    counts,
    verification: null,
    marked: false,
    clearedTargetMarker: false,
    copyMs: 0,
    ...rest,
  });

  if (markerProblems.length > 0) {
    notes.push(...markerProblems);
    if (!force && options.dryRun !== true) return report('refused-marker');
  }
  if (snapshot.unreadableRows.length > 0) {
    notes.push(
      `${snapshot.unreadableRows.length} source lease rows cannot be read (${snapshot.unreadableRows
        .slice(0, 3)
        .map((row) => `${row.leaseKey}: ${row.problem}`)
        .join('; ')}); fix or delete them${force ? '' : ', or pass --force to leave them behind'}`,
    );
    if (!force && options.dryRun !== true) return report('refused-unreadable');
  }
  if (activity !== null) {
    const watched = new Map(activity.leases.map((lease) => [lease.leaseKey, lease.leaseCounter]));
    const movedSince = snapshot.leases.some((lease) => watched.get(lease.leaseKey) !== lease.leaseCounter);
    if (activity.live || movedSince || watched.size !== snapshot.leases.length) {
      notes.push(liveNote(activity));
      return report('refused-live');
    }
  }
  if (options.dryRun === true) return report('planned');
  if (options.confirm !== undefined && !(await options.confirm(summary))) return report('declined');

  await to.admin.ensureSchema();
  const started = clock.monotonicNow();
  counts = await executePlan(plan, to, options);
  const copyMs = clock.monotonicNow() - started;
  if (options.signal?.aborted === true) return report('interrupted', { copyMs });

  const after = await to.leases.list();
  const verification = compareLeaseSets(
    selected,
    options.select === undefined ? after : after.filter(options.select),
  );
  if (verification.differences.length > 0) {
    const ahead = verification.differences.filter((difference) => difference.targetAhead).length;
    notes.push(
      `${verification.differences.length} leases differ after the copy${ahead > 0 ? ` (${ahead} target leases moved on since they were copied; --force overwrites them with the source's state)` : ''}; the source was not marked`,
    );
    return report('differences', { verification, copyMs });
  }

  let clearedTargetMarker = false;
  if (targetMarker !== null) {
    await to.admin.setMigrationMarker(null);
    clearedTargetMarker = true;
    notes.push(`cleared the target's old marker (${targetMarker.migratedTo})`);
  }
  if (mark) {
    // A DynamoDB source written by the Java KCL has no worker registry table yet; the marker lives there.
    await from.admin.ensureSchema();
    await from.admin.setMigrationMarker({
      migratedTo: options.migratedTo ?? to.description,
      migratedAt: new Date(clock.now()),
    });
  }
  return report('completed', { verification, marked: mark, clearedTargetMarker, copyMs });
}

/** Compares both sides lease by lease without writing anything (`kcl-migrate --verify`). */
export async function verifyLeaseCopy(options: {
  readonly from: LeaseStore;
  readonly to: LeaseStore;
  readonly select?: (lease: Lease) => boolean;
}): Promise<{ readonly source: LeaseSourceSnapshot; readonly comparison: LeaseSetComparison }> {
  const source = await readLeaseSource(options.from);
  const target = await readLeasesIfPresent(options.to);
  const select = options.select ?? (() => true);
  return {
    source,
    comparison: compareLeaseSets(source.leases.filter(select), target.leases.filter(select)),
  };
}

function checkMarkers(
  sourceMarker: MigrationMarker | null,
  targetMarker: MigrationMarker | null,
  targetDescription: string,
): string[] {
  const problems: string[] = [];
  if (sourceMarker !== null) {
    const tag = markerTag(sourceMarker.migratedTo);
    if (tag !== null) {
      problems.push(
        `a live migration runs from the source (${sourceMarker.migratedTo}); use \`kcl-migrate status\` and \`kcl-migrate cutover\``,
      );
    } else if (!sourceMarker.migratedTo.startsWith(targetDescription)) {
      problems.push(
        `the source was already migrated to ${sourceMarker.migratedTo} on ${sourceMarker.migratedAt.toISOString()}; its leases may be stale`,
      );
    }
  }
  if (targetMarker !== null && markerTag(targetMarker.migratedTo) !== null) {
    problems.push(
      `a live migration into the target is in progress (${targetMarker.migratedTo}); finish it with \`kcl-migrate cutover\` or abandon it with \`kcl-migrate abort\``,
    );
  }
  return problems;
}

function liveNote(activity: SourceActivity): string {
  const holders = Object.entries(activity.leasesByOwner)
    .map(
      ([owner, keys]) =>
        `${owner} holds ${keys.slice(0, 4).join(', ')}${keys.length > 4 ? ` and ${keys.length - 4} more` : ''}`,
    )
    .join('; ');
  const workers = activity.liveWorkers.map((worker) => worker.workerId).join(', ');
  return [
    `the source is in use: within ${Math.round(activity.watchedMs)} ms`,
    activity.changedLeases.length > 0
      ? ` ${activity.changedLeases.length} lease counters moved (${holders})`
      : '',
    activity.changedLeases.length > 0 && workers.length > 0 ? ' and' : '',
    workers.length > 0 ? ` workers ${workers} heartbeat` : '',
    activity.changedLeases.length === 0 && workers.length === 0 ? ' leases were added or removed' : '',
    '; stop the fleet (or use a live migration) and run again, or pass --force',
  ].join('');
}

function summarize(plan: readonly PlannedLeaseCopy[]): MigrationPlanSummary {
  const count = (action: PlannedLeaseCopy['action']) =>
    plan.filter((entry) => entry.action === action).length;
  return {
    leases: plan.length,
    create: count('create'),
    update: count('update'),
    overwrite: count('overwrite'),
    unchanged: count('unchanged'),
    targetAhead: count('target-ahead'),
    ownedLeases: plan.filter((entry) => entry.source.owner !== null).length,
    handoffs: plan.filter((entry) => entry.source.handoff !== null).length,
  };
}

async function executePlan(
  plan: readonly PlannedLeaseCopy[],
  to: LeaseStore,
  options: CheckedMigrateLeasesOptions,
): Promise<CopyCounts> {
  const counts = { created: 0, updated: 0, overwritten: 0, unchanged: 0, targetAhead: 0 };
  let done = 0;
  const tally = (action: PlannedLeaseCopy['action']): void => {
    if (action === 'create') counts.created += 1;
    else if (action === 'update') counts.updated += 1;
    else if (action === 'overwrite') counts.overwritten += 1;
    else if (action === 'unchanged') counts.unchanged += 1;
    else counts.targetAhead += 1;
  };
  await mapConcurrently(
    plan,
    options.concurrency,
    async (entry) => {
      tally(await applyPlanned(entry, to, options.force === true));
      done += 1;
      options.onProgress?.({ stage: 'copying', done, total: plan.length });
    },
    options.signal,
  );
  return counts;
}

/** Applies one planned copy; if the target changed since planning, plans that lease again. */
async function applyPlanned(
  entry: PlannedLeaseCopy,
  to: LeaseStore,
  force: boolean,
  attemptsLeft = 3,
): Promise<PlannedLeaseCopy['action']> {
  const again = async (): Promise<PlannedLeaseCopy['action']> => {
    if (attemptsLeft <= 1) throw new MigrationTargetChangingError(to.description, entry.leaseKey);
    const current = await to.leases.get(entry.leaseKey);
    const [next] = planLeaseCopy([entry.source], current === null ? [] : [current], { force });
    return applyPlanned(next as PlannedLeaseCopy, to, force, attemptsLeft - 1);
  };
  switch (entry.action) {
    case 'unchanged':
    case 'target-ahead':
      return entry.action;
    case 'create': {
      const created = await to.leases.create(entry.copy);
      return created.ok ? 'create' : again();
    }
    case 'update':
    case 'overwrite': {
      const current = await to.leases.get(entry.leaseKey);
      if (current === null || current.leaseCounter !== entry.target?.leaseCounter) return again();
      await to.leases.delete(entry.leaseKey);
      const created = await to.leases.create(entry.copy);
      return created.ok ? entry.action : again();
    }
  }
}
