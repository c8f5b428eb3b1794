import type { Clock, Logger } from '@kcl/core';

/** How much a metric says: SUMMARY metrics are the few an operator alarms on; DETAILED ones add per-call detail. */
export type MetricsLevel = 'NONE' | 'SUMMARY' | 'DETAILED';

export type MetricUnit = 'Count' | 'Milliseconds' | 'Bytes' | 'None';

/** One observation, named and dimensioned as the Java KCL names them (`MillisBehindLatest`, `ShardId`, …). */
export interface MetricDatum {
  readonly name: string;
  readonly value: number;
  readonly unit: MetricUnit;
  /** e.g. `{ Operation: 'ProcessTask', ShardId: 'shardId-000000000001' }` */
  readonly dimensions: Readonly<Record<string, string>>;
  readonly level: Exclude<MetricsLevel, 'NONE'>;
}

/** What a consumer tells the sink it publishes for (see `MetricsSink.attach`). */
export interface MetricsSinkContext {
  readonly applicationName: string;
  readonly workerId: string;
  readonly clock: Clock;
  readonly logger: Logger;
}

/** Where the consumer sends metrics. `record` must not block or throw: sinks buffer and publish on their own. */
export interface MetricsSink {
  record(datum: MetricDatum): void;
  /** Publishes what is buffered (called on stop). */
  flush?(): Promise<void>;
  /** The most the sink publishes; the consumer skips computing metrics above it. */
  readonly level?: MetricsLevel;
  /**
   * Called by `createConsumer` with the consumer's application name, worker id, clock and logger, so
   * a sink can default its namespace and share the consumer's clock.
   */
  attach?(context: MetricsSinkContext): void;
  /** Publishes what is buffered and stops the sink's timers. */
  close?(): Promise<void>;
}

const LEVEL_VALUE: Readonly<Record<MetricsLevel, number>> = {
  DETAILED: 9_000,
  SUMMARY: 10_000,
  NONE: Number.POSITIVE_INFINITY,
};

/**
 * True when a datum of `level` is published at the `configured` level (the Java KCL's rule: DETAILED
 * publishes everything, SUMMARY only SUMMARY metrics, NONE nothing).
 */
export function isMetricsLevelEnabled(
  configured: MetricsLevel,
  level: Exclude<MetricsLevel, 'NONE'>,
): boolean {
  return LEVEL_VALUE[level] >= LEVEL_VALUE[configured];
}

export const METRICS_LEVELS: readonly MetricsLevel[] = ['NONE', 'SUMMARY', 'DETAILED'];
