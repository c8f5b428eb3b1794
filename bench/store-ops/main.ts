import { parseArgs } from 'node:util';
import type { BenchStore, StoreName } from './bench-stores.js';
import { describeError, openBenchStore, STORE_LABELS, STORE_NAMES } from './bench-stores.js';
import { LeaseWorkload } from './lease-workload.js';
import { loadAverage, readMachineConditions } from './machine-conditions.js';
import type {
  BenchReport,
  OperationDescription,
  OperationId,
  Sample,
  StoreResult,
} from './markdown-report.js';
import { formatMarkdownReport, reportAsJson } from './markdown-report.js';

/**
 * Lease-store benchmark: what one worker holding 100 of 1,000 leases costs on every store, side by
 * side in one run. Prints a Markdown table (or JSON with --json). From the repository root:
 *   npx -y pnpm@10.34.9 --filter @kcl/bench exec tsx store-ops/main.ts [--stores sqlite,postgres] [--repeat 5]
 */

const USAGE = `Usage: tsx store-ops/main.ts [options]
  --stores a,b,…   stores to measure (default: all): ${STORE_NAMES.join(', ')}
                   ("dynamo" means both DynamoDB layouts, "mysql" means mariadb)
  --repeat N       measured runs per store and operation (default 5)
  --warmup N       unmeasured runs first (default 1)
  --baseline name  the store medians are divided by (default postgres, else memory)
  --json           print JSON instead of Markdown
PostgreSQL and MariaDB URLs: KCL_POSTGRES_URL, KCL_MYSQL_URL (a throwaway database is created and dropped).`;

interface Operation extends OperationDescription {
  run(workload: LeaseWorkload): Promise<void>;
  /** How many times `run` performs the operation; time and round trips are divided by it. */
  readonly repetitions?: number;
}

const CHECKPOINTS_IN_A_ROW = 100;

const OPERATIONS: readonly Operation[] = [
  {
    id: 'renew-cycle',
    title: 'renew cycle: `renewLeases` of 100 held leases',
    run: (workload) => workload.renewCycle(),
  },
  { id: 'list-leases', title: '`listLeases`: 1,000 leases', run: (workload) => workload.listAll() },
  {
    id: 'checkpoints-per-shard',
    title: '1,000 checkpoints, 100 leases at once (10 each)',
    run: (workload) => workload.checkpointsPerShardConcurrently(),
  },
  {
    id: 'one-checkpoint',
    title: 'one checkpoint (mean of 100 in a row)',
    run: (workload) => workload.checkpointsInARow(CHECKPOINTS_IN_A_ROW),
    repetitions: CHECKPOINTS_IN_A_ROW,
  },
];

interface Options {
  readonly stores: readonly StoreName[];
  readonly repeat: number;
  readonly warmup: number;
  readonly baseline: StoreName | null;
  readonly json: boolean;
}

