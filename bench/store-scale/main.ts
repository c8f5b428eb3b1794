import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { loadAverage, readMachineConditions } from '../store-ops/machine-conditions.js';
import type { CellResult, FleetCell } from './fleet-run.js';
import { runFleetCell } from './fleet-run.js';
import { javaLeaseItemBytes } from './java-kcl-cost.js';
import type { ScaleReport, StoreRun } from './scale-report.js';
import { formatMarkdownReport, mergeReports } from './scale-report.js';
import type { ScaleStore, ScaleStoreName } from './scale-stores.js';
import { openScaleStore, SCALE_STORE_NAMES, scaleStoreLabel } from './scale-stores.js';

/**
 * Lease-store scale and cost benchmark: simulated fleets of workers (the consumer's real lease
 * machinery, no Kinesis) against PostgreSQL, MariaDB, SQLite and DynamoDB (dynalite); requests per
 * lease-hour, renewal latency, convergence and the database's CPU, next to the Java KCL's defaults.
 * Prints Markdown (or JSON with --json), progress on stderr. From the repository root:
 *   npx -y pnpm@10.34.9 --filter @kcl/bench bench:store-scale -- --quick
 */

const USAGE = `Usage: tsx store-scale/main.ts [options]
  --quick               small fleets (${formatCells(quickCells())}), a minute or two
  --cells a,b,…         fleets as WORKERSxLEASES (default: ${formatCells(fullCells())})
  --stores a,b,…        ${SCALE_STORE_NAMES.join(', ')} (default: all)
  --liveness off,on     PostgreSQL and MariaDB without and/or with session liveness, a session per
                        worker checked every second (default: off,on)
  --time-scale S|auto   the fleet clock's speed (default auto: about half this machine's capacity)
  --max-time-scale S    auto never goes faster (default 2; quick 10)
  --min-time-scale S    auto never goes slower (default 0.01)
  --max-cell-minutes M  a fleet estimated to take longer is not run (default 60; quick 1.5)
  --budget-minutes M    no fleet is started after M minutes (default: no limit; quick 4)
  --json                JSON instead of Markdown
  --render FILE,…       print the Markdown of reports saved with --json (several: joined), without running anything
PostgreSQL and MariaDB URLs: KCL_POSTGRES_URL, KCL_MYSQL_URL (a throwaway database is created and dropped).`;

function quickCells(): FleetCell[] {
  return [
    { workers: 10, leases: 100 },
    { workers: 20, leases: 400 },
  ];
}

function fullCells(): FleetCell[] {
  return [
    { workers: 10, leases: 1_000 },
    { workers: 100, leases: 1_000 },
    { workers: 10, leases: 10_000 },
    { workers: 500, leases: 1_000 },
    { workers: 100, leases: 10_000 },
    { workers: 500, leases: 10_000 },
  ];
}

function formatCells(cells: readonly FleetCell[]): string {
  return cells.map((cell) => `${cell.workers}x${cell.leases}`).join(',');
}

interface Options {
  readonly mode: 'quick' | 'full';
  readonly cells: readonly FleetCell[];
  readonly stores: readonly ScaleStoreName[];
  readonly liveness: readonly boolean[];
  readonly timeScale: number | null;
  readonly maxTimeScale: number;
  readonly minTimeScale: number;
  readonly maxCellWallSeconds: number;
  readonly budgetSeconds: number;
  readonly json: boolean;
  readonly render: string | null;
}

