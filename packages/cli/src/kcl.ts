import { readFileSync } from 'node:fs';
import type { KinesisClient } from '@aws-sdk/client-kinesis';
import { ConfigurationError } from '@kcl/core';
import { isLocalEndpoint, openLeaseStore } from '@kcl/stores';
import { Command, CommanderError, InvalidArgumentError } from 'commander';
import type { CliIo } from './cli/cli-io.js';
import { Progress, toJson } from './cli/cli-io.js';
import type { CommandContext } from './cli/command-context.js';
import type { ExitCode } from './cli/exit-codes.js';
import { EXIT_CODE_HELP, EXIT_CODES, exitCodeOfError } from './cli/exit-codes.js';
import type { RawOptions } from './cli/store-options.js';
import { addStoreOptions, ENVIRONMENT_HELP, storeSelection } from './cli/store-options.js';
import { runDashboard } from './commands/dashboard-command.js';
import { runForgetStream } from './commands/forget-stream-command.js';
import { runRelease } from './commands/release-command.js';
import { resetOptionProblems, runReset } from './commands/reset-command.js';
import { runStatus } from './commands/status-command.js';

const EXAMPLES = `Examples:
  # Shards, owners, lag, workers and problems of the application billing
  kcl status --app billing --store postgres://kcl@db.internal/kcl
  kcl status --app billing --store sqlite:leases.db --watch
  kcl status --app billing --store 'dynamo://billing?region=eu-west-1' --json

  # Replay from a time, on a stopped application (the plan first)
  kcl reset --app billing --store sqlite:leases.db --to 2026-03-01T12:00:00Z --dry-run
  kcl reset --app billing --store sqlite:leases.db --to 2026-03-01T12:00:00Z --yes

  # Skip to the newest records while the fleet runs (fenced through the lease counter)
  kcl reset --app billing --store sqlite:leases.db --to LATEST --force --yes

  # Hand a crashed worker's leases back now instead of after their expiry
  kcl release --app billing --store sqlite:leases.db --worker worker-7 --yes

  # A live web page of the leases: lineage, owners, lag, throughput, lease events
  kcl dashboard --app billing --store sqlite:leases.db --port 8080`;

function version(): string {
  try {
    const manifest = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as {
      version?: string;
    };
    return manifest.version ?? 'unknown';
  } catch {
    return 'unknown';
  }
}

function integerOption(minimum: number) {
  return (value: string): number => {
    const parsed = Number(value);
    if (!Number.isSafeInteger(parsed) || parsed < minimum) {
      throw new InvalidArgumentError(`must be an integer ≥ ${minimum}`);
    }
    return parsed;
  };
}

function collect(value: string, previous: string[] | undefined): string[] {
  return [...(previous ?? []), ...value.split(',').filter((part) => part !== '')];
}

type CommandName = 'status' | 'reset' | 'release' | 'forget-stream' | 'dashboard';