function parseOptions(argv: readonly string[]): Options {
  const { values } = parseArgs({
    args: [...argv],
    options: {
      stores: { type: 'string' },
      repeat: { type: 'string' },
      warmup: { type: 'string' },
      baseline: { type: 'string' },
      json: { type: 'boolean', default: false },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) {
    console.log(USAGE);
    process.exit(0);
  }
  const problems: string[] = [];
  const storeName = (text: string): StoreName[] => {
    if (text === 'dynamo') return ['dynamo-java', 'dynamo-shared'];
    if (text === 'mysql') return ['mariadb'];
    if ((STORE_NAMES as readonly string[]).includes(text)) return [text as StoreName];
    problems.push(`unknown store "${text}" (known: ${STORE_NAMES.join(', ')}, dynamo, mysql)`);
    return [];
  };
  const requested =
    values.stores === undefined
      ? STORE_NAMES
      : values.stores
          .split(',')
          .map((part) => part.trim())
          .filter((part) => part !== '')
          .flatMap(storeName);
  const stores = STORE_NAMES.filter((name) => requested.includes(name));
  if (values.stores !== undefined && stores.length === 0 && problems.length === 0) {
    problems.push('--stores names no store');
  }
  const count = (flag: string, text: string | undefined, fallback: number, least: number): number => {
    if (text === undefined) return fallback;
    const value = Number(text);
    if (!Number.isSafeInteger(value) || value < least) problems.push(`--${flag} needs an integer ≥ ${least}`);
    return value;
  };
  const repeat = count('repeat', values.repeat, 5, 1);
  const warmup = count('warmup', values.warmup, 1, 0);
  const baseline = values.baseline === undefined ? null : (storeName(values.baseline)[0] ?? null);
  if (problems.length > 0) {
    console.error(`bench: ${problems.join('; ')}\n\n${USAGE}`);
    process.exit(2);
  }
  return { stores, repeat, warmup, baseline, json: values.json };
}

interface Entry {
  readonly bench: BenchStore;
  readonly workload: LeaseWorkload;
  readonly samples: Map<OperationId, Sample[]>;
  failure: string | null;
}

function progress(message: string): void {
  process.stderr.write(`[store-ops] ${message}\n`);
}

function rotate<T>(items: readonly T[], by: number): T[] {
  if (items.length === 0) return [];
  const shift = by % items.length;
  return [...items.slice(shift), ...items.slice(0, shift)];
}

// `pnpm … bench:store-ops -- --flag` passes the `--` through.
const options = parseOptions(process.argv.slice(2).filter((arg) => arg !== '--'));
const startedAt = new Date();
const started = performance.now();
const loadAtStart = loadAverage();
const results = new Map<StoreName, StoreResult>();
const entries: Entry[] = [];

let closing: Promise<void> | undefined;
const closeAll = (): Promise<void> => {
  closing ??= Promise.all(entries.map((entry) => entry.bench.close())).then(() => undefined);
  return closing;
};
let interrupted = false;
process.once('SIGINT', () => {
  interrupted = true;
  progress(
    'interrupted: closing connections and dropping the throwaway databases (Ctrl-C again quits at once)',
  );
  void closeAll();
});

try {
  for (const name of options.stores) {
    if (interrupted) break;
    progress(`opening ${name}`);
    const opened = await openBenchStore(name);
    if (interrupted) {
      if (opened.status === 'ready') await opened.bench.close();
      break;
    }
    if (opened.status === 'skipped') {
      progress(`skipping ${name}: ${opened.reason}`);
      results.set(name, {
        name,
        label: STORE_LABELS[name],
        status: 'skipped',
        reason: opened.reason,
        unit: null,
        details: null,
        samples: new Map(),
      });
      continue;
    }
    const entry: Entry = {
      bench: opened.bench,
      workload: new LeaseWorkload(opened.bench.store),
      samples: new Map(),
      failure: null,
    };
    entries.push(entry);
    const seedStarted = performance.now();
    try {
      await entry.workload.seed();
      progress(`seeded ${name} in ${((performance.now() - seedStarted) / 1_000).toFixed(1)} s`);
    } catch (error) {
      entry.failure = `seeding failed: ${describeError(error)}`;
      progress(`${name}: ${entry.failure}`);
    }
  }

  const runs = options.warmup + options.repeat;
  for (let run = 0; run < runs && !interrupted; run++) {
    const measured = run >= options.warmup;
    const runStarted = performance.now();
    for (const operation of OPERATIONS) {
      for (const entry of rotate(entries, run)) {
        if (entry.failure !== null || interrupted) continue;
        const { bench } = entry;
        const roundTripsBefore = bench.roundTrips();
        const commandsBefore = bench.commands();
        const operationStarted = performance.now();
        try {
          await operation.run(entry.workload);
        } catch (error) {
          if (interrupted) break;
          entry.failure = `${operation.id}: ${describeError(error)}`;
          progress(`${bench.name} failed: ${entry.failure}`);
          continue;
        }
        const milliseconds = performance.now() - operationStarted;
        if (!measured) continue;
        const commandsAfter = bench.commands();
        const repetitions = operation.repetitions ?? 1;
        const samples = entry.samples.get(operation.id) ?? [];
        samples.push({
          milliseconds: Math.round((milliseconds / repetitions) * 1_000) / 1_000,
          roundTrips: (bench.roundTrips() - roundTripsBefore) / repetitions,
          commands:
            commandsAfter === null || commandsBefore === null
              ? null
              : (commandsAfter - commandsBefore) / repetitions,
        });
        entry.samples.set(operation.id, samples);
      }
    }
    const seconds = ((performance.now() - runStarted) / 1_000).toFixed(1);
    progress(
      `${measured ? `run ${run - options.warmup + 1}/${options.repeat}` : 'warm-up'} done in ${seconds} s`,
    );
  }
} finally {
  await closeAll();
}
if (interrupted) process.exit(130);

for (const entry of entries) {
  results.set(entry.bench.name, {
    name: entry.bench.name,
    label: entry.bench.label,
    status: entry.failure === null ? 'measured' : 'failed',
    reason: entry.failure,
    unit: entry.bench.unit,
    details: entry.bench.details,
    samples: entry.samples,
  });
}
const stores = options.stores.flatMap((name) => results.get(name) ?? []);
const measuredNames = stores.filter((store) => store.status === 'measured').map((store) => store.name);
const baselineName = [options.baseline, 'postgres' as const, 'memory' as const, ...measuredNames].find(
  (name): name is StoreName => name !== null && measuredNames.includes(name),
);
const argumentsText = process.argv.slice(2).join(' ');
const report: BenchReport = {
  startedAt,
  elapsedSeconds: (performance.now() - started) / 1_000,
  command: `npx -y pnpm@10.34.9 --filter @kcl/bench exec tsx store-ops/main.ts${argumentsText === '' ? '' : ` ${argumentsText}`}`,
  repeat: options.repeat,
  warmup: options.warmup,
  machine: readMachineConditions(),
  loadAtStart,
  loadAtEnd: loadAverage(),
  baseline: baselineName === undefined ? null : { name: baselineName, label: STORE_LABELS[baselineName] },
  operations: OPERATIONS.map(({ id, title }) => ({ id, title })),
  stores,
};
console.log(options.json ? JSON.stringify(reportAsJson(report), null, 2) : formatMarkdownReport(report));
