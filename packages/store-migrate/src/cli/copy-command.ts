import type { LeaseDifference, MigrationReport, PlannedLeaseCopy } from '../index.js';
import { markerTag, migrateLeases, readMigrationMarker, verifyLeaseCopy } from '../index.js';
import {
  formatCount,
  formatCounts,
  formatPairs,
  formatSeconds,
  formatTable,
  leaseJson,
  toJson,
} from './cli-output.js';
import type { CommandContext } from './command-context.js';
import { askYesNo, say, streamSelector, warn } from './command-context.js';
import type { ExitCode } from './exit-codes.js';
import { EXIT_CODES } from './exit-codes.js';

const PLAN_ROWS_SHOWN = 200;

function header(context: CommandContext): string {
  const rows: Array<[string, string]> = [['from', context.from.name]];
  if (context.to !== null) rows.push(['to', context.to.name]);
  if (context.stream !== undefined) rows.push(['stream', context.stream]);
  return `kcl-migrate: application ${JSON.stringify(context.applicationName)}\n${formatPairs(rows)}`;
}

/** The offline copy (and its dry run): watch, plan, confirm, copy, verify, mark. */
export async function runCopy(context: CommandContext, dryRun: boolean): Promise<ExitCode> {
  const to = context.to;
  if (to === null) throw new Error('runCopy needs a target');
  const raw = context.raw;
  const force = raw.force === true;
  const watchMs = raw.watchMs as number;
  if (!context.json) say(context, `${header(context)}\n`);
  if (!dryRun && !force && context.raw.progress !== false) {
    warn(
      context,
      `watching the source for ${formatSeconds(watchMs)} to make sure no worker uses it (--watch-ms shortens this, --force skips it)…`,
    );
  }
  const select = streamSelector(context.stream);
  const report = await migrateLeases({
    from: context.from.store,
    to: to.store,
    watchMs,
    dryRun,
    force,
    mark: raw.mark !== false,
    migratedTo: to.name,
    ...(select === undefined ? {} : { select }),
    concurrency: raw.concurrency as number,
    signal: context.signal,
    confirm: async (summary) => {
      if (raw.yes === true) return true;
      context.progress.finish();
      return askYesNo(
        context.io,
        `Copy ${formatCount(summary.leases)} leases (create ${summary.create}, update ${summary.update + summary.overwrite}, unchanged ${summary.unchanged}) to ${to.name}${raw.mark !== false ? ', then mark the source as migrated' : ''}?`,
      );
    },
    onProgress: (progress) =>
      progress.stage === 'watching'
        ? context.progress.update('watching', progress.done, progress.total, 'ms')
        : context.progress.update('copying', progress.done, progress.total),
  });
  context.progress.finish();
  const exitCode = exitCodeOf(report);
  if (context.json) {
    context.io.stdout.write(`${toJson(copyJson(context, report, exitCode))}\n`);
  } else {
    printCopyReport(context, report, dryRun);
  }
  return exitCode;
}

function exitCodeOf(report: MigrationReport): ExitCode {
  switch (report.outcome) {
    case 'planned':
    case 'completed':
      return EXIT_CODES.ok;
    case 'differences':
      return EXIT_CODES.differences;
    case 'interrupted':
      return EXIT_CODES.interrupted;
    default:
      return EXIT_CODES.refused;
  }
}

