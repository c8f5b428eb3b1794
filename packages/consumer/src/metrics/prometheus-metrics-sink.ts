import { createRequire } from 'node:module';
import type { Clock, Logger } from '@kcl/core';
import { noopLogger, OptionProblems, systemClock } from '@kcl/core';
import type { MetricDatum, MetricsLevel, MetricsSink, MetricsSinkContext } from './metrics-sink.js';
import { isMetricsLevelEnabled, METRICS_LEVELS } from './metrics-sink.js';
import {
  genericMapping,
  LABEL_DIMENSIONS,
  type LabelName,
  PROMETHEUS_METRIC_MAPPING,
  type PrometheusMetricMapping,
} from './prometheus-metric-mapping.js';

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
  const check = new OptionProblems('@kcl/consumer createPrometheusMetricsSink');
  const given = (options ?? {}) as Partial<PrometheusMetricsSinkOptions>;
  const registry = check.optionalObjectWith<PrometheusRegistry>(
    'registry',
    given.registry,
    ['metrics', 'getSingleMetric'],
    'a prom-client Registry',
  );
  const prefix = given.prefix ?? 'kcl_';
  if (typeof prefix !== 'string' || (prefix !== '' && !METRIC_NAME.test(prefix))) {
    check.add(
      `prefix ${JSON.stringify(prefix)} is not a valid start of a Prometheus metric name ([a-zA-Z_:][a-zA-Z0-9_:]*)`,
    );
  }
  const level = check.oneOf('level', given.level, METRICS_LEVELS, 'DETAILED');
  const staleAfterMs = check.integer('staleAfterMs', given.staleAfterMs, 300_000, { min: 1 });
  const buckets = given.buckets ?? DEFAULT_BUCKETS;
  if (
    !Array.isArray(buckets) ||
    buckets.length === 0 ||
    buckets.some(
      (bucket, index) => !Number.isFinite(bucket) || (index > 0 && bucket <= (buckets[index - 1] as number)),
    )
  ) {
    check.add('buckets must be a non-empty list of ascending finite numbers (seconds)');
  }
  const clock = given.clock === undefined ? null : check.clock('clock', given.clock, systemClock);
  const logger = given.logger === undefined ? null : check.logger('logger', given.logger, noopLogger);
  let client: PromClient | null = null;
  try {
    client = loadPromClient();
  } catch (error) {
    check.add(
      `prom-client could not be loaded (${(error instanceof Error ? error.message : String(error)).split('\n')[0]}): install it to use the Prometheus sink`,
    );
  }
  check.throwIfAny();
  return new PrometheusSink(
    client as PromClient,
    registry ?? ((client as PromClient).register as unknown as PrometheusRegistry),
    { prefix, level, staleAfterMs, buckets: [...buckets], clock, logger },
  );
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
