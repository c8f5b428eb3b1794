import type { MetricDatum as CloudWatchDatum } from '@aws-sdk/client-cloudwatch';
import type { MetricUnit } from './metrics-sink.js';

/** The data of one (name, unit, dimensions) pair gathered since the last publication. */
export interface StatisticSet {
  readonly name: string;
  readonly unit: MetricUnit;
  readonly dimensions: ReadonlyArray<readonly [string, string]>;
  readonly timestamp: number;
  sampleCount: number;
  sum: number;
  minimum: number;
  maximum: number;
}

export type CloudWatchModule = typeof import('@aws-sdk/client-cloudwatch');

/** PutMetricData accepts 1 MB; stay well below it. */
const MAX_REQUEST_BYTES = 900_000;
const THROTTLING_ERRORS = new Set([
  'Throttling',
  'ThrottlingException',
  'ThrottledException',
  'RequestThrottledException',
  'TooManyRequestsException',
  'RequestLimitExceeded',
  'RequestThrottled',
  'SlowDown',
]);

let cloudWatchModule: Promise<CloudWatchModule> | null = null;

/** Loaded on first publication only, so `@kcl/consumer` works without the optional peer dependency. */
export function loadCloudWatch(): Promise<CloudWatchModule> {
  cloudWatchModule ??= import('@aws-sdk/client-cloudwatch');
  return cloudWatchModule;
}

/** Splits into requests of at most `maxBatchSize` data and well under the request size limit. */
export function* requestBatches(
  sets: readonly StatisticSet[],
  maxBatchSize: number,
): Generator<CloudWatchDatum[]> {
  let batch: CloudWatchDatum[] = [];
  let bytes = 0;
  for (const set of sets) {
    const datum: CloudWatchDatum = {
      MetricName: set.name,
      Dimensions: set.dimensions.map(([Name, Value]) => ({ Name, Value })),
      Timestamp: new Date(set.timestamp),
      StatisticValues: {
        SampleCount: set.sampleCount,
        Sum: set.sum,
        Minimum: set.minimum,
        Maximum: set.maximum,
      },
      Unit: set.unit,
    };
    const size = JSON.stringify(datum).length;
    if (batch.length > 0 && (batch.length >= maxBatchSize || bytes + size > MAX_REQUEST_BYTES)) {
      yield batch;
      batch = [];
      bytes = 0;
    }
    batch.push(datum);
    bytes += size;
  }
  if (batch.length > 0) yield batch;
}

/** Whether a failed PutMetricData is worth another attempt: throttling, a server fault, no answer at all. */
export function isRetryablePublication(error: unknown): boolean {
  if (error === null || typeof error !== 'object') return true;
  const details = error as {
    readonly name?: unknown;
    readonly $retryable?: unknown;
    readonly $fault?: unknown;
    readonly $metadata?: { readonly httpStatusCode?: number };
  };
  if (details.$retryable !== undefined && details.$retryable !== null && details.$retryable !== false)
    return true;
  if (typeof details.name === 'string' && THROTTLING_ERRORS.has(details.name)) return true;
  if (details.$fault === 'server') return true;
  const status = details.$metadata?.httpStatusCode;
  // No status at all: the request never got an answer (network failure, timeout).
  return status === undefined || status === 429 || status >= 500;
}