function printCopyReport(context: CommandContext, report: MigrationReport, dryRun: boolean): void {
  const { source, summary, counts } = report;
  if (dryRun) say(context, `Plan (nothing is written in a dry run)\n${planTable(report.plan)}\n`);
  if (report.outcome === 'refused-live' && report.activity !== null) {
    const changes = report.activity.changedLeases.slice(0, 50);
    if (changes.length > 0) {
      warn(
        context,
        `Leases written while the source was watched:\n${formatTable(
          ['LEASE', 'OWNER', 'COUNTER'],
          changes.map((change) => [
            change.leaseKey,
            change.owner ?? '(none)',
            `${change.counterBefore ?? '(new)'} → ${change.counterAfter ?? '(deleted)'}`,
          ]),
        )}`,
      );
    }
    if (report.activity.liveWorkers.length > 0) {
      warn(
        context,
        `Workers heartbeating: ${report.activity.liveWorkers.map((worker) => worker.workerId).join(', ')}`,
      );
    }
  }
  const owners = Object.entries(source.owners);
  const rows: Array<[string, string]> = [
    ['leases on the source', formatCount(source.selected)],
    [
      'non-lease rows skipped',
      source.skippedRowCount === 0
        ? '0'
        : `${source.skippedRowCount} (${formatCounts(source.skippedRowsByEntityType)})`,
    ],
  ];
  if (source.unreadableRows.length > 0)
    rows.push(['unreadable lease rows', String(source.unreadableRows.length)]);
  rows.push([
    'owners (cleared on the target)',
    owners.length === 0
      ? 'none'
      : `${formatCount(summary.ownedLeases)} leases held by ${owners
          .slice(0, 8)
          .map(([owner, count]) => `${owner} (${formatCount(count)})`)
          .join(', ')}${owners.length > 8 ? ` and ${owners.length - 8} more workers` : ''}`,
  ]);
  if (summary.handoffs > 0) {
    rows.push(['hand-offs (ended on the target)', formatCount(summary.handoffs)]);
  }
  if (dryRun || report.outcome !== 'completed') {
    rows.push(
      [dryRun ? 'would create' : 'to create', formatCount(summary.create)],
      [dryRun ? 'would update' : 'to update', formatCount(summary.update + summary.overwrite)],
      ['already up to date', formatCount(summary.unchanged)],
      ['target moved on (kept)', formatCount(summary.targetAhead)],
    );
  }
  if (
    report.outcome === 'completed' ||
    report.outcome === 'differences' ||
    report.outcome === 'interrupted'
  ) {
    rows.push(
      ['created', formatCount(counts.created)],
      ['updated', formatCount(counts.updated + counts.overwritten)],
      ['already up to date', formatCount(counts.unchanged)],
      ['target moved on (kept)', formatCount(counts.targetAhead)],
    );
    const written = counts.created + counts.updated + counts.overwritten;
    const rate =
      report.copyMs > 0 ? ` (${formatCount(Math.round((written / report.copyMs) * 1_000))} leases/s)` : '';
    rows.push(['copy time', `${formatSeconds(report.copyMs)}${rate}`]);
  }
  if (report.verification !== null) {
    rows.push([
      'verified',
      `${formatCount(report.verification.matching)} of ${formatCount(report.verification.compared)} leases match${report.verification.differences.length > 0 ? `, ${report.verification.differences.length} differ` : ''}`,
    ]);
  }
  if (!dryRun) {
    rows.push([
      'source marked',
      report.marked
        ? 'yes: a worker still pointed at the source stops with ApplicationMigratedError'
        : context.raw.mark === false
          ? 'no (--no-mark)'
          : 'no',
    ]);
  }
  say(context, `Summary\n${formatPairs(rows)}`);
  if (report.verification !== null && report.verification.differences.length > 0) {
    say(context, `\nDifferences\n${differenceTable(report.verification.differences)}`);
  }
  for (const note of report.notes)
    warn(context, `${report.outcome.startsWith('refused') ? 'refused: ' : 'note: '}${note}`);
  if (report.outcome === 'declined') warn(context, 'nothing was written: the copy was not confirmed');
  if (report.outcome === 'interrupted')
    warn(context, 'interrupted: run the same command again to finish the copy');
  if (report.outcome === 'completed') {
    say(
      context,
      `\nDone. Start the workers on ${context.to?.kind ?? 'the target'} with the same application name; they resume at these checkpoints.`,
    );
  }
  if (dryRun)
    say(context, '\nDry run: nothing was written. Run again without --dry-run (and with --yes) to copy.');
}

function planTable(plan: readonly PlannedLeaseCopy[]): string {
  const rows = plan
    .slice(0, PLAN_ROWS_SHOWN)
    .map((entry) => [
      entry.leaseKey,
      entry.source.checkpoint.toString(),
      entry.source.pendingCheckpoint?.toString() ?? '',
      entry.source.owner ?? '',
      entry.source.parentShardIds.join(','),
      entry.source.childShardIds.join(','),
      entry.action + (entry.reason === null ? '' : ` (${entry.reason})`),
    ]);
  const more =
    plan.length > PLAN_ROWS_SHOWN ? `\n  … and ${plan.length - PLAN_ROWS_SHOWN} more (--json lists all)` : '';
  return `${formatTable(['LEASE', 'CHECKPOINT', 'PENDING', 'OWNER', 'PARENTS', 'CHILDREN', 'ACTION'], rows)}${more}`;
}

function differenceTable(differences: readonly LeaseDifference[]): string {
  const rows = differences
    .slice(0, PLAN_ROWS_SHOWN)
    .map((difference) => [
      difference.leaseKey,
      difference.kind === 'different'
        ? `${difference.fields.join(', ')}${difference.targetAhead ? ' (target moved on)' : ''}`
        : difference.kind,
      difference.source?.checkpoint.toString() ?? '',
      difference.target?.checkpoint.toString() ?? '',
    ]);
  return formatTable(['LEASE', 'DIFFERENCE', 'SOURCE CHECKPOINT', 'TARGET CHECKPOINT'], rows);
}

function differenceJson(difference: LeaseDifference): Record<string, unknown> {
  return {
    leaseKey: difference.leaseKey,
    kind: difference.kind,
    fields: difference.fields,
    targetAhead: difference.targetAhead,
    source: difference.source === null ? null : leaseJson(difference.source),
    target: difference.target === null ? null : leaseJson(difference.target),
  };
}

