import type { RoundTripUnit, StoreName } from './bench-stores.js';
import type { MachineConditions } from './machine-conditions.js';
import type { SampleStatistics } from './sample-statistics.js';
import { sampleStatistics } from './sample-statistics.js';

export type OperationId = 'renew-cycle' | 'list-leases' | 'checkpoints-per-shard' | 'one-checkpoint';

export interface OperationDescription {
  readonly id: OperationId;
  readonly title: string;
}

export interface Sample {
  readonly milliseconds: number;
  readonly roundTrips: number;
  /** DynamoDB commands issued; fewer than `roundTrips` only when the SDK retried. Null elsewhere. */
  readonly commands: number | null;
}

export interface StoreResult {
  readonly name: StoreName;
  readonly label: string;
  readonly status: 'measured' | 'skipped' | 'failed';
  /** Why a store was skipped or failed; null when measured. */
  readonly reason: string | null;
  readonly unit: RoundTripUnit | null;
  readonly details: string | null;
  readonly samples: ReadonlyMap<OperationId, readonly Sample[]>;
}

export interface BenchReport {
  readonly startedAt: Date;
  readonly elapsedSeconds: number;
  readonly command: string;
  readonly repeat: number;
  readonly warmup: number;
  readonly machine: MachineConditions;
  readonly loadAtStart: readonly number[];
  readonly loadAtEnd: readonly number[];
  /** The store every median is divided by; null when neither it nor the fallback was measured. */
  readonly baseline: { readonly name: StoreName; readonly label: string } | null;
  readonly operations: readonly OperationDescription[];
  readonly stores: readonly StoreResult[];
}

export interface OperationSummary {
  readonly operation: OperationId;
  readonly milliseconds: SampleStatistics;
  readonly roundTrips: { readonly min: number; readonly max: number };
  readonly retriedRequests: number;
  /** Median divided by the baseline store's median; null without a baseline. */
  readonly ratioToBaseline: number | null;
}

/** Statistics of one store's samples of one operation; null when it has none. */
export function summarize(
  report: BenchReport,
  store: StoreResult,
  operation: OperationId,
): OperationSummary | null {
  const samples = store.samples.get(operation) ?? [];
  if (samples.length === 0) return null;
  const milliseconds = sampleStatistics(samples.map((sample) => sample.milliseconds));
  const roundTrips = samples.map((sample) => sample.roundTrips);
  const retriedRequests = samples.reduce(
    (sum, sample) => sum + (sample.commands === null ? 0 : sample.roundTrips - sample.commands),
    0,
  );
  const baselineStore = report.stores.find((candidate) => candidate.name === report.baseline?.name);
  const baselineSamples = baselineStore?.samples.get(operation) ?? [];
  const ratioToBaseline =
    baselineSamples.length === 0
      ? null
      : milliseconds.median / sampleStatistics(baselineSamples.map((sample) => sample.milliseconds)).median;
  return {
    operation,
    milliseconds,
    roundTrips: { min: Math.min(...roundTrips), max: Math.max(...roundTrips) },
    retriedRequests,
    ratioToBaseline,
  };
}

const UNIT_NAMES: Readonly<Record<RoundTripUnit, readonly [string, string]>> = {
  statement: ['statement', 'statements'],
  request: ['request', 'requests'],
  call: ['call', 'calls'],
};

