import { createRequire } from 'node:module';
import type { Clock, Logger } from '@kcl/core';
import { ConfigurationError, noopLogger, systemClock } from '@kcl/core';
import type { MetricDatum, MetricsLevel, MetricsSink, MetricsSinkContext } from './metrics-sink.js';
import { isMetricsLevelEnabled, METRICS_LEVELS } from './metrics-sink.js';

/**
 * The part of a prom-client `Registry` the sink uses. Declared here, so `@kcl/consumer`'s types do
 * not depend on that optional package; a prom-client `Registry` satisfies it.
 */
export interface PrometheusRegistry {
  /** The exposition text, for a `/metrics` endpoint. */
  metrics(): Promise<string>;
  readonly contentType: string;
  getSingleMetric(name: string): unknown;
  registerMetric(metric: unknown): void;
}

export interface PrometheusMetricsSinkOptions {
  /** Where the metrics are registered. Default: prom-client's global registry (`register`). */
  readonly registry?: PrometheusRegistry;
  /** Prepended to every metric name. Default `kcl_`. */
  readonly prefix?: string;
  /** Default DETAILED (everything); SUMMARY only SUMMARY metrics; NONE nothing. */
  readonly level?: MetricsLevel;
  /**
   * Per-shard gauges (`millis_behind_latest`) not updated for this long are removed when scraped, so
   * a shard that moved to another worker does not leave a frozen value behind. Default 300 000.
   */
  readonly staleAfterMs?: number;
  /** Histogram buckets in seconds. Default 5 ms … 30 s. */
  readonly buckets?: readonly number[];
  /** Default: the attached consumer's clock, else the system clock. */
  readonly clock?: Clock;
  readonly logger?: Logger;
}

export interface PrometheusMetricsSink extends MetricsSink {
  readonly level: MetricsLevel;
  readonly registry: PrometheusRegistry;
}

/** The Prometheus labels kcl metrics carry. */
export type LabelName = 'shard_id' | 'worker_id' | 'operation';

/** How a Java KCL metric appears in Prometheus (name without the prefix). */
export interface PrometheusMetricMapping {
  readonly type: 'gauge' | 'counter' | 'histogram';
  readonly name: string;
  readonly help: string;
  readonly labels: readonly LabelName[];
}

const LABEL_DIMENSIONS: Readonly<Record<LabelName, string>> = {
  shard_id: 'ShardId',
  worker_id: 'WorkerIdentifier',
  operation: 'Operation',
};

/**
 * Java KCL metrics (keyed `<Operation>/<MetricName>`) and their Prometheus names. `null`: not exported
 * (the application-wide `MillisBehindLatest` is `max(kcl_millis_behind_latest)` in PromQL). Metrics
 * not listed become a gauge named after them, labelled with operation, shard_id and worker_id.
 */
