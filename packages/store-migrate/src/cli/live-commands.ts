import type { TakenSeal } from '../index.js';
import {
  abortLiveMigration,
  cutOverLiveMigration,
  liveMigrationStatus,
  readLiveMigrationState,
  startLiveMigration,
} from '../index.js';
import { formatCount, formatPairs, formatSeconds, formatTable, toJson } from './cli-output.js';
import type { CommandContext } from './command-context.js';
import { askYesNo, say, warn } from './command-context.js';
import type { ExitCode } from './exit-codes.js';
import { EXIT_CODES } from './exit-codes.js';
import type { OpenedStore } from './store-connection.js';

function targetOf(context: CommandContext): OpenedStore {
  if (context.to === null) throw new Error('live migration commands need a target');
  return context.to;
}

function common(context: CommandContext) {
  const to = targetOf(context);
  return {
    from: context.from.store,
    to: to.store,
    targetName: to.name,
    sourceName: context.from.name,
    signal: context.signal,
    concurrency: context.raw.concurrency as number,
  };
}

/** `--live`: guards the target and backfills it; the fleet keeps running on the source. */
export async function runLiveStart(context: CommandContext): Promise<ExitCode> {
  const to = targetOf(context);
  const report = await startLiveMigration({
    ...common(context),
    force: context.raw.force === true,
    onProgress: (progress) => context.progress.update('backfill', progress.done, progress.total),
  });
  context.progress.finish();
  if (context.json) {
    context.io.stdout.write(`${toJson({ command: 'live', exitCode: EXIT_CODES.ok, ...report })}\n`);
    return EXIT_CODES.ok;
  }
  say(
    context,
    `kcl-migrate: live migration of ${JSON.stringify(context.applicationName)} started\n${formatPairs([
      ['from', context.from.name],
      ['to', to.name],
      ['source leases', formatCount(report.sourceLeases)],
      ['copies created', formatCount(report.created)],
      ['copies replaced', formatCount(report.replaced)],
      ['already in sync', formatCount(report.inSync)],
      [
        'changing while copied',
        `${formatCount(report.changing)} (mirroring brings them over; \`kcl-migrate status\` shows any copy still behind)`,
      ],
      ['deleted since listed', `${formatCount(report.gone)} (not copied)`],
      ...unreadableRow(report.unreadable.length),
    ])}

The target is guarded: a worker started on the plain target store stops until the cut-over.
Next:
  1. Deploy every worker with createMigratingLeaseStore({ from: <source store>, to: <target store> })
     (a rolling restart is fine; the source stays authoritative, writes are mirrored).
  2. Check with \`kcl-migrate status\` that every worker runs the migrating store and that every
     copy is in sync (a worker's writes repair the copies of its leases; run \`kcl-migrate --live\`
     again, at any moment, for leases nobody writes).
  3. Run \`kcl-migrate cutover\`.`,
  );
  return EXIT_CODES.ok;
}

/** `status`: phase, leases moved and in sync, workers and what they run. */
export async function runStatus(context: CommandContext): Promise<ExitCode> {
  const status = await liveMigrationStatus(common(context));
  if (context.json) {
    context.io.stdout.write(`${toJson({ command: 'status', exitCode: EXIT_CODES.ok, ...status })}\n`);
    return EXIT_CODES.ok;
  }
  say(
    context,
    `kcl-migrate: live migration of ${JSON.stringify(context.applicationName)}\n${formatPairs([
      ['from', context.from.name],
      ['to', targetOf(context).name],
      ['phase', status.phase],
      ['target guarded', status.targetGuarded ? 'yes (plain target workers stop)' : 'no'],
      ['source leases', formatCount(status.sourceLeases)],
      ['moved to the target', formatCount(status.sealedLeases)],
      [
        'not moved yet',
        `${formatCount(status.unmovedLeases)} (copies: ${status.copiesInSync} in sync, ${status.copiesBehind} behind, ${status.copiesMissing} missing)`,
      ],
      ['target leases', formatCount(status.targetLeases)],
      ...unreadableRow(status.unreadableSourceRows.length),
    ])}`,
  );
  if (status.workers.length > 0) {
    say(
      context,
      `\nWorkers\n${formatTable(
        ['WORKER', 'REGISTRIES', 'STORE', 'PHASE SEEN', 'HEARTBEAT', 'LAST HEARTBEAT'],
        status.workers.map((worker) => [
          worker.workerId,
          worker.registries.join('+'),
          worker.migrating ? 'migrating' : 'plain',
          worker.phase ?? '',
          String(worker.heartbeat),
          worker.lastHeartbeatAt.toISOString(),
        ]),
      )}`,
    );
  }
  if (status.takenSeals.length > 0) say(context, `\n${takenSealsWarning(status.takenSeals)}`);
  say(context, `\nNext: ${status.nextStep}`);
  return EXIT_CODES.ok;
}