export function formatMarkdownReport(report: BenchReport): string {
  const lines: string[] = [];
  const baseline = report.baseline?.label ?? 'baseline';
  lines.push(
    `| operation | store | round trips | median | p95 | min | × ${baseline} |`,
    '|---|---|---:|---:|---:|---:|---:|',
  );
  for (const operation of report.operations) {
    let first = true;
    for (const store of report.stores) {
      const label = first ? operation.title : '';
      first = false;
      if (store.status !== 'measured') {
        const why = store.status === 'skipped' ? 'skipped' : 'failed';
        lines.push(`| ${label} | ${store.label} | ${why}: ${escapeCell(store.reason ?? '')} | | | | |`);
        continue;
      }
      const summary = summarize(report, store, operation.id);
      if (summary === null || store.unit === null) {
        lines.push(`| ${label} | ${store.label} | not measured | | | | |`);
        continue;
      }
      const [one, many] = UNIT_NAMES[store.unit];
      const { min, max } = summary.roundTrips;
      const count = min === max ? formatCount(min) : `${formatCount(min)}–${formatCount(max)}`;
      const retries = summary.retriedRequests;
      const retried =
        retries === 0
          ? ''
          : ` (${retries} SDK ${retries === 1 ? 'retry' : 'retries'} in ${plural(summary.milliseconds.count, 'run')})`;
      lines.push(
        `| ${label} | ${store.label} | ${count} ${max === 1 ? one : many}${retried} | ${formatMilliseconds(summary.milliseconds.median)} | ${formatMilliseconds(summary.milliseconds.p95)} | ${formatMilliseconds(summary.milliseconds.min)} | ${formatRatio(summary.ratioToBaseline)} |`,
      );
    }
  }

  const [start1, start5, start15] = report.loadAtStart.map((value) => value.toFixed(2));
  const [end1, end5, end15] = report.loadAtEnd.map((value) => value.toFixed(2));
  lines.push(
    '',
    `${plural(report.repeat, 'measured run')} per store and operation after ${plural(report.warmup, 'warm-up run')}; ` +
      'each run visits every store in turn (rotating the order), so a burst of load on the machine hits all stores alike. ' +
      `p95 is the nearest rank of ${report.repeat} runs${report.repeat < 20 ? ' (here: the slowest run)' : ''}. ` +
      `The last column divides each median by the ${baseline} median of the same operation.`,
    '',
    'Round trips: SQL statements executed (Kysely `log` callback, BEGIN/COMMIT included); DynamoDB HTTP requests ' +
      '(middleware on the `DynamoDBClient`, every SDK attempt); memory store: method calls on the store.',
    '',
    `Measured ${report.startedAt.toISOString().slice(0, 16).replace('T', ' ')} UTC in ${Math.round(report.elapsedSeconds)} s on ${report.machine.cpu}, ` +
      `${report.machine.memoryGiB} GiB, ${report.machine.system}, Node ${report.machine.node}; ` +
      `load average (1/5/15 min) ${start1}/${start5}/${start15} at the start and ${end1}/${end5}/${end15} at the end ` +
      '(other jobs shared the machine: the figures are indicative, the ratios and round trips are what carry over).',
    '',
  );
  for (const store of report.stores) {
    if (store.status === 'measured' && store.details !== null) lines.push(`- ${store.details}`);
  }
  lines.push('', `Reproduce (from the repository root): \`${report.command}\``);
  return lines.join('\n');
}

/** The report as plain data, for `--json`. */
export function reportAsJson(report: BenchReport): unknown {
  return {
    startedAt: report.startedAt.toISOString(),
    elapsedSeconds: report.elapsedSeconds,
    command: report.command,
    repeat: report.repeat,
    warmup: report.warmup,
    machine: report.machine,
    loadAverage: { start: report.loadAtStart, end: report.loadAtEnd },
    baseline: report.baseline?.name ?? null,
    operations: report.operations,
    stores: report.stores.map((store) => ({
      name: store.name,
      label: store.label,
      status: store.status,
      reason: store.reason,
      roundTripUnit: store.unit,
      details: store.details,
      operations: report.operations.map((operation) => ({
        operation: operation.id,
        summary: summarize(report, store, operation.id),
        samples: store.samples.get(operation.id) ?? [],
      })),
    })),
  };
}

function formatMilliseconds(value: number): string {
  if (value >= 1_000) return `${(value / 1_000).toFixed(2)} s`;
  if (value >= 100) return `${value.toFixed(0)} ms`;
  if (value >= 10) return `${value.toFixed(1)} ms`;
  return `${value.toFixed(2)} ms`;
}

function formatRatio(value: number | null): string {
  if (value === null) return '—';
  if (value >= 10) return `${value.toFixed(0)}`;
  if (value >= 0.1) return `${value.toFixed(2)}`;
  return `${value.toFixed(3)}`;
}

function formatCount(value: number): string {
  return value.toLocaleString('en-US');
}

function plural(count: number, noun: string): string {
  return `${count} ${noun}${count === 1 ? '' : 's'}`;
}

function escapeCell(text: string): string {
  return text.replaceAll('|', '\\|').replaceAll('\n', ' ');
}
