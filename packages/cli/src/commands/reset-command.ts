import { ConfigurationError } from '@kcl/core';
import { toJson } from '../cli/cli-io.js';
import type { CommandContext } from '../cli/command-context.js';
import { say } from '../cli/command-context.js';
import type { ExitCode } from '../cli/exit-codes.js';
import { EXIT_CODES } from '../cli/exit-codes.js';
import { OperationRefusedError } from '../cli/operation-refused-error.js';
import { type ResetOutcome, resetLease } from '../operations/reset-leases.js';
import {
  checkpointOfTarget,
  isTimeWithoutOffset,
  parseResetTarget,
  planReset,
} from '../operations/reset-plan.js';
import { readApplicationStatus } from '../status/read-application-status.js';
import { confirm } from './confirm.js';
import { liveWorkers } from './live-workers.js';

/** The problems with `--to` and `--shard`, before anything is opened; `now`: this machine's clock. */
export function resetOptionProblems(raw: Record<string, unknown>, now: number): string[] {
  const to = raw.to;
  if (typeof to !== 'string') {
    return [
      '--to is required: TRIM_HORIZON, LATEST, an ISO time (2026-03-01T12:00:00Z) or a sequence number',
    ];
  }
  if (isTimeWithoutOffset(to)) {
    return [
      `--to ${JSON.stringify(to)} has no offset from UTC: add Z for UTC (2026-03-01T12:00:00Z) or the offset (2026-03-01T13:00:00+01:00)`,
    ];
  }
  const target = parseResetTarget(to);
  if (target === null) {
    return [
      `--to ${JSON.stringify(to)} is not a position: use TRIM_HORIZON, LATEST, an ISO time with date and time (2026-03-01T12:00:00Z) or a sequence number`,
    ];
  }
  if (target.kind === 'timestamp' && target.timestamp.getTime() > now) {
    return [
      `--to ${JSON.stringify(to)} is in the future (it is ${new Date(now).toISOString()} here): a reset to a time replays from a moment past; to skip to new records use LATEST`,
    ];
  }
  const shards = (raw.shard as string[] | undefined) ?? [];
  if (target.kind === 'sequence' && shards.length !== 1) {
    return ['--to <sequence number> names a position in one shard: give exactly one --shard'];
  }
  return [];
}

/** `kcl reset`: moves checkpoints (replay or skip), with a plan first; fenced with `--force`. */
export async function runReset(context: CommandContext): Promise<ExitCode> {
  const { raw, json, io, store } = context;
  const target = parseResetTarget(raw.to as string);
  if (target === null) throw new ConfigurationError('kcl reset', resetOptionProblems(raw, context.now()));
  const status = await readApplicationStatus(store, {
    workerExpiryMs: raw.workerExpiryMs as number | undefined,
    now: context.now,
  });
  const scan = await store.admin.scan();
  const plan = planReset(scan.leases, target, (raw.shard as string[] | undefined) ?? []);
  const live = liveWorkers(status);
  const dryRun = raw.dryRun === true;
  const force = raw.force === true;
  const changes = plan.leases.filter((entry) => entry.action === 'reset');
  // Workers of versions before the per-lease figures cannot read an AT_TIMESTAMP checkpoint carrying
  // its own time: during a rolling upgrade, such a worker taking a reset lease fails on it.
  const previousVersion =
    target.kind === 'timestamp'
      ? status.workers
          .filter((worker) => worker.alive && !worker.publishesLeaseFigures)
          .map((worker) => worker.workerId)
      : [];
  const previousVersionProblem = `live workers of a previous kcl version (${previousVersion.join(', ')}: they publish no per-lease figures) cannot read the checkpoint a reset to a time writes (AT_TIMESTAMP carrying its time) and would fail on the leases they take; finish upgrading every worker first, or reset to TRIM_HORIZON, LATEST or a sequence number. --force does not override this`;

  if (!json) {
    say(
      context,
      `Reset ${context.applicationName} to ${plan.target}${dryRun ? ' (dry run: nothing is written)' : ''}:`,
    );
    for (const entry of plan.leases) {
      const what =
        entry.action === 'reset'
          ? `${entry.from} → ${entry.to}`
          : entry.action === 'unchanged'
            ? `already at ${entry.to}`
            : `skipped: ${entry.reason}`;
      say(
        context,
        `  ${entry.leaseKey.padEnd(28)} ${what}${entry.owner === null ? '' : `  (held by ${entry.owner})`}`,
      );
    }
    if (plan.missing.length > 0) say(context, `  no lease for: ${plan.missing.join(', ')}`);
    if (plan.parentsWarning !== null) say(context, `Warning: ${plan.parentsWarning}.`);
    if (previousVersion.length > 0) say(context, `Refused even with --force: ${previousVersionProblem}.`);
    if (live.length > 0) {
      say(
        context,
        `Live workers: ${live.join(', ')}${force ? ' — the change is fenced through the lease counter' : ''}`,
      );
    }
  }
  if (plan.missing.length > 0 && !dryRun) {
    throw new ConfigurationError('kcl reset', [
      `--shard names shards without a lease: ${plan.missing.join(', ')} (kcl status lists them)`,
    ]);
  }
  if (dryRun) {
    if (json)
      io.stdout.write(
        `${toJson({ command: 'reset', dryRun: true, ...plan, liveWorkers: live, previousVersionWorkers: previousVersion })}\n`,
      );
    else if (live.length > 0 && !force)
      say(context, 'Without --force this reset would be refused: stop the workers first.');
    return EXIT_CODES.ok;
  }
  if (previousVersion.length > 0) throw new OperationRefusedError('kcl reset', [previousVersionProblem]);
  if (live.length > 0 && !force) {
    throw new OperationRefusedError('kcl reset', [
      `workers are live (${live.join(', ')}): a running owner would write over the reset checkpoint. Stop the application first, or pass --force: the reset then takes each lease from its owner through the lease counter, and the owner drops it and starts again from the new checkpoint`,
    ]);
  }
  if (changes.length === 0) {
    if (json) io.stdout.write(`${toJson({ command: 'reset', dryRun: false, ...plan, outcomes: [] })}\n`);
    else say(context, 'Nothing to change.');
    return EXIT_CODES.ok;
  }
  await confirm(
    context,
    'kcl reset',
    `Reset ${changes.length} lease(s) of ${context.applicationName} to ${plan.target}?`,
  );
  const checkpoint = checkpointOfTarget(target);
  const outcomes: ResetOutcome[] = [];
  for (const entry of changes) {
    if (context.signal.aborted) break;
    outcomes.push(await resetLease(store, entry.leaseKey, checkpoint));
    context.progress.update('reset', outcomes.length, changes.length);
  }
  context.progress.finish();
  const contended = outcomes.filter((outcome) => outcome.result === 'contended');
  if (json) {
    io.stdout.write(`${toJson({ command: 'reset', dryRun: false, ...plan, outcomes })}\n`);
  } else {
    const done = outcomes.filter(
      (outcome) => outcome.result === 'reset' || outcome.result === 'reset-and-taken',
    );
    say(context, `Reset ${done.length} of ${changes.length} lease(s) to ${plan.target}.`);
    for (const outcome of outcomes) {
      if (outcome.result === 'gone') say(context, `  ${outcome.leaseKey}: deleted meanwhile`);
      if (outcome.result === 'contended')
        say(context, `  ${outcome.leaseKey}: kept changing under the reset; run the command again`);
    }
  }
  if (context.signal.aborted) return EXIT_CODES.interrupted;
  return contended.length > 0 ? EXIT_CODES.failed : EXIT_CODES.ok;
}