/** `cutover`: preflight, then move every lease and switch the phases. Resumes an interrupted run. */
export async function runCutover(context: CommandContext): Promise<ExitCode> {
  const to = targetOf(context);
  const raw = context.raw;
  const state = await readLiveMigrationState(context.from.store, to.store);
  if (state.phase === 'complete' && !state.targetGuarded) {
    const message = 'the cut-over is already complete: every lease lives in the target';
    if (context.json)
      context.io.stdout.write(
        `${toJson({ command: 'cutover', exitCode: 0, phase: state.phase, message })}\n`,
      );
    else say(context, message);
    return EXIT_CODES.ok;
  }
  if (raw.yes !== true) {
    const confirmed = await askYesNo(
      context.io,
      `Cut application ${JSON.stringify(context.applicationName)} over from ${context.from.name} to ${to.name} (phase now: ${state.phase})?`,
    );
    if (!confirmed) {
      warn(context, 'nothing was changed: the cut-over was not confirmed');
      return EXIT_CODES.refused;
    }
  }
  const report = await cutOverLiveMigration({
    ...common(context),
    watchMs: raw.watchMs as number,
    phaseRefreshMs: raw.phaseRefreshMs as number,
    settleMarginMs: raw.settleMs as number,
    force: raw.force === true,
    onStage: (stage, detail) => {
      context.progress.finish();
      if (raw.progress !== false) warn(context, `${stage}: ${detail}`);
    },
    onProgress: (progress) => {
      if (progress.stage === 'watching' || progress.stage === 'settling') {
        context.progress.update(progress.stage, progress.done, progress.total, 'ms');
      } else {
        context.progress.update(progress.stage, progress.done, progress.total);
      }
    },
  });
  context.progress.finish();
  if (context.json) {
    context.io.stdout.write(
      `${toJson({
        command: 'cutover',
        exitCode: EXIT_CODES.ok,
        phase: 'complete',
        startedIn: report.startedIn,
        moved: report.moved,
        alreadyMoved: report.alreadyMoved,
        removedStaleCopies: report.removedStaleCopies,
        passes: report.passes,
        migratingWorkers: report.preflight?.migratingWorkers ?? null,
        takenSeals: report.takenSeals,
      })}\n`,
    );
    return report.takenSeals.length > 0 ? EXIT_CODES.differences : EXIT_CODES.ok;
  }
  say(
    context,
    `kcl-migrate: cut-over of ${JSON.stringify(context.applicationName)} complete\n${formatPairs([
      ['started in phase', report.startedIn],
      ['leases moved', formatCount(report.moved)],
      ['already moved', formatCount(report.alreadyMoved)],
      ['stale target copies removed', formatCount(report.removedStaleCopies)],
      ['passes', String(report.passes)],
    ])}

Every lease now lives in ${to.name}.
Redeploy the workers with the plain target store at your pace (migrating workers keep working meanwhile).
Workers still on the plain source store stop with ApplicationMigratedError.`,
  );
  if (report.takenSeals.length === 0) return EXIT_CODES.ok;
  warn(context, takenSealsWarning(report.takenSeals));
  return EXIT_CODES.differences;
}

/** A summary row for source lease rows that cannot be read, when there are any. */
function unreadableRow(count: number): Array<[string, string]> {
  return count === 0
    ? []
    : [
        [
          'unreadable source rows',
          `${formatCount(count)} (not copied; fix or delete them before the cut-over, which refuses to run while they are there)`,
        ],
      ];
}

function takenSealsWarning(takenSeals: readonly TakenSeal[]): string {
  return `Moved leases taken in the source by workers that do not run the migrating store (a Java KCL or plain kcl
worker took the sealed row as if it had expired). The target rows are the leases and were kept; stop
those workers, they process these shards from stale checkpoints:
${formatTable(
  ['LEASE', 'SOURCE OWNER', 'SOURCE COUNTER', 'TARGET OWNER', 'TARGET COUNTER'],
  takenSeals.map((taken) => [
    taken.leaseKey,
    taken.sourceOwner ?? '(none)',
    String(taken.sourceCounter),
    taken.targetOwner ?? '(none)',
    String(taken.targetCounter),
  ]),
)}`;
}

/** `abort`: abandons a live migration that has not been cut over. */
export async function runAbort(context: CommandContext): Promise<ExitCode> {
  await abortLiveMigration(common(context));
  const message =
    'the live migration was abandoned: the target guard marker is cleared, the source stays authoritative; redeploy the workers with the plain source store';
  if (context.json)
    context.io.stdout.write(`${toJson({ command: 'abort', exitCode: EXIT_CODES.ok, message })}\n`);
  else say(context, message);
  return EXIT_CODES.ok;
}

export const LIVE_HELP = `Live migration (the fleet keeps running):
  kcl-migrate --live   …   guard the target and backfill it (source stays authoritative)
  kcl-migrate status   …   phase, leases moved, which workers run the migrating store
  kcl-migrate cutover  …   move every lease (copy, then seal the source row) and switch phases
  kcl-migrate abort    …   abandon a live migration before the cut-over
See the package README for the runbook. Waits: ${formatSeconds(45_001)} preflight watch by default.`;
