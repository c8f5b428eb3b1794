import type { MachineConditions } from '../store-ops/machine-conditions.js';
import type { CellResult, FleetCell, PhaseResult } from './fleet-run.js';
import { formatScale, LEASE_SETTINGS } from './fleet-run.js';
import type { JavaCost } from './java-kcl-cost.js';
import { javaKcl2Cost, javaKcl3Cost } from './java-kcl-cost.js';
import type { LedgerSnapshot, RequestKind } from './request-ledger.js';
import { kindOf, REQUEST_KINDS } from './request-ledger.js';
import type { ScaleStoreName } from './scale-stores.js';

export interface StoreRun {
  readonly name: ScaleStoreName;
  readonly label: string;
  readonly roundTripUnit: 'statement' | 'request';
  readonly details: string;
  readonly serverCpuSource: string;
  /** Null when the store could not be opened. */
  readonly skipped: string | null;
  readonly cells: CellResult[];
}

export interface ScaleReport {
  readonly mode: 'quick' | 'full';
  readonly machine: MachineConditions;
  readonly loadBefore: readonly number[];
  readonly loadAfter: readonly number[];
  readonly wallSeconds: number;
  readonly javaItemBytes: number;
  readonly stores: readonly StoreRun[];
  /** Cells not started because the time budget was spent. */
  readonly notRun: ReadonlyArray<{ readonly store: string; readonly cell: FleetCell }>;
  /** Set when the report joins several runs (`--render a.json,b.json`). */
  readonly runs?: number;
}

/**
 * Several saved reports as one: each store's fleets in the order of the runs; a fleet left out of one
 * run for its budget but measured in another is not listed as not run.
 */
export function mergeReports(reports: readonly ScaleReport[]): ScaleReport {
  const [first, ...rest] = reports;
  if (first === undefined) throw new Error('bench: no report to render');
  const stores = new Map<string, StoreRun>();
  for (const report of reports) {
    for (const store of report.stores) {
      const known = stores.get(store.label);
      if (known === undefined || known.skipped !== null)
        stores.set(store.label, { ...store, cells: [...store.cells] });
      else known.cells.push(...store.cells);
    }
  }
  const measured = (label: string, cell: FleetCell): boolean =>
    [...stores.values()].some(
      (store) =>
        store.label === label &&
        store.cells.some((run) => run.cell.workers === cell.workers && run.cell.leases === cell.leases),
    );
  const last = rest.at(-1) ?? first;
  return {
    ...first,
    loadAfter: last.loadAfter,
    wallSeconds: reports.reduce((sum, report) => sum + report.wallSeconds, 0),
    stores: [...stores.values()],
    notRun: reports.flatMap((report) => report.notRun).filter(({ store, cell }) => !measured(store, cell)),
    runs: reports.length,
  };
}

const HOUR_MS = 3_600_000;

/** Round trips per lease-hour of one kind in a window of `fleetMs` (fleet time). */
export function perLeaseHour(
  tallies: LedgerSnapshot,
  kind: RequestKind | 'total',
  leases: number,
  fleetMs: number,
): number {
  let roundTrips = 0;
  for (const [operation, tally] of Object.entries(tallies)) {
    if (kind === 'total' || kindOf(operation) === kind) roundTrips += tally.roundTrips;
  }
  return roundTrips / leases / (fleetMs / HOUR_MS);
}

export function capacityPerLeaseHour(
  tallies: LedgerSnapshot,
  leases: number,
  fleetMs: number,
): { read: number; write: number } {
  let read = 0;
  let write = 0;
  for (const tally of Object.values(tallies)) {
    read += tally.readCapacity;
    write += tally.writeCapacity;
  }
  const leaseHours = leases * (fleetMs / HOUR_MS);
  return { read: read / leaseHours, write: write / leaseHours };
}

export function percentile(values: readonly number[], fraction: number): number | null {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(fraction * sorted.length) - 1))] as number;
}