function copyJson(
  context: CommandContext,
  report: MigrationReport,
  exitCode: ExitCode,
): Record<string, unknown> {
  const written = report.counts.created + report.counts.updated + report.counts.overwritten;
  return {
    command: report.outcome === 'planned' ? 'dry-run' : 'copy',
    outcome: report.outcome,
    exitCode,
    application: context.applicationName,
    stream: context.stream ?? null,
    from: { kind: context.from.kind, name: context.from.name, location: context.from.location },
    to:
      context.to === null
        ? null
        : { kind: context.to.kind, name: context.to.name, location: context.to.location },
    source: {
      leases: report.source.selected,
      skippedRowCount: report.source.skippedRowCount,
      skippedRowsByEntityType: report.source.skippedRowsByEntityType,
      unreadableRows: report.source.unreadableRows,
      owners: report.source.owners,
      marker: report.source.marker,
    },
    target: {
      leasesBefore: report.target.leasesBefore,
      schemaMissing: report.target.schemaMissing,
      marker: report.target.marker,
    },
    summary: report.summary,
    counts: report.counts,
    plan: report.plan.map((entry) => ({
      action: entry.action,
      reason: entry.reason,
      ...leaseJson(entry.source),
    })),
    activity:
      report.activity === null
        ? null
        : {
            live: report.activity.live,
            watchedMs: Math.round(report.activity.watchedMs),
            changedLeases: report.activity.changedLeases,
            leasesByOwner: report.activity.leasesByOwner,
            liveWorkers: report.activity.liveWorkers.map((worker) => worker.workerId),
          },
    verification:
      report.verification === null
        ? null
        : {
            compared: report.verification.compared,
            matching: report.verification.matching,
            differences: report.verification.differences.map(differenceJson),
          },
    marked: report.marked,
    clearedTargetMarker: report.clearedTargetMarker,
    copyMs: Math.round(report.copyMs),
    leasesPerSecond: report.copyMs > 0 ? Math.round((written / report.copyMs) * 1_000) : null,
    notes: report.notes,
  };
}

/** `--verify`: compares both sides lease by lease, writes nothing. */
export async function runVerify(context: CommandContext): Promise<ExitCode> {
  const to = context.to;
  if (to === null) throw new Error('runVerify needs a target');
  const select = streamSelector(context.stream);
  const { source, comparison } = await verifyLeaseCopy({
    from: context.from.store,
    to: to.store,
    ...(select === undefined ? {} : { select }),
  });
  const exitCode = comparison.differences.length === 0 ? EXIT_CODES.ok : EXIT_CODES.differences;
  if (context.json) {
    context.io.stdout.write(
      `${toJson({
        command: 'verify',
        exitCode,
        application: context.applicationName,
        from: { kind: context.from.kind, name: context.from.name },
        to: { kind: to.kind, name: to.name },
        compared: comparison.compared,
        matching: comparison.matching,
        skippedRowCount: source.skippedRowCount,
        skippedRowsByEntityType: source.skippedRowsByEntityType,
        differences: comparison.differences.map(differenceJson),
      })}\n`,
    );
    return exitCode;
  }
  say(context, `${header(context)}\n`);
  say(
    context,
    formatPairs([
      ['leases compared', formatCount(comparison.compared)],
      ['matching', formatCount(comparison.matching)],
      ['differences', formatCount(comparison.differences.length)],
      [
        'non-lease rows skipped',
        source.skippedRowCount === 0
          ? '0'
          : `${source.skippedRowCount} (${formatCounts(source.skippedRowsByEntityType)})`,
      ],
    ]),
  );
  if (comparison.differences.length > 0)
    say(context, `\nDifferences\n${differenceTable(comparison.differences)}`);
  else say(context, '\nBoth sides hold the same leases, checkpoints, lineage and hash ranges.');
  return exitCode;
}

/** `--unmark`: clears the migration marker of the --from store. */
export async function runUnmark(context: CommandContext): Promise<ExitCode> {
  const marker = await readMigrationMarker(context.from.store);
  const emit = (cleared: boolean, message: string, exitCode: ExitCode): ExitCode => {
    if (context.json) {
      context.io.stdout.write(
        `${toJson({ command: 'unmark', exitCode, store: context.from.name, marker, cleared, message })}\n`,
      );
    } else (exitCode === EXIT_CODES.ok ? say : warn)(context, message);
    return exitCode;
  };
  if (marker === null)
    return emit(false, `${context.from.name} has no migration marker; nothing to do`, EXIT_CODES.ok);
  if (markerTag(marker.migratedTo) !== null && context.raw.force !== true) {
    return emit(
      false,
      `refused: the marker belongs to a live migration (${marker.migratedTo}); clearing it could let plain workers use leases that moved. Use \`kcl-migrate status\`, \`abort\` or \`cutover\`, or pass --force`,
      EXIT_CODES.refused,
    );
  }
  await context.from.store.admin.setMigrationMarker(null);
  return emit(
    true,
    `cleared the marker of ${context.from.name} (it said: migrated to ${marker.migratedTo} on ${marker.migratedAt.toISOString()}); workers may use this store again`,
    EXIT_CODES.ok,
  );
}