/** Runs `kcl` with `argv` (as `process.argv`: node and script first); resolves to the exit code. */
export async function runKcl(argv: readonly string[], io: CliIo, signal: AbortSignal): Promise<ExitCode> {
  let exitCode: ExitCode = EXIT_CODES.ok;
  const run = (name: CommandName) => async (raw: RawOptions) => {
    exitCode = await execute(name, raw, io, signal);
  };
  const after = `\n${ENVIRONMENT_HELP}\n\n${EXIT_CODE_HELP}\n`;
  const expiry = (command: Command) =>
    command.option(
      '--worker-expiry-ms <ms>',
      'a worker whose last heartbeat is older is taken as gone (default: twice the renew interval it publishes + 15 s for clock skew, or 45001 for a worker that does not publish it)',
      integerOption(1),
    );

  const program = new Command('kcl')
    .description(
      "Operates a kcl (or Java KCL) application on its lease store: see its shards, workers and problems, replay or skip records, hand a dead worker's leases back, watch it live in a browser.",
    )
    .version(version())
    .showHelpAfterError('(run kcl --help, or kcl <command> --help, for the options)')
    .exitOverride()
    .configureOutput({
      writeOut: (text) => io.stdout.write(text),
      writeErr: (text) => io.stderr.write(text),
    })
    .addHelpText('after', `\n${EXAMPLES}\n\n${EXIT_CODE_HELP}\n`);

  expiry(
    addStoreOptions(program.command('status').description('shards, workers and problems of an application')),
  )
    .option('--watch', 'redraw every --interval-ms until Ctrl-C (with --json: one JSON line per read)')
    .option('--interval-ms <ms>', 'how often --watch reads the store', integerOption(100), 2_000)
    .option('--check', 'exit with code 4 when problems are found')
    .option('--kinesis-region <region>', "check that the leases' streams still exist, in this region")
    .option('--kinesis-endpoint <url>', 'the Kinesis endpoint for that check (an emulator, a VPC endpoint)')
    .addHelpText('after', after)
    .action(run('status'));

  expiry(
    addStoreOptions(
      program
        .command('reset')
        .description('move checkpoints to replay or skip records (a plan first with --dry-run)'),
    ),
  )
    .option(
      '--to <position>',
      'TRIM_HORIZON, LATEST, a past ISO time with its offset (2026-03-01T12:00:00Z, 2026-03-01T13:00:00+01:00) or a sequence number',
    )
    .option('--shard <id>', 'only this shard (repeat, or separate with commas); default every shard', collect)
    .option('--dry-run', 'print the plan and write nothing')
    .option(
      '--force',
      'reset although workers are live: each lease is taken from its owner through the lease counter',
    )
    .option('--yes', 'do not ask for confirmation (required when not on a terminal)')
    .addHelpText('after', after)
    .action(run('reset'));

  expiry(
    addStoreOptions(
      program.command('release').description("hand a dead or stuck worker's leases back at once"),
    ),
  )
    .option('--worker <id>', 'the worker whose leases to release')
    .option('--dry-run', 'print what would be released and write nothing')
    .option('--force', 'release although the worker looks alive (it is stuck)')
    .option('--yes', 'do not ask for confirmation (required when not on a terminal)')
    .addHelpText('after', after)
    .action(run('release'));

  expiry(
    addStoreOptions(
      program
        .command('forget-stream')
        .description('delete the leases of one stream of a multi-stream application'),
    ),
  )
    .option('--stream <name>', 'the stream: its name, or its identifier account:stream:creationEpoch')
    .option('--dry-run', 'print the leases that would be deleted and delete nothing')
    .option('--force', 'delete although live workers hold some of them, or the stream still exists')
    .option('--kinesis-region <region>', 'refuse while the stream still exists, looked up in this region')
    .option('--kinesis-endpoint <url>', 'the Kinesis endpoint for that check (an emulator, a VPC endpoint)')
    .option('--yes', 'do not ask for confirmation (required when not on a terminal)')
    .addHelpText('after', after)
    .action(run('forget-stream'));

  expiry(
    addStoreOptions(
      program
        .command('dashboard')
        .description(
          'a live, read-only web page of the leases: lineage, owners, lag, throughput, lease events',
        ),
    ),
  )
    .option('--port <port>', 'the port to serve on (0: any free port)', integerOption(0), 8080)
    .option(
      '--host <address>',
      'the address to listen on (the page has no login: keep it local)',
      '127.0.0.1',
    )
    .option('--interval-ms <ms>', 'how often the store is read', integerOption(100), 2_000)
    .option('--kinesis-region <region>', "check that the leases' streams still exist, in this region")
    .option('--kinesis-endpoint <url>', 'the Kinesis endpoint for that check (an emulator, a VPC endpoint)')
    .addHelpText('after', after)
    .action(run('dashboard'));

  try {
    await program.parseAsync([...argv]);
  } catch (error) {
    if (error instanceof CommanderError) return error.exitCode === 0 ? EXIT_CODES.ok : EXIT_CODES.usage;
    throw error;
  }
  return exitCode;
}

/** Problems with the options of one command, before anything is opened. */
function commandProblems(name: CommandName, raw: RawOptions, io: CliIo): string[] {
  const problems: string[] = [];
  const writes = name === 'reset' || name === 'release' || name === 'forget-stream';
  if (name === 'reset') problems.push(...resetOptionProblems(raw, Date.now()));
  if (name === 'release' && typeof raw.worker !== 'string')
    problems.push('--worker is required: the worker whose leases to release');
  if (name === 'forget-stream' && typeof raw.stream !== 'string')
    problems.push('--stream is required: the stream whose leases to delete');
  const interactive = io.stdin.isTTY === true && io.stderr.isTTY === true;
  if (writes && raw.dryRun !== true && raw.yes !== true && !interactive) {
    problems.push(
      'not on a terminal, so confirmation cannot be asked: pass --yes (or --dry-run to see the plan)',
    );
  }
  return problems;
}

