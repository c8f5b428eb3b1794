import { parseArgs } from 'node:util';

export type DemoStoreKind = 'sqlite' | 'postgres' | 'dynamo-local';

export const DEMO_STORE_KINDS: readonly DemoStoreKind[] = ['sqlite', 'postgres', 'dynamo-local'];

export interface DemoOptions {
  /** How long the script runs, from the first record written to the last, in seconds (startup and drain come on top). */
  readonly durationSeconds: number;
  readonly workers: number;
  /** Streams the fleet reads as one application; more than one puts the workers in multi-stream mode. */
  readonly streams: number;
  /** Shards of each stream at the start. */
  readonly shards: number;
  readonly store: DemoStoreKind;
  /** The PostgreSQL server for `--store postgres`; the demo creates and drops a throwaway database on it. */
  readonly postgresUrl: string;
  /** Records written per second, over all streams (each gets an even share). */
  readonly rate: number;
  /** Distinct partition keys. */
  readonly keys: number;
  /** True: redraw the view in place. False: plain timestamped lines. Null: decide by whether stdout is a terminal. */
  readonly tty: boolean | null;
  /** Keep the run directory (SQLite file, what each worker processed) instead of removing it. */
  readonly keep: boolean;
  /** Serve the lease dashboard (`kcl dashboard`) on this port while the demo runs; null: not. */
  readonly dashboardPort: number | null;
  /**
   * Exactly-once processing: each worker inserts every batch into an output table of the SQLite lease
   * store and checkpoints in the same transaction; the verification reads that table.
   */
  readonly exactlyOnce: boolean;
  readonly help: boolean;
}

export const DEMO_DEFAULTS: DemoOptions = {
  durationSeconds: 60,
  workers: 3,
  streams: 1,
  shards: 4,
  store: 'sqlite',
  postgresUrl: 'postgres://postgres@127.0.0.1:5432/postgres',
  rate: 200,
  keys: 200,
  tty: null,
  keep: false,
  dashboardPort: null,
  exactlyOnce: false,
  help: false,
};

/** The port `--dashboard` serves on unless `--dashboard-port` says otherwise. */
export const DEFAULT_DASHBOARD_PORT = 8080;

export const DEMO_LIMITS = {
  durationSeconds: { min: 20, max: 3_600 },
  workers: { min: 2, max: 10 },
  streams: { min: 1, max: 8 },
  shards: { min: 1, max: 16 },
  rate: { min: 1, max: 5_000 },
  keys: { min: 100, max: 100_000 },
} as const;

/** The most shards over all streams: every one is polled several times a second on a small machine. */
export const MAX_SHARDS_IN_ALL = 32;

/** Records per second one Kinesis shard accepts. */
export const WRITE_LIMIT_PER_SHARD = 1_000;