function parseOptions(argv: readonly string[]): Options {
  const { values } = parseArgs({
    args: [...argv],
    options: {
      quick: { type: 'boolean', default: false },
      cells: { type: 'string' },
      stores: { type: 'string' },
      liveness: { type: 'string', default: 'off,on' },
      'time-scale': { type: 'string' },
      'max-time-scale': { type: 'string' },
      'min-time-scale': { type: 'string' },
      'max-cell-minutes': { type: 'string' },
      'budget-minutes': { type: 'string' },
      json: { type: 'boolean', default: false },
      render: { type: 'string' },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) {
    console.log(USAGE);
    process.exit(0);
  }
  const problems: string[] = [];
  const positive = (flag: string, text: string | undefined, fallback: number): number => {
    if (text === undefined) return fallback;
    const value = Number(text);
    if (!(value > 0) || !Number.isFinite(value)) problems.push(`--${flag} needs a positive number`);
    return value;
  };
  const mode = values.quick ? 'quick' : 'full';
  let cells = mode === 'quick' ? quickCells() : fullCells();
  if (values.cells !== undefined) {
    cells = values.cells
      .split(',')
      .map((part) => part.trim())
      .filter((part) => part !== '')
      .flatMap((part) => {
        const match = /^(\d+)x(\d+)$/.exec(part);
        const workers = Number(match?.[1]);
        const leases = Number(match?.[2]);
        if (match === null || workers < 1 || leases < workers) {
          problems.push(`--cells: "${part}" is not WORKERSxLEASES with at least one lease per worker`);
          return [];
        }
        return [{ workers, leases }];
      });
  }
  const stores =
    values.stores === undefined
      ? SCALE_STORE_NAMES
      : values.stores.split(',').flatMap((part) => {
          const name = part.trim() === 'mysql' ? 'mariadb' : part.trim();
          if ((SCALE_STORE_NAMES as readonly string[]).includes(name)) return [name as ScaleStoreName];
          problems.push(`unknown store "${part}" (known: ${SCALE_STORE_NAMES.join(', ')})`);
          return [];
        });
  const liveness = values.liveness.split(',').flatMap((part) => {
    if (part.trim() === 'off') return [false];
    if (part.trim() === 'on') return [true];
    problems.push(`--liveness takes off, on or off,on; got "${part}"`);
    return [];
  });
  const timeScaleText = values['time-scale'];
  const timeScale =
    timeScaleText === undefined || timeScaleText === 'auto' ? null : positive('time-scale', timeScaleText, 1);
  const options: Options = {
    mode,
    cells,
    stores,
    liveness,
    timeScale,
    maxTimeScale: positive('max-time-scale', values['max-time-scale'], mode === 'quick' ? 10 : 2),
    minTimeScale: positive('min-time-scale', values['min-time-scale'], 0.01),
    maxCellWallSeconds:
      positive('max-cell-minutes', values['max-cell-minutes'], mode === 'quick' ? 1.5 : 60) * 60,
    budgetSeconds:
      positive('budget-minutes', values['budget-minutes'], mode === 'quick' ? 4 : Number.POSITIVE_INFINITY) *
      60,
    json: values.json,
    render: values.render ?? null,
  };
  if (problems.length > 0) {
    console.error(`bench: ${problems.join('; ')}\n\n${USAGE}`);
    process.exit(2);
  }
  return options;
}

function progress(message: string): void {
  process.stderr.write(`[store-scale] ${message}\n`);
}

async function main(): Promise<void> {
  // `pnpm run bench:store-scale -- --quick` passes the `--` on.
  const options = parseOptions(process.argv.slice(2).filter((arg) => arg !== '--'));
  if (options.render !== null) {
    const reports = options.render
      .split(',')
      .map((file) => JSON.parse(readFileSync(file, 'utf8')) as ScaleReport);
    console.log(formatMarkdownReport(mergeReports(reports)));
    return;
  }
  const started = performance.now();
  const loadBefore = loadAverage();
  const opened = new Map<string, ScaleStore>();
  const runs: StoreRun[] = [];
  const notRun: Array<{ store: string; cell: FleetCell }> = [];
  const stopping = new AbortController();
  const closeAll = async (): Promise<void> => {
    await Promise.all([...opened.values()].map((store) => store.close()));
  };
  const onSignal = (): void => {
    stopping.abort();
    void closeAll().finally(() => process.exit(130));
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  try {
    const maxWorkers = Math.max(...options.cells.map((cell) => cell.workers));
    const variants = options.stores.flatMap((name) =>
      (name === 'sqlite' || name === 'dynamo' ? [false] : options.liveness).map((liveness) => ({
        name,
        liveness,
      })),
    );
    for (const { name, liveness } of variants) {
      const label = scaleStoreLabel(name, liveness);
      progress(`opening ${label}`);
      const result = await openScaleStore(name, liveness, maxWorkers);
      if (result.status === 'skipped') {
        progress(`${label} skipped: ${result.reason}`);
        runs.push({
          name,
          label,
          roundTripUnit: name === 'dynamo' ? 'request' : 'statement',
          details: '',
          serverCpuSource: '',
          skipped: result.reason,
          cells: [],
        });
        continue;
      }
      opened.set(label, result.store);
      const store = result.store;
      runs.push({
        name,
        label: store.label,
        roundTripUnit: store.roundTripUnit,
        details: store.details,
        serverCpuSource: store.serverCpuSource,
        skipped: null,
        cells: [],
      });
    }
    // Fleet by fleet, every store in turn, so that a spent budget leaves out the same fleets everywhere.
    for (const cell of options.cells) {
      for (const run of runs) {
        const store = opened.get(run.label);
        if (store === undefined || stopping.signal.aborted) continue;
        if ((performance.now() - started) / 1_000 > options.budgetSeconds) {
          notRun.push({ store: run.label, cell });
          continue;
        }
        let result: CellResult;
        try {
          result = await runFleetCell(store, cell, {
            timeScale: options.timeScale,
            maxTimeScale: options.maxTimeScale,
            minTimeScale: options.minTimeScale,
            maxCellWallSeconds: options.maxCellWallSeconds,
            progress,
          });
        } catch (error) {
          progress(
            `${run.label} ${cell.workers}×${cell.leases} failed: ${(error as Error).stack ?? String(error)}`,
          );
          throw error;
        }
        if (result.status === 'skipped')
          progress(`${run.label} ${cell.workers}×${cell.leases} not run: ${result.reason}`);
        run.cells.push(result);
      }
    }
  } finally {
    await closeAll();
  }
  const report: ScaleReport = {
    mode: options.mode,
    machine: readMachineConditions(),
    loadBefore,
    loadAfter: loadAverage(),
    wallSeconds: (performance.now() - started) / 1_000,
    javaItemBytes: javaLeaseItemBytes(),
    stores: runs,
    notRun,
  };
  console.log(options.json ? JSON.stringify(report, null, 2) : formatMarkdownReport(report));
}

await main();