async function execute(
  name: CommandName,
  raw: RawOptions,
  io: CliIo,
  signal: AbortSignal,
): Promise<ExitCode> {
  const json = raw.json === true;
  let store: Awaited<ReturnType<typeof openLeaseStore>> | null = null;
  let kinesis: KinesisClient | undefined;
  try {
    const problems = commandProblems(name, raw, io);
    let selection: ReturnType<typeof storeSelection> | null = null;
    try {
      selection = storeSelection(raw, io.env, process.cwd());
    } catch (error) {
      if (!ConfigurationError.is(error)) throw error;
      problems.unshift(...error.problems);
    }
    if (problems.length > 0 || selection === null) throw new ConfigurationError(`kcl ${name}`, problems);
    store = await openLeaseStore(selection.location, {
      applicationName: selection.applicationName,
      environment: io.env,
      onPoolError: () => undefined,
      ...(selection.location.kind === 'dynamo'
        ? { requestTimeoutMs: 15_000, connectionTimeoutMs: 5_000 }
        : {}),
    });
    kinesis = await kinesisClient(raw, io.env);
    const context: CommandContext = {
      io,
      raw,
      signal,
      json,
      progress: new Progress(io, raw.progress !== false),
      applicationName: selection.applicationName,
      store,
      now: () => Date.now(),
      kinesis,
    };
    switch (name) {
      case 'status':
        return await runStatus(context);
      case 'reset':
        return await runReset(context);
      case 'release':
        return await runRelease(context);
      case 'forget-stream':
        return await runForgetStream(context);
      case 'dashboard':
        return await runDashboard(context);
    }
    return EXIT_CODES.usage;
  } catch (error) {
    const exitCode = exitCodeOfError(error);
    const message = error instanceof Error ? error.message : String(error);
    if (json) io.stdout.write(`${toJson({ command: name, exitCode, error: message })}\n`);
    io.stderr.write(`${message.startsWith('kcl') ? message : `kcl: ${message}`}\n`);
    return exitCode;
  } finally {
    kinesis?.destroy();
    await store?.close().catch(() => undefined);
  }
}

/**
 * The Kinesis client of `--kinesis-region` / `--kinesis-endpoint`, or undefined when neither is given.
 * Against an emulator on this machine without AWS credentials configured, placeholder credentials are
 * used (emulators accept any), as for the lease store.
 */
async function kinesisClient(
  raw: RawOptions,
  env: Readonly<Record<string, string | undefined>>,
): Promise<KinesisClient | undefined> {
  const region = typeof raw.kinesisRegion === 'string' ? raw.kinesisRegion : undefined;
  const endpoint = typeof raw.kinesisEndpoint === 'string' ? raw.kinesisEndpoint : undefined;
  if (region === undefined && endpoint === undefined) return undefined;
  const [{ KinesisClient }, { NodeHttpHandler }] = await Promise.all([
    import('@aws-sdk/client-kinesis'),
    import('@smithy/node-http-handler'),
  ]);
  const configured = ['AWS_ACCESS_KEY_ID', 'AWS_PROFILE', 'AWS_WEB_IDENTITY_TOKEN_FILE'].some(
    (name) => (env[name] ?? '') !== '',
  );
  const placeholder = endpoint !== undefined && isLocalEndpoint(endpoint) && !configured;
  return new KinesisClient({
    region: region ?? env.AWS_REGION ?? 'us-east-1',
    ...(endpoint === undefined ? {} : { endpoint }),
    // HTTP/1.1: a stream lookup needs no HTTP/2 (only fan-out does), and local emulators speak HTTP/1.1.
    requestHandler: new NodeHttpHandler({ connectionTimeout: 5_000, requestTimeout: 15_000 }),
    ...(placeholder
      ? { credentials: { accessKeyId: 'AKIAKCLLOCALCLI00000', secretAccessKey: 'kcl-local' } }
      : {}),
  });
}