export const DEMO_USAGE = `usage: npm run demo -- [options]        (or: node apps/demo/dist/main.js [options])

Runs a fleet of kcl workers against a local Kinesis emulator while a script kills one (kill -9),
adds one, splits a shard, merges two and stops one gracefully, then checks that no record was lost
and every partition key was processed in order (per stream and in total with --streams).

options:
  --duration <seconds>   how long the whole run takes, startup and drain included (default ${DEMO_DEFAULTS.durationSeconds}, ${DEMO_LIMITS.durationSeconds.min}–${DEMO_LIMITS.durationSeconds.max})
  --workers <n>          workers at the start (default ${DEMO_DEFAULTS.workers}, ${DEMO_LIMITS.workers.min}–${DEMO_LIMITS.workers.max})
  --streams <n>          streams the workers read as one application (default ${DEMO_DEFAULTS.streams}, ${DEMO_LIMITS.streams.min}–${DEMO_LIMITS.streams.max});
                         more than 1 runs the workers in multi-stream mode, one lease table for all
  --shards <n>           shards of each stream at the start (default ${DEMO_DEFAULTS.shards}, ${DEMO_LIMITS.shards.min}–${DEMO_LIMITS.shards.max}, at most ${MAX_SHARDS_IN_ALL} in all)
  --store <kind>         lease store: sqlite (default, a file on disk), postgres, dynamo-local (dynalite)
  --postgres-url <url>   PostgreSQL server for --store postgres (default ${DEMO_DEFAULTS.postgresUrl});
                         the demo creates a throwaway database there and drops it at the end
  --rate <records/s>     records written per second, spread evenly over the streams (default ${DEMO_DEFAULTS.rate},
                         ${DEMO_LIMITS.rate.min}–${DEMO_LIMITS.rate.max}, at most ${WRITE_LIMIT_PER_SHARD} per shard)
  --keys <n>             distinct partition keys of each stream (default ${DEMO_DEFAULTS.keys}, ${DEMO_LIMITS.keys.min}–${DEMO_LIMITS.keys.max})
  --no-tty               plain timestamped lines instead of a live view (automatic when stdout is not a terminal)
  --keep                 keep the run directory (SQLite file, what each worker processed) and print its path
  --dashboard            serve the live lease dashboard (kcl dashboard) while the demo runs, and print its URL
  --dashboard-port <n>   its port (default ${DEFAULT_DASHBOARD_PORT}; 0: any free port)
  --exactly-once         exactly-once processing (needs --store sqlite): every batch's rows go into the table
                         demo_output of the SQLite file in the same transaction as its checkpoint, and the
                         verification counts that table (duplicates 0, even across the kill -9)
  -h, --help             show this help

exit status: 0 when nothing was lost and every key stayed in order, 1 otherwise, 2 for invalid options.`;

export type ParsedDemoOptions =
  | { readonly ok: true; readonly options: DemoOptions }
  | { readonly ok: false; readonly problems: readonly string[] };

const STRING_OPTIONS = [
  'duration',
  'workers',
  'streams',
  'shards',
  'store',
  'postgres-url',
  'rate',
  'keys',
  'dashboard-port',
] as const;
const BOOLEAN_OPTIONS = ['no-tty', 'keep', 'dashboard', 'exactly-once', 'help'] as const;

