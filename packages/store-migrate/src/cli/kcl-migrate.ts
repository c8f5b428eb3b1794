import { readFileSync } from 'node:fs';
import { Command, CommanderError } from 'commander';
import type { RawOptions } from './cli-options.js';
import {
  addStoreOptions,
  connectionOf,
  ENVIRONMENT_HELP,
  integerOption,
  resolveSelection,
  sideProblems,
} from './cli-options.js';
import type { CliIo } from './cli-output.js';
import { ProgressReporter, toJson } from './cli-output.js';
import type { CommandContext } from './command-context.js';
import { runCopy, runUnmark, runVerify } from './copy-command.js';
import type { ExitCode } from './exit-codes.js';
import { EXIT_CODE_HELP, EXIT_CODES, exitCodeOfError } from './exit-codes.js';
import { LIVE_HELP, runAbort, runCutover, runLiveStart, runStatus } from './live-commands.js';
import type { OpenedStore } from './store-connection.js';
import { openStore, unreachableStores } from './store-connection.js';

const EXAMPLES = `Examples:
  # What would be copied (reads both sides, writes nothing)
  kcl-migrate --from dynamo --to postgres --app billing --region eu-west-1 \\
    --postgres-url postgres://kcl@db.internal:5432/kcl --dry-run

  # Copy the leases of a stopped fleet, verify them, mark the source as migrated
  kcl-migrate --from dynamo --to postgres --app billing --region eu-west-1 \\
    --postgres-url postgres://kcl@db.internal:5432/kcl --yes

  # The same against local emulators and a shorter watch window
  kcl-migrate --from dynamo --to sqlite --app billing --dynamo-endpoint http://127.0.0.1:4567 \\
    --sqlite-file ./leases.db --watch-ms 5000 --yes

  # Compare both sides lease by lease (exit code 4 on any difference)
  kcl-migrate --from dynamo --to postgres --app billing --postgres-url … --verify

  # Back from PostgreSQL to DynamoDB, as JSON for a script
  kcl-migrate --from postgres --to dynamo --app billing --postgres-url … --region eu-west-1 --yes --json

  # Clear the marker a migration left on a store (to use it again)
  kcl-migrate --unmark --from dynamo --app billing --region eu-west-1

${LIVE_HELP}`;

function version(): string {
  try {
    const manifest = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
      version?: string;
    };
    return manifest.version ?? 'unknown';
  } catch {
    return 'unknown';
  }
}

type Mode = 'copy' | 'dry-run' | 'verify' | 'unmark' | 'live' | 'status' | 'cutover' | 'abort';

/** Runs `kcl-migrate` with `argv` (as `process.argv`, node and script first); resolves to the exit code. */
export async function runKclMigrate(
  argv: readonly string[],
  io: CliIo,
  signal: AbortSignal,
): Promise<ExitCode> {
  let exitCode: ExitCode = EXIT_CODES.ok;
  const run = (mode: Mode) => async (raw: RawOptions) => {
    exitCode = await execute(mode, raw, io, signal);
  };

  const program = new Command('kcl-migrate')
    .description(
      'Moves the lease state (checkpoints, lineage, owners) of a kcl or Java KCL application between lease stores: DynamoDB, PostgreSQL, MySQL/MariaDB, SQLite, any to any.',
    )
    .version(version())
    .enablePositionalOptions()
    .showHelpAfterError('(run kcl-migrate --help for the options)')
    .exitOverride()
    .configureOutput({
      writeOut: (text) => io.stdout.write(text),
      writeErr: (text) => io.stderr.write(text),
    });
  addStoreOptions(program)
    .option('--dry-run', 'print the plan (leases, checkpoints, owners, skipped rows) and write nothing')
    .option('--verify', 'compare both sides lease by lease; exit code 4 on any difference')
    .option('--yes', 'do not ask for confirmation (required when not on a terminal)')
    .option(
      '--force',
      'copy although the source looks live or marked, and overwrite target leases that moved on',
    )
    .option('--no-mark', 'do not mark the source as migrated after copying')
    .option('--unmark', 'clear the migration marker of the --from store, then exit')
    .option('--live', 'start a live migration: guard the target and backfill it (see cutover)')
    .option(
      '--watch-ms <ms>',
      'how long to watch the source for a running fleet (at least its lease expiry)',
      integerOption(1),
      45_001,
    )
    .addHelpText('after', `\n${EXAMPLES}\n\n${ENVIRONMENT_HELP}\n\n${EXIT_CODE_HELP}\n`)
    .action(async (raw: RawOptions) => {
      const modes: Mode[] = [];
      if (raw.unmark === true) modes.push('unmark');
      if (raw.live === true) modes.push('live');
      if (raw.verify === true) modes.push('verify');
      if (raw.dryRun === true) modes.push('dry-run');
      if (modes.length > 1) {
        io.stderr.write(`kcl-migrate: choose one of --${modes.join(', --')}\n`);
        exitCode = EXIT_CODES.usage;
        return;
      }
      await run(modes[0] ?? 'copy')(raw);
    });

  addStoreOptions(
    program.command('status').description('where a live migration stands: phase, leases, workers'),
  )
    .addHelpText('after', `\n${ENVIRONMENT_HELP}\n\n${EXIT_CODE_HELP}\n`)
    .action(run('status'));
  addStoreOptions(
    program
      .command('cutover')
      .description('cut a live migration over: move every lease to the target and switch the phases'),
  )
    .option('--yes', 'do not ask for confirmation (required when not on a terminal)')
    .option('--force', 'cut over even if the preflight finds workers that do not run the migrating store')
    .option(
      '--watch-ms <ms>',
      'preflight: how long to watch for workers without the migrating store (≥ lease expiry)',
      integerOption(1),
      45_001,
    )
    .option(
      '--phase-refresh-ms <ms>',
      "the workers' phaseRefreshMs (a larger advertised value wins)",
      integerOption(1),
      5_000,
    )
    .option(
      '--settle-ms <ms>',
      'added to every wait between phases, for calls still in flight',
      integerOption(0),
      2_000,
    )
    .addHelpText('after', `\n${ENVIRONMENT_HELP}\n\n${EXIT_CODE_HELP}\n`)
    .action(run('cutover'));
  addStoreOptions(
    program.command('abort').description('abandon a live migration that has not been cut over'),
  ).action(run('abort'));

  try {
    await program.parseAsync([...argv]);
  } catch (error) {
    if (error instanceof CommanderError) {
      return error.exitCode === 0 ? EXIT_CODES.ok : EXIT_CODES.usage;
    }
    throw error;
  }
  return exitCode;
}