export const PROMETHEUS_METRIC_MAPPING: Readonly<Record<string, PrometheusMetricMapping | null>> = {
  'ProcessTask/MillisBehindLatest': {
    type: 'gauge',
    name: 'millis_behind_latest',
    help: 'How far the last batch read from the shard is behind its newest record, in milliseconds (Java MillisBehindLatest)',
    labels: ['shard_id'],
  },
  'ApplicationTracker/MillisBehindLatest': null,
  'ProcessTask/RecordsProcessed': {
    type: 'counter',
    name: 'records_processed_total',
    help: 'Records delivered to the processor (Java RecordsProcessed)',
    labels: ['shard_id'],
  },
  'ProcessTask/DataBytesProcessed': {
    type: 'counter',
    name: 'data_bytes_processed_total',
    help: 'Bytes of record data delivered to the processor (Java DataBytesProcessed)',
    labels: ['shard_id'],
  },
  'ProcessTask/RecordProcessor.processRecords.Time': {
    type: 'histogram',
    name: 'process_records_duration_seconds',
    help: 'Time spent in processRecords per batch (Java RecordProcessor.processRecords.Time)',
    labels: [],
  },
  'ProcessTask/ExpiredIterator': {
    type: 'counter',
    name: 'expired_iterators_total',
    help: 'Shard iterators that expired and were renewed (Java ExpiredIterator)',
    labels: ['shard_id'],
  },
  'ProcessTask/UpdateLease.Success': {
    type: 'counter',
    name: 'checkpoints_total',
    help: 'Checkpoints written (Java UpdateLease.Success)',
    labels: ['shard_id'],
  },
  'ProcessTask/KinesisDataFetcher.getRecords.Time': {
    type: 'histogram',
    name: 'get_records_duration_seconds',
    help: 'GetRecords latency (Java KinesisDataFetcher.getRecords.Time)',
    labels: [],
  },
  'ProcessTask/KinesisDataFetcher.getRecords.Success': {
    type: 'counter',
    name: 'get_records_total',
    help: 'Successful GetRecords calls (Java KinesisDataFetcher.getRecords.Success)',
    labels: [],
  },
  'RenewAllLeases/CurrentLeases': {
    type: 'gauge',
    name: 'current_leases',
    help: 'Leases this worker holds (Java CurrentLeases)',
    labels: ['worker_id'],
  },
  'LeaseCleanup/GarbageLeasesDeleted': {
    type: 'counter',
    name: 'garbage_leases_deleted_total',
    help: 'Leases of shards that no longer exist (a deleted stream, say), deleted by the cleanup',
    labels: [],
  },
  'RenewAllLeases/LostLeases': {
    type: 'counter',
    name: 'lost_leases_total',
    help: 'Leases this worker lost without releasing them (Java LostLeases)',
    labels: ['worker_id'],
  },
  'RenewAllLeases/Time': {
    type: 'histogram',
    name: 'renew_leases_duration_seconds',
    help: 'Time to renew all held leases (Java RenewAllLeases Time)',
    labels: ['worker_id'],
  },
  'RenewAllLeases/Success': {
    type: 'counter',
    name: 'lease_renewal_rounds_total',
    help: 'Completed lease renewal rounds (Java RenewAllLeases Success)',
    labels: ['worker_id'],
  },
  'TakeLeases/NumWorkers': {
    type: 'gauge',
    name: 'workers',
    help: 'Live workers of the application seen by this worker (Java NumWorkers)',
    labels: ['worker_id'],
  },
  'TakeLeases/ExpiredLeases': {
    type: 'gauge',
    name: 'expired_leases',
    help: 'Leases seen expired at the last rebalance (Java ExpiredLeases)',
    labels: ['worker_id'],
  },
  'TakeLeases/TakenLeases': {
    type: 'counter',
    name: 'taken_leases_total',
    help: 'Leases this worker took (Java TakenLeases)',
    labels: ['worker_id'],
  },
  'TakeLeases/TotalLeases': {
    type: 'gauge',
    name: 'total_leases',
    help: 'Unfinished leases of the application at the last rebalance (Java TotalLeases)',
    labels: ['worker_id'],
  },
  'TakeLeases/NeededLeases': {
    type: 'gauge',
    name: 'needed_leases',
    help: 'Leases this worker lacked to reach its target at the last rebalance (Java NeededLeases)',
    labels: ['worker_id'],
  },
  'TakeLeases/LeasesToTake': {
    type: 'gauge',
    name: 'leases_to_take',
    help: 'Leases chosen to take at the last rebalance (Java LeasesToTake)',
    labels: ['worker_id'],
  },
};

const DEFAULT_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30] as const;
const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;

type PromClient = typeof import('prom-client');
type LabelValues = Partial<Record<LabelName, string>>;
interface SettableGauge {
  set(labels: LabelValues, value: number): void;
  remove(labels: LabelValues): void;
}
interface IncrementableCounter {
  inc(labels: LabelValues, value: number): void;
}
interface ObservableHistogram {
  observe(labels: LabelValues, value: number): void;
}

interface TrackedSeries {
  readonly labels: LabelValues;
  readonly clock: Clock;
  readonly staleAfterMs: number;
  updatedAt: number;
}

/** Per-shard gauge series and when they were last set, shared by every sink writing to that gauge. */
const seriesOfGauge = new WeakMap<object, Map<string, TrackedSeries>>();

let promClient: PromClient | null = null;

/** prom-client is an optional peer dependency (CommonJS): required on first use only. */
function loadPromClient(): PromClient {
  promClient ??= createRequire(import.meta.url)('prom-client') as PromClient;
  return promClient;
}