/** Parses the demo's command line; every problem is reported at once. */
export function parseDemoOptions(argv: readonly string[]): ParsedDemoOptions {
  const problems: string[] = [];
  // parseArgs (non-strict) would take the next option as the value of an option given without one
  // (`--workers --shards 2`): give such an option an empty inline value instead, reported below.
  const args = argv.map((arg, index) => {
    const name = arg.startsWith('--') ? arg.slice(2) : null;
    const next = argv[index + 1];
    const missingValue = next === undefined || /^--?[A-Za-z]/.test(next);
    return name !== null && (STRING_OPTIONS as readonly string[]).includes(name) && missingValue
      ? `${arg}=`
      : arg;
  });
  const { values, tokens } = parseArgs({
    args,
    options: {
      duration: { type: 'string' },
      workers: { type: 'string' },
      streams: { type: 'string' },
      shards: { type: 'string' },
      store: { type: 'string' },
      'postgres-url': { type: 'string' },
      rate: { type: 'string' },
      keys: { type: 'string' },
      'no-tty': { type: 'boolean' },
      keep: { type: 'boolean' },
      dashboard: { type: 'boolean' },
      'dashboard-port': { type: 'string' },
      'exactly-once': { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
    strict: false,
    allowPositionals: true,
    tokens: true,
  });

  for (const token of tokens) {
    if (token.kind === 'positional') problems.push(`unexpected argument "${token.value}"`);
    if (token.kind !== 'option') continue;
    const known =
      (STRING_OPTIONS as readonly string[]).includes(token.name) ||
      (BOOLEAN_OPTIONS as readonly string[]).includes(token.name);
    if (!known) problems.push(`unknown option ${token.rawName}`);
    else if ((BOOLEAN_OPTIONS as readonly string[]).includes(token.name) && token.value !== undefined)
      problems.push(`${token.rawName} takes no value`);
    else if ((STRING_OPTIONS as readonly string[]).includes(token.name) && !token.value)
      problems.push(`${token.rawName} needs a value`);
  }

  const text = (name: (typeof STRING_OPTIONS)[number]): string | undefined => {
    const value = values[name];
    return typeof value === 'string' && value !== '' ? value : undefined;
  };
  const integer = (
    flag: 'duration' | 'workers' | 'streams' | 'shards' | 'rate' | 'keys',
    { min, max }: { readonly min: number; readonly max: number },
    fallback: number,
  ): number => {
    const raw = text(flag);
    if (raw === undefined) return fallback;
    if (!/^\d+$/.test(raw) || Number(raw) < min || Number(raw) > max) {
      problems.push(`--${flag} must be a whole number from ${min} to ${max} (got "${raw}")`);
      return fallback;
    }
    return Number(raw);
  };

  const durationSeconds = integer('duration', DEMO_LIMITS.durationSeconds, DEMO_DEFAULTS.durationSeconds);
  const workers = integer('workers', DEMO_LIMITS.workers, DEMO_DEFAULTS.workers);
  const streams = integer('streams', DEMO_LIMITS.streams, DEMO_DEFAULTS.streams);
  const shards = integer('shards', DEMO_LIMITS.shards, DEMO_DEFAULTS.shards);
  const rate = integer('rate', DEMO_LIMITS.rate, DEMO_DEFAULTS.rate);
  const keys = integer('keys', DEMO_LIMITS.keys, DEMO_DEFAULTS.keys);

  let store = DEMO_DEFAULTS.store;
  const storeText = text('store');
  if (storeText !== undefined) {
    if ((DEMO_STORE_KINDS as readonly string[]).includes(storeText)) store = storeText as DemoStoreKind;
    else problems.push(`--store must be one of ${DEMO_STORE_KINDS.join(', ')} (got "${storeText}")`);
  }

  let postgresUrl = DEMO_DEFAULTS.postgresUrl;
  const urlText = text('postgres-url');
  if (urlText !== undefined) {
    if (storeText !== 'postgres') problems.push('--postgres-url applies only with --store postgres');
    let protocol = '';
    try {
      protocol = new URL(urlText).protocol;
    } catch {
      protocol = '';
    }
    if (protocol === 'postgres:' || protocol === 'postgresql:') postgresUrl = urlText;
    else problems.push(`--postgres-url must be a postgres:// URL (got "${urlText}")`);
  }

  const exactlyOnce = values['exactly-once'] === true;
  if (exactlyOnce && store !== 'sqlite')
    problems.push(
      store === 'dynamo-local'
        ? '--exactly-once needs --store sqlite: a DynamoDB lease store cannot checkpoint in the application’s transaction'
        : '--exactly-once needs --store sqlite: the demo keeps its output table in the SQLite lease store (an application does the same on PostgreSQL)',
    );

  const shardsInAll = streams * shards;
  const shardCount = `${shards} shard${shards === 1 ? '' : 's'}`;
  if (shardsInAll > MAX_SHARDS_IN_ALL)
    problems.push(
      `--streams ${streams} with --shards ${shards} make ${shardsInAll} shards in all, more than the demo runs (${MAX_SHARDS_IN_ALL}): ` +
        'use fewer --streams or --shards',
    );
  else if (rate > WRITE_LIMIT_PER_SHARD * shardsInAll)
    problems.push(
      `--rate ${rate} is more than ${streams === 1 ? shardCount : `${streams} streams of ${shardCount}`} accept ` +
        `(Kinesis takes ${WRITE_LIMIT_PER_SHARD} records/s per shard): ` +
        `use --rate ${WRITE_LIMIT_PER_SHARD * shardsInAll} or less, or more --shards`,
    );

  let dashboardPort: number | null = values.dashboard === true ? DEFAULT_DASHBOARD_PORT : null;
  const portText = text('dashboard-port');
  if (portText !== undefined) {
    if (!/^\d+$/.test(portText) || Number(portText) > 65_535)
      problems.push(`--dashboard-port must be a port number from 0 to 65535 (got "${portText}")`);
    else dashboardPort = Number(portText);
  }

  if (problems.length > 0) return { ok: false, problems };
  return {
    ok: true,
    options: {
      durationSeconds,
      workers,
      streams,
      shards,
      store,
      postgresUrl,
      rate,
      keys,
      tty: values['no-tty'] === true ? false : null,
      keep: values.keep === true,
      dashboardPort,
      exactlyOnce,
      help: values.help === true,
    },
  };
}