async function execute(mode: Mode, raw: RawOptions, io: CliIo, signal: AbortSignal): Promise<ExitCode> {
  const json = raw.json === true;
  const needsTarget = mode !== 'unmark';
  const selection = resolveSelection(raw, io.env, { from: true, to: needsTarget });
  const problems = [...selection.problems];
  if (mode === 'unmark' && selection.to !== undefined)
    problems.push('--unmark clears the marker of the --from store only; leave out --to');
  if (
    (mode === 'live' || mode === 'status' || mode === 'cutover' || mode === 'abort') &&
    selection.stream !== undefined
  ) {
    problems.push(
      '--stream selects leases for an offline copy; a live migration moves the whole application',
    );
  }
  const interactive = io.stdin.isTTY === true && io.stderr.isTTY === true;
  if ((mode === 'copy' || mode === 'cutover') && raw.yes !== true && !interactive) {
    problems.push(
      'not on a terminal, so confirmation cannot be asked: pass --yes (or --dry-run to see the plan)',
    );
  }
  if (problems.length === 0)
    problems.push(...sideProblems(raw, io.env, needsTarget ? selection : { ...selection, to: undefined }));
  if (problems.length > 0) {
    reportError(
      io,
      json,
      mode,
      EXIT_CODES.usage,
      `invalid options:\n${problems.map((problem) => `  - ${problem}`).join('\n')}`,
    );
    return EXIT_CODES.usage;
  }

  const applicationName = selection.applicationName as string;
  const poolSize = Math.max(2, Math.min(32, (raw.concurrency as number) + 1));
  const opened: OpenedStore[] = [];
  try {
    const from = await openStore(
      'from',
      selection.from!,
      connectionOf('from', raw, io.env),
      applicationName,
      io.env,
      poolSize,
    );
    opened.push(from);
    let to: OpenedStore | null = null;
    if (needsTarget) {
      to = await openStore(
        'to',
        selection.to!,
        connectionOf('to', raw, io.env),
        applicationName,
        io.env,
        poolSize,
      );
      opened.push(to);
    }
    const unreachable = await unreachableStores([
      { side: 'from', opened: from },
      ...(to === null ? [] : [{ side: 'to' as const, opened: to }]),
    ]);
    if (unreachable.length > 0) {
      reportError(io, json, mode, EXIT_CODES.failed, unreachable.join('\n'));
      return EXIT_CODES.failed;
    }
    const context: CommandContext = {
      io,
      raw,
      signal,
      json,
      progress: new ProgressReporter(io, raw.progress !== false),
      applicationName,
      from,
      to,
      stream: selection.stream,
    };
    switch (mode) {
      case 'copy':
        return await runCopy(context, false);
      case 'dry-run':
        return await runCopy(context, true);
      case 'verify':
        return await runVerify(context);
      case 'unmark':
        return await runUnmark(context);
      case 'live':
        return await runLiveStart(context);
      case 'status':
        return await runStatus(context);
      case 'cutover':
        return await runCutover(context);
      case 'abort':
        return await runAbort(context);
    }
  } catch (error) {
    const exitCode = exitCodeOfError(error);
    reportError(io, json, mode, exitCode, error instanceof Error ? error.message : String(error));
    return exitCode;
  } finally {
    await Promise.allSettled(opened.map((side) => side.store.close()));
  }
}

function reportError(io: CliIo, json: boolean, command: string, exitCode: ExitCode, message: string): void {
  if (json) io.stdout.write(`${toJson({ command, exitCode, error: message })}\n`);
  io.stderr.write(`kcl-migrate: ${message}\n`);
}