/**
 * A sink that keeps the consumer's metrics in a prom-client registry the application exposes, with
 * Prometheus-style names: `kcl_millis_behind_latest{shard_id="…"}`, `kcl_records_processed_total`, …
 * (see `PROMETHEUS_METRIC_MAPPING`). Several sinks (several consumers in one process) may share a
 * registry: they share its metrics.
 *
 * ```ts
 * const registry = new Registry();
 * const metrics = createPrometheusMetricsSink({ registry });
 * createConsumer({ …, metrics });
 * // GET /metrics → response.type(registry.contentType).send(await registry.metrics())
 * ```
 */
export function createPrometheusMetricsSink(
  options: PrometheusMetricsSinkOptions = {},
): PrometheusMetricsSink {
  const problems: string[] = [];
  const given = (options ?? {}) as Partial<PrometheusMetricsSinkOptions>;
  if (
    given.registry !== undefined &&
    (given.registry === null ||
      typeof given.registry.metrics !== 'function' ||
      typeof given.registry.getSingleMetric !== 'function')
  ) {
    problems.push('registry must be a prom-client Registry');
  }
  const prefix = given.prefix ?? 'kcl_';
  if (typeof prefix !== 'string' || (prefix !== '' && !METRIC_NAME.test(prefix))) {
    problems.push(
      `prefix ${JSON.stringify(prefix)} is not a valid start of a Prometheus metric name ([a-zA-Z_:][a-zA-Z0-9_:]*)`,
    );
  }
  if (given.level !== undefined && !METRICS_LEVELS.includes(given.level)) {
    problems.push(`level must be one of ${METRICS_LEVELS.join(', ')}, got ${JSON.stringify(given.level)}`);
  }
  const staleAfterMs = given.staleAfterMs ?? 300_000;
  if (typeof staleAfterMs !== 'number' || !Number.isInteger(staleAfterMs) || staleAfterMs < 1) {
    problems.push(`staleAfterMs must be a positive integer, got ${JSON.stringify(staleAfterMs)}`);
  }
  const buckets = given.buckets ?? DEFAULT_BUCKETS;
  if (
    !Array.isArray(buckets) ||
    buckets.length === 0 ||
    buckets.some(
      (bucket, index) => !Number.isFinite(bucket) || (index > 0 && bucket <= (buckets[index - 1] as number)),
    )
  ) {
    problems.push('buckets must be a non-empty list of ascending finite numbers (seconds)');
  }
  let client: PromClient | null = null;
  try {
    client = loadPromClient();
  } catch (error) {
    problems.push(
      `prom-client could not be loaded (${(error instanceof Error ? error.message : String(error)).split('\n')[0]}): install it to use the Prometheus sink`,
    );
  }
  if (problems.length > 0 || client === null) {
    throw new ConfigurationError('@kcl/consumer createPrometheusMetricsSink', problems);
  }
  const registry = given.registry ?? (client.register as unknown as PrometheusRegistry);
  return new PrometheusSink(client, registry, {
    prefix,
    level: given.level ?? 'DETAILED',
    staleAfterMs,
    buckets: [...buckets],
    clock: given.clock ?? null,
    logger: given.logger ?? null,
  });
}

interface PrometheusSettings {
  readonly prefix: string;
  readonly level: MetricsLevel;
  readonly staleAfterMs: number;
  readonly buckets: number[];
  readonly clock: Clock | null;
  readonly logger: Logger | null;
}

class PrometheusSink implements PrometheusMetricsSink {
  readonly level: MetricsLevel;
  readonly registry: PrometheusRegistry;
  readonly #client: PromClient;
  readonly #settings: PrometheusSettings;
  readonly #metrics = new Map<string, unknown>();
  #clock: Clock;
  #logger: Logger;
  #warned = false;

  constructor(client: PromClient, registry: PrometheusRegistry, settings: PrometheusSettings) {
    this.#client = client;
    this.registry = registry;
    this.#settings = settings;
    this.level = settings.level;
    this.#clock = settings.clock ?? systemClock;
    this.#logger = settings.logger ?? noopLogger;
  }