export function formatMarkdownReport(report: ScaleReport): string {
  const lines: string[] = [];
  const measured = report.stores.flatMap((store) =>
    store.cells.flatMap((cell) => (cell.status === 'measured' ? [{ store, cell }] : [])),
  );
  lines.push(`## Lease store at scale (\`bench/store-scale\`, ${report.mode} mode)`);
  lines.push('');
  lines.push(
    `Simulated fleets without Kinesis: every worker runs the consumer's own lease keeper, renewal loop, planner (@kcl/rebalancer), hand-offs, shard-sync audit, lease cleanup and, in the rows marked "liveness on", session liveness (a session per worker, checked every ${LEASE_SETTINGS.livenessCheckIntervalMs / 1_000} s) with the consumer's defaults (renew and heartbeat every ${LEASE_SETTINGS.leaseRenewIntervalMs / 1_000} s, rebalance every ${LEASE_SETTINGS.rebalanceIntervalMs / 1_000} s ±25 %, expiry ${LEASE_SETTINGS.leaseExpiryMs / 1_000} s, shard sync and cleanup every ${LEASE_SETTINGS.shardSyncIntervalMs / 1_000} s). All workers of a fleet run in this one process and share one connection pool (a real fleet has a process and a pool per worker). No checkpoints are written (they depend on the application, for kcl and the Java KCL alike).`,
  );
  lines.push('');
  lines.push(
    "**Time scale.** Each fleet runs on a clock that goes *s* times as fast as the wall clock (*s* < 1: slower), chosen per fleet so that its estimated work fills about half of this machine (or given with `--time-scale`). The workers keep their default intervals on that clock, so a window of *w* wall seconds is *w × s* seconds of the fleet's time: requests per lease-hour are counted against the fleet's time, convergence times are given in the fleet's time, and the database's CPU is given per second of the fleet's time (as a share of one core at the default intervals). Latencies are wall time. At *s* > 1 the database sees *s* times the load it would at the default intervals (latencies pessimistic); at *s* < 1, less (optimistic).",
  );
  lines.push('');
  lines.push(
    `**Steady state.** After the cold start has balanced and one more rebalance interval, a window of 60 s of fleet time (two renew intervals, one shard-sync and cleanup interval) is counted, starting halfway between two renewal rounds — the workers started together, so they renew, sync and clean up at the same moments, and every worker's periodic calls fall whole inside the window: every call the workers make, every SQL statement executed (BEGIN and COMMIT included) and every DynamoDB HTTP request. Kinds: renew = \`leases.renewMany\`/\`renew\`; list = \`leases.list\` + \`workers.list\` (the rebalance listing every ${LEASE_SETTINGS.rebalanceIntervalMs / 1_000} s, the shard sync's and the cleanup's every minute); heartbeat = \`workers.heartbeat\`; take = \`take\`, \`requestHandoff\`, \`completeHandoff\`, \`release\`; liveness = the check of the worker's own session and \`workers.liveSessions\` (each a statement, every second), attaching sessions; other = the rest (the migration-marker check each minute, hand-off polls).`,
  );
  lines.push('');
  lines.push(
    `**Java KCL columns** are computed, not measured, from its default intervals as requests per lease-hour on DynamoDB (failoverTimeMillis 10 s): 2.x renews each lease every ${(10_000 / 3 - 25).toFixed(0)} ms (failover/3 − ε) and every worker scans the lease table every 20.05 s (taker, 2 × (failover + ε)) and every 5 min (leader election), the leader every 2 min (hole audit); 3.x renews as 2.x, the leader scans leases and worker metrics every 20 s (lease assignment) and every 2 min (hole audit), every worker queries the owner index every 9.975 s (lease discovery), writes its worker metrics every 30 s and reads the leader lock about every 40 s (the leader's lock heartbeat every 30 s). Scans page at 1 MB of items of ${report.javaItemBytes} bytes (a held lease in the Java table format). Sources: ../shared/reference/kcl-behaviour.md §2.1, §3.1–§3.5, and awslabs/amazon-kinesis-client at v3.5.1 (\`CommonCalculations\`, \`DynamoDBLeaseCoordinator\`, \`LeaseAssignmentManager\`, \`DynamoDBLockBasedLeaderDecider\`, \`DeterministicShuffleShardSyncLeaderDecider\`, \`PeriodicShardSyncManager\`, \`DynamicMigrationComponentsInitializer\`).`,
  );
  lines.push('');
  lines.push('### Store requests per lease-hour (steady state)');
  lines.push('');
  lines.push('SQL: statements; DynamoDB: HTTP requests. Java KCL: DynamoDB requests, computed.');
  lines.push('');
  lines.push(
    '| store | workers × leases | time scale | renew | list | heartbeat | take | liveness | other | **total** | Java 2.x | Java 3.x |',
  );
  lines.push('|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|');
  for (const { store, cell } of measured) {
    const { workers, leases } = cell.cell;
    const fleetMs = cell.steady.fleetMs;
    const java2 = javaKcl2Cost(workers, leases, report.javaItemBytes);
    const java3 = javaKcl3Cost(workers, leases, report.javaItemBytes);
    lines.push(
      `| ${store.label} | ${fleetSize(cell.cell)} | ${formatScale(cell.timeScale)} | ${REQUEST_KINDS.map(
        (kind) => rate(perLeaseHour(cell.steady.tallies, kind, leases, fleetMs)),
      ).join(
        ' | ',
      )} | **${rate(perLeaseHour(cell.steady.tallies, 'total', leases, fleetMs))}** | ${rate(java2.requests.total)} | ${rate(java3.requests.total)} |`,
    );
  }
  lines.push('');
  lines.push('Java KCL by kind (requests per lease-hour, computed; take 0 in a steady state):');
  lines.push('');
  lines.push(
    '| workers × leases | 2.x renew | 2.x list | 3.x renew | 3.x list | 3.x heartbeat (worker metrics, lock) | 3.x other (lock reads) |',
  );
  lines.push('|---:|---:|---:|---:|---:|---:|---:|');
  const fleets = new Map(measured.map(({ cell }) => [fleetSize(cell.cell), cell.cell]));
  for (const [size, fleet] of fleets) {
    const java2 = javaKcl2Cost(fleet.workers, fleet.leases, report.javaItemBytes).requests;
    const java3 = javaKcl3Cost(fleet.workers, fleet.leases, report.javaItemBytes).requests;
    lines.push(
      `| ${size} | ${rate(java2.renew)} | ${rate(java2.list)} | ${rate(java3.renew)} | ${rate(java3.list)} | ${rate(java3.heartbeat)} | ${rate(java3.other)} |`,
    );
  }
  lines.push('');
  lines.push("### Renewal latency, convergence and the database's CPU");
  lines.push('');
  lines.push(
    "Renew cycle: one worker's renewal round (all its leases, and its heartbeat), wall time, every round of every worker in the steady window; the whole fleet renews at the same moment, the worst case for these latencies. Balanced: every live worker holds ⌊L/n⌋ or ⌈L/n⌉ leases and no hand-off is pending; from the start with every lease free, and from killing a tenth of the workers (at least one) halfway between two renewals, so their leases expire 30 s after the kill (45 s after their last renewal: the mean for a kill at a random moment). One list + plan: what each worker does every rebalance interval — `leases.list` and `workers.list` of the fleet's table and one plan of them — timed alone before the fleet starts (fastest of 3, wall time). Database CPU: CPU seconds of the database per second of the fleet's time in the steady window (100 % = one core busy at the default intervals).",
  );
  lines.push('');
  lines.push(
    '| store | workers × leases | renew cycle p50 | p99 (rounds) | one list + plan | cold start balanced | after 10 % killed | database CPU | bench process CPU |',
  );
  lines.push('|---|---:|---:|---:|---:|---:|---:|---:|---:|');
  for (const { store, cell } of measured) {
    const rounds = cell.steady.renewRoundWallMs;
    const serverCpu =
      cell.steady.serverCpuSeconds === null
        ? 'n/a'
        : `${((cell.steady.serverCpuSeconds / (cell.steady.fleetMs / 1_000)) * 100).toFixed(1)} %`;
    const benchCpu = `${((cell.steady.benchCpuSeconds / (cell.steady.wallMs / 1_000)) * 100).toFixed(0)} % at ${formatScale(cell.timeScale)}`;
    lines.push(
      `| ${store.label} | ${fleetSize(cell.cell)} | ${milliseconds(percentile(rounds, 0.5))} | ${milliseconds(percentile(rounds, 0.99))} (${rounds.length}) | ${milliseconds(cell.calibration.listAndPlanMs)} | ${convergence(cell.coldStart)} | ${convergence(cell.failover)} | ${serverCpu} | ${benchCpu} |`,
    );
  }
  const dynamo = measured.filter(({ store }) => store.name === 'dynamo');
  if (dynamo.length > 0) {
    lines.push('');
    lines.push('### DynamoDB capacity units per lease-hour');
    lines.push('');
    lines.push(
      'kcl: as dynalite reported them (`ReturnConsumedCapacity: TOTAL`; store-dynamo reads strongly consistent, 1 unit per 4 KB; a write 1 unit per KB). Java KCL: computed, eventually consistent reads (its default), a failed conditional write not counted on either side.',
    );
    lines.push('');
    lines.push(
      '| workers × leases | kcl read | kcl write | Java 2.x read | Java 2.x write | Java 3.x read | Java 3.x write |',
    );
    lines.push('|---:|---:|---:|---:|---:|---:|---:|');
    for (const { cell } of dynamo) {
      const { workers, leases } = cell.cell;
      const kcl = capacityPerLeaseHour(cell.steady.tallies, leases, cell.steady.fleetMs);
      const java2: JavaCost = javaKcl2Cost(workers, leases, report.javaItemBytes);
      const java3: JavaCost = javaKcl3Cost(workers, leases, report.javaItemBytes);
      lines.push(
        `| ${fleetSize(cell.cell)} | ${rate(kcl.read)} | ${rate(kcl.write)} | ${rate(java2.readCapacity)} | ${rate(java2.writeCapacity)} | ${rate(java3.readCapacity)} | ${rate(java3.writeCapacity)} |`,
      );
    }
  }
  const problems = measured.filter(
    ({ cell }) => cell.steady.storeErrors > 0 || cell.steady.leasesLost > 0 || cell.steady.moves > 0,
  );
  if (problems.length > 0) {
    lines.push('');
    lines.push('**Not quiet in the steady window** (the figures of these rows include the extra traffic):');
    for (const { store, cell } of problems) {
      lines.push(
        `- ${store.label} ${fleetSize(cell.cell)}: ${cell.steady.storeErrors} store errors, ${cell.steady.leasesLost} leases lost, ${cell.steady.moves} moves${cell.storeErrorSamples.length > 0 ? ` (${cell.storeErrorSamples.join('; ')})` : ''}`,
      );
    }
  }
  const skipped = report.stores.flatMap((store) =>
    store.skipped !== null
      ? [`- ${store.label}: not run (${store.skipped})`]
      : store.cells.flatMap((cell) =>
          cell.status === 'skipped'
            ? [`- ${store.label} ${fleetSize(cell.cell)}: not run, ${cell.reason}`]
            : [],
        ),
  );
  for (const { store, cell } of report.notRun)
    skipped.push(`- ${store} ${fleetSize(cell)}: not run, the time budget was spent (--budget-minutes)`);
  if (skipped.length > 0) {
    lines.push('');
    lines.push('**Not measured:**');
    lines.push(...skipped);
  }
  lines.push('');
  lines.push('### Conditions');
  lines.push('');
  lines.push(
    `${report.machine.cpu}, ${report.machine.memoryGiB} GiB, ${report.machine.system}, Node ${report.machine.node}; the databases, the emulator and the fleet all on this one host. Load average ${report.loadBefore.map((value) => value.toFixed(2)).join(' / ')} before, ${report.loadAfter.map((value) => value.toFixed(2)).join(' / ')} after; ${Math.round(report.wallSeconds)} s in all${report.runs === undefined || report.runs === 1 ? '' : `, in ${report.runs} runs one after the other`}.`,
  );
  for (const store of report.stores) {
    if (store.skipped !== null) continue;
    lines.push(`- ${store.label}: ${store.details}. Database CPU: ${store.serverCpuSource}.`);
  }
  const loopDelays = measured.map(
    ({ store, cell }) =>
      `${store.label} ${fleetSize(cell.cell)} ${cell.steady.eventLoopDelayP99Ms.toFixed(0)} ms`,
  );
  if (loopDelays.length > 0) {
    lines.push(
      `- The bench's event-loop delay, p99 in the steady window (time a ready callback waited for this process's CPU; it is in the latencies above): ${loopDelays.join(', ')}.`,
    );
  }
  return `${lines.join('\n')}\n`;
}

function fleetSize(cell: FleetCell): string {
  return `${cell.workers} × ${cell.leases.toLocaleString('en-US')}`;
}

/** Three significant digits, thousands separated. */
export function rate(value: number): string {
  if (value === 0) return '0';
  if (value >= 100) return Math.round(value).toLocaleString('en-US');
  return value.toPrecision(3);
}

function milliseconds(value: number | null): string {
  if (value === null) return 'n/a';
  return value >= 1_000 ? `${(value / 1_000).toFixed(2)} s` : `${value.toPrecision(3)} ms`;
}

function convergence(phase: PhaseResult): string {
  return phase.convergedFleetMs === null
    ? `not within ${phase.limitFleetMs / 1_000} s`
    : `${(phase.convergedFleetMs / 1_000).toFixed(1)} s (${phase.moves} moves)`;
}