  attach(context: MetricsSinkContext): void {
    if (this.#settings.clock === null) this.#clock = context.clock;
    if (this.#settings.logger === null) this.#logger = context.logger;
  }

  record(datum: MetricDatum): void {
    try {
      if (this.level === 'NONE' || !isMetricsLevelEnabled(this.level, datum.level)) return;
      if (typeof datum.value !== 'number' || !Number.isFinite(datum.value)) return;
      const key = `${datum.dimensions.Operation ?? ''}/${datum.name}`;
      const mapping = Object.hasOwn(PROMETHEUS_METRIC_MAPPING, key)
        ? PROMETHEUS_METRIC_MAPPING[key]
        : genericMapping(datum.name);
      if (mapping === null || mapping === undefined) return;
      const labels: LabelValues = {};
      for (const label of mapping.labels) {
        const value = datum.dimensions[LABEL_DIMENSIONS[label]];
        if (value !== undefined) labels[label] = value;
      }
      const name = `${this.#settings.prefix}${mapping.name}`;
      switch (mapping.type) {
        case 'gauge': {
          const gauge = this.#metric(name, mapping) as SettableGauge;
          gauge.set(labels, datum.value);
          if (labels.shard_id !== undefined) this.#track(gauge, labels);
          break;
        }
        case 'counter':
          if (datum.value >= 0)
            (this.#metric(name, mapping) as IncrementableCounter).inc(labels, datum.value);
          break;
        case 'histogram':
          (this.#metric(name, mapping) as ObservableHistogram).observe(
            labels,
            datum.unit === 'Milliseconds' ? datum.value / 1_000 : datum.value,
          );
          break;
      }
    } catch (error) {
      if (!this.#warned) {
        this.#warned = true;
        this.#logger.warn('Prometheus metrics sink could not record a datum', { name: datum?.name, error });
      }
    }
  }

  async flush(): Promise<void> {
    // Prometheus pulls: there is nothing to push.
  }

  /** The registry's metric of that name (shared with other sinks), created on first use. */
  #metric(name: string, mapping: PrometheusMetricMapping): unknown {
    const cached = this.#metrics.get(name);
    if (cached !== undefined) return cached;
    const existing = this.registry.getSingleMetric(name);
    if (existing !== undefined && existing !== null) {
      this.#metrics.set(name, existing);
      return existing;
    }
    const common = {
      name,
      help: mapping.help,
      labelNames: [...mapping.labels],
      registers: [this.registry as unknown as InstanceType<PromClient['Registry']>],
    };
    let metric: unknown;
    if (mapping.type === 'gauge') {
      const gauge: SettableGauge = new this.#client.Gauge({
        ...common,
        collect: () => removeStaleSeries(gauge),
      });
      metric = gauge;
    } else if (mapping.type === 'counter') {
      metric = new this.#client.Counter(common);
    } else {
      metric = new this.#client.Histogram({ ...common, buckets: this.#settings.buckets });
    }
    this.#metrics.set(name, metric);
    return metric;
  }

  #track(gauge: SettableGauge, labels: LabelValues): void {
    let series = seriesOfGauge.get(gauge);
    if (series === undefined) {
      series = new Map();
      seriesOfGauge.set(gauge, series);
    }
    const key = JSON.stringify(labels);
    const now = this.#clock.monotonicNow();
    const tracked = series.get(key);
    if (tracked !== undefined && tracked.clock === this.#clock) tracked.updatedAt = now;
    else
      series.set(key, {
        labels,
        clock: this.#clock,
        staleAfterMs: this.#settings.staleAfterMs,
        updatedAt: now,
      });
  }
}

function removeStaleSeries(gauge: SettableGauge): void {
  const series = seriesOfGauge.get(gauge);
  if (series === undefined) return;
  for (const [key, tracked] of series) {
    if (tracked.clock.monotonicNow() - tracked.updatedAt > tracked.staleAfterMs) {
      gauge.remove(tracked.labels);
      series.delete(key);
    }
  }
}

/** `RecordProcessor.initialize.Time` → `record_processor_initialize_time`. */
function genericMapping(metricName: string): PrometheusMetricMapping {
  const name = metricName
    .replace(/([a-z0-9])([A-Z])/g, '$1_$2')
    .replace(/[^a-zA-Z0-9]+/g, '_')
    .replace(/^_+|_+$/g, '')
    .toLowerCase();
  return {
    type: 'gauge',
    name: name === '' ? 'unnamed' : name,
    help: `Last value of the KCL metric ${metricName}`,
    labels: ['operation', 'shard_id', 'worker_id'],
  };
}
