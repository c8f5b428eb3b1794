import { hostname } from 'node:os';
import type { KinesisClient } from '@aws-sdk/client-kinesis';
import type { Clock, KclEventListener, LeaseStore, Logger, RandomSource } from '@kcl/core';
import { ConfigurationError } from '@kcl/core';
import type { MetricsLevel, MetricsSink } from './metrics/metrics-sink.js';
import { METRICS_LEVELS } from './metrics/metrics-sink.js';
import type { PipelineOptions } from './pipeline/pipeline-options.js';
import { validatePipelineOptions } from './pipeline/pipeline-options.js';
import type { ProcessingErrorHandler, RecordProcessorFactory } from './record-processor.js';

/** Where a new application starts reading each shard. */
export type InitialPosition = 'TRIM_HORIZON' | 'LATEST' | { readonly timestamp: Date };

/** Settings for a Kinesis client the consumer builds (and closes) itself. */
export interface KinesisClientSettings {
  readonly region?: string;
  readonly endpoint?: string;
  readonly credentials?: {
    readonly accessKeyId: string;
    readonly secretAccessKey: string;
    readonly sessionToken?: string;
  };
}

export interface ConsumerOptions {
  /** The stream to read, by name… */
  readonly streamName?: string;
  /** …or by ARN (give exactly one). */
  readonly streamArn?: string;
  /** Names the application whose leases the store holds (one lease table namespace). */
  readonly applicationName: string;
  /** Unique per process. Stable ids let a restarted worker re-adopt its own leases. Default: host:pid:random. */
  readonly workerId?: string;
  /** A KinesisClient (give it `requestHandler: new NodeHttpHandler()` against local emulators), or settings for one. */
  readonly kinesis: KinesisClient | KinesisClientSettings;
  readonly leaseStore: LeaseStore;
  /** Where shards start when the application has no leases yet. Default LATEST (as the Java KCL). */
  readonly initialPosition?: InitialPosition;
  /** How often held leases are renewed. Default 30 000. */
  readonly leaseRenewIntervalMs?: number;
  /** A lease not renewed for this long is expired; must exceed the renew interval. Default 45 001. */
  readonly leaseExpiryMs?: number;
  /** How often the worker rebalances (±25% jitter). Default 6 000. */
  readonly rebalanceIntervalMs?: number;
  /** The most leases one rebalance steals from another worker. Default 1. */
  readonly maxLeasesToSteal?: number;
  /** The most leases this worker holds. Default unlimited. */
  readonly maxLeasesForWorker?: number;
  /** Wait between GetRecords calls when a shard is caught up. Default 500. */
  readonly pollIntervalMs?: number;
  /** Records per GetRecords call, 1 … 10 000. Default 10 000. */
  readonly maxRecords?: number;
  /** How often a child waiting on its parents checks them. Default 2 000. */
  readonly parentPollIntervalMs?: number;
  /** How often the lease set is audited for shards without a lease. Default 60 000. */
  readonly shardSyncIntervalMs?: number;
  /** How often finished parent leases are checked for deletion. Default 60 000. */
  readonly leaseCleanupIntervalMs?: number;
  /**
   * The longest a graceful stop takes: processors get until then to finish their batch and checkpoint
   * in `shutdownRequested`; whatever is still running then is abandoned (its leases expire for the
   * others). Default 30 000.
   */
  readonly shutdownTimeoutMs?: number;
  /**
   * The longest the runtime waits for one lease store call (renew, checkpoint, list, …) before it treats
   * the call as failed; must be below `leaseExpiryMs`. Default 10 000, or the renew interval if smaller.
   */
  readonly storeCallTimeoutMs?: number;
  /** The longest the runtime waits for one Kinesis call before it aborts and retries it. Default 30 000. */
  readonly kinesisCallTimeoutMs?: number;
  /** Call `processRecords` even for empty batches (for heartbeat-style processors). Default false. */
  readonly callProcessRecordsEvenForEmptyRecordList?: boolean;
  /** The KCL-style processor factory: one processor per lease incarnation (or use `pipeline`). */
  readonly processor?: RecordProcessorFactory;
  /** The batch pipeline, Broadway style (or use `processor`). */
  readonly pipeline?: PipelineOptions;
  /** Decides whether a batch whose processRecords threw is retried (default) or skipped. */
  readonly onProcessingError?: ProcessingErrorHandler;
  /** Backoff for a failing processRecords. Default 500 ms doubling to 30 s. */
  readonly processingRetry?: { readonly initialMs?: number; readonly maxMs?: number };
  /** Backoff for throttled or failing Kinesis calls. Default 200 ms doubling to 10 s. */
  readonly kinesisRetry?: { readonly initialMs?: number; readonly maxMs?: number };
  readonly logger?: Logger;
  readonly onEvent?: KclEventListener;
  readonly metrics?: MetricsSink;
  /** NONE, SUMMARY or DETAILED (default: the sink's level, else DETAILED). */
  readonly metricsLevel?: MetricsLevel;
  /** Stops the consumer gracefully when aborted. */
  readonly signal?: AbortSignal;
  readonly clock?: Clock;
  readonly random?: RandomSource;
}

export interface ResolvedConsumerOptions {
  readonly streamIdentity: { readonly streamName: string } | { readonly streamArn: string };
  readonly applicationName: string;
  readonly workerId: string;
  readonly initialPosition: InitialPosition;
  readonly leaseRenewIntervalMs: number;
  readonly leaseExpiryMs: number;
  readonly rebalanceIntervalMs: number;
  readonly maxLeasesToSteal: number;
  readonly maxLeasesForWorker: number;
  readonly pollIntervalMs: number;
  readonly maxRecords: number;
  readonly parentPollIntervalMs: number;
  readonly shardSyncIntervalMs: number;
  readonly leaseCleanupIntervalMs: number;
  readonly shutdownTimeoutMs: number;
  readonly storeCallTimeoutMs: number;
  readonly kinesisCallTimeoutMs: number;
  readonly callProcessRecordsEvenForEmptyRecordList: boolean;
  readonly processingRetry: { readonly initialMs: number; readonly maxMs: number };
  readonly kinesisRetry: { readonly initialMs: number; readonly maxMs: number };
}

export const CONSUMER_DEFAULTS = {
  initialPosition: 'LATEST',
  leaseRenewIntervalMs: 30_000,
  leaseExpiryMs: 45_001,
  rebalanceIntervalMs: 6_000,
  maxLeasesToSteal: 1,
  maxLeasesForWorker: Number.POSITIVE_INFINITY,
  pollIntervalMs: 500,
  maxRecords: 10_000,
  parentPollIntervalMs: 2_000,
  shardSyncIntervalMs: 60_000,
  leaseCleanupIntervalMs: 60_000,
  shutdownTimeoutMs: 30_000,
  storeCallTimeoutMs: 10_000,
  kinesisCallTimeoutMs: 30_000,
} as const;

const ARN = /^arn:aws[a-z-]*:kinesis:[a-z0-9-]+:\d{12}:stream\/[A-Za-z0-9_.-]{1,128}$/;
const STREAM_NAME = /^[A-Za-z0-9_.-]{1,128}$/;

/** Checks every option and fills in defaults; throws one `ConfigurationError` listing every problem. */
export function resolveConsumerOptions(
  options: ConsumerOptions,
  random: RandomSource,
): ResolvedConsumerOptions {
  const problems: string[] = [];
  const given = (options ?? {}) as Partial<ConsumerOptions>;

  const hasName = given.streamName !== undefined;
  const hasArn = given.streamArn !== undefined;
  if (hasName === hasArn) {
    problems.push(
      hasName
        ? 'streamName and streamArn are both set: give exactly one'
        : 'streamName or streamArn is required (the stream to consume)',
    );
  } else if (hasName && (typeof given.streamName !== 'string' || !STREAM_NAME.test(given.streamName))) {
    problems.push(
      `streamName ${JSON.stringify(given.streamName)} is not a valid stream name (1–128 of A–Z a–z 0–9 _ . -)`,
    );
  } else if (hasArn && (typeof given.streamArn !== 'string' || !ARN.test(given.streamArn))) {
    problems.push(
      `streamArn ${JSON.stringify(given.streamArn)} is not a Kinesis stream ARN (arn:aws:kinesis:<region>:<account>:stream/<name>)`,
    );
  }

  if (typeof given.applicationName !== 'string' || given.applicationName.trim() === '') {
    problems.push('applicationName is required: it names the application whose leases the store holds');
  } else if (given.leaseStore !== undefined && given.leaseStore.applicationName !== given.applicationName) {
    problems.push(
      `leaseStore is bound to application ${JSON.stringify(given.leaseStore.applicationName)} but applicationName is ${JSON.stringify(given.applicationName)}: create the store with the same applicationName`,
    );
  }
  if (given.workerId !== undefined && (typeof given.workerId !== 'string' || given.workerId.trim() === '')) {
    problems.push('workerId must be a non-empty string when given');
  }
  if (given.kinesis === undefined || given.kinesis === null || typeof given.kinesis !== 'object') {
    problems.push('kinesis is required: a KinesisClient or { region, endpoint?, credentials? }');
  }
  if (given.leaseStore === undefined || given.leaseStore === null) {
    problems.push(
      'leaseStore is required: any LeaseStore, e.g. createSqlLeaseStore(…) or createDynamoLeaseStore(…)',
    );
  } else if (given.leaseStore.specificationVersion !== 'v1') {
    problems.push(
      `leaseStore implements specification ${JSON.stringify(given.leaseStore.specificationVersion)}; this consumer needs v1`,
    );
  }

  if (given.processor !== undefined && given.pipeline !== undefined) {
    problems.push('processor and pipeline are both set: give exactly one');
  } else if (given.pipeline !== undefined) {
    problems.push(...validatePipelineOptions(given.pipeline));
  } else if (typeof given.processor !== 'function') {
    problems.push('processor (a function (shardId, context) => RecordProcessor) or pipeline is required');
  }
  if (given.metrics !== undefined && (given.metrics === null || typeof given.metrics.record !== 'function')) {
    problems.push(
      'metrics must be a MetricsSink: an object with record(datum), e.g. createCloudWatchMetricsSink(…)',
    );
  }
  if (given.metricsLevel !== undefined && !METRICS_LEVELS.includes(given.metricsLevel)) {
    problems.push(
      `metricsLevel must be one of ${METRICS_LEVELS.join(', ')}, got ${JSON.stringify(given.metricsLevel)}`,
    );
  }

  const initialPosition = given.initialPosition ?? CONSUMER_DEFAULTS.initialPosition;
  if (
    initialPosition !== 'TRIM_HORIZON' &&
    initialPosition !== 'LATEST' &&
    !(
      typeof initialPosition === 'object' &&
      initialPosition !== null &&
      initialPosition.timestamp instanceof Date &&
      !Number.isNaN(initialPosition.timestamp.getTime())
    )
  ) {
    problems.push(
      `initialPosition ${JSON.stringify(initialPosition)} must be 'TRIM_HORIZON', 'LATEST' or { timestamp: Date }`,
    );
  }

  const integer = (
    name: keyof ConsumerOptions,
    fallback: number,
    min: number,
    max = Number.MAX_SAFE_INTEGER,
  ): number => {
    const value = given[name];
    if (value === undefined) return fallback;
    if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
      problems.push(
        `${String(name)} must be an integer from ${min} to ${max === Number.MAX_SAFE_INTEGER ? '∞' : max}, got ${JSON.stringify(value)}`,
      );
      return fallback;
    }
    return value;
  };
  const leaseRenewIntervalMs = integer('leaseRenewIntervalMs', CONSUMER_DEFAULTS.leaseRenewIntervalMs, 1);
  const leaseExpiryMs = integer('leaseExpiryMs', CONSUMER_DEFAULTS.leaseExpiryMs, 1);
  if (leaseExpiryMs <= leaseRenewIntervalMs) {
    problems.push(
      `leaseExpiryMs (${leaseExpiryMs}) must exceed leaseRenewIntervalMs (${leaseRenewIntervalMs}), or every lease expires before it is renewed; 1.5 × the renew interval is typical`,
    );
  }
  const rebalanceIntervalMs = integer('rebalanceIntervalMs', CONSUMER_DEFAULTS.rebalanceIntervalMs, 1);
  const maxLeasesToSteal = integer('maxLeasesToSteal', CONSUMER_DEFAULTS.maxLeasesToSteal, 0);
  const maxLeasesForWorker =
    given.maxLeasesForWorker === undefined
      ? CONSUMER_DEFAULTS.maxLeasesForWorker
      : integer('maxLeasesForWorker', 0, 1);
  const pollIntervalMs = integer('pollIntervalMs', CONSUMER_DEFAULTS.pollIntervalMs, 0);
  const maxRecords = integer('maxRecords', CONSUMER_DEFAULTS.maxRecords, 1, 10_000);
  const parentPollIntervalMs = integer('parentPollIntervalMs', CONSUMER_DEFAULTS.parentPollIntervalMs, 1);
  const shardSyncIntervalMs = integer('shardSyncIntervalMs', CONSUMER_DEFAULTS.shardSyncIntervalMs, 1);
  const leaseCleanupIntervalMs = integer(
    'leaseCleanupIntervalMs',
    CONSUMER_DEFAULTS.leaseCleanupIntervalMs,
    1,
  );
  const shutdownTimeoutMs = integer('shutdownTimeoutMs', CONSUMER_DEFAULTS.shutdownTimeoutMs, 0);
  const storeCallTimeoutMs = integer(
    'storeCallTimeoutMs',
    Math.min(CONSUMER_DEFAULTS.storeCallTimeoutMs, leaseRenewIntervalMs),
    1,
  );
  if (given.storeCallTimeoutMs !== undefined && storeCallTimeoutMs >= leaseExpiryMs) {
    problems.push(
      `storeCallTimeoutMs (${storeCallTimeoutMs}) must be below leaseExpiryMs (${leaseExpiryMs}): a renewal that may take longer than the lease lasts cannot keep it`,
    );
  }
  const kinesisCallTimeoutMs = integer('kinesisCallTimeoutMs', CONSUMER_DEFAULTS.kinesisCallTimeoutMs, 1);

  const retry = (name: 'processingRetry' | 'kinesisRetry', initialMs: number, maxMs: number) => {
    const value = given[name];
    const resolved = { initialMs: value?.initialMs ?? initialMs, maxMs: value?.maxMs ?? maxMs };
    if (
      !Number.isFinite(resolved.initialMs) ||
      resolved.initialMs <= 0 ||
      !Number.isFinite(resolved.maxMs) ||
      resolved.maxMs < resolved.initialMs
    ) {
      problems.push(`${name} needs 0 < initialMs ≤ maxMs, got ${JSON.stringify(value)}`);
      return { initialMs, maxMs };
    }
    return resolved;
  };
  const processingRetry = retry('processingRetry', 500, 30_000);
  const kinesisRetry = retry('kinesisRetry', 200, 10_000);

  if (given.onProcessingError !== undefined && typeof given.onProcessingError !== 'function') {
    problems.push('onProcessingError must be a function (error, context) => "retry" | "skip"');
  }
  if (given.signal !== undefined && !(given.signal instanceof AbortSignal)) {
    problems.push('signal must be an AbortSignal');
  }

  if (problems.length > 0) throw new ConfigurationError('@kcl/consumer createConsumer', problems);

  return {
    streamIdentity: hasName
      ? { streamName: given.streamName as string }
      : { streamArn: given.streamArn as string },
    applicationName: given.applicationName as string,
    workerId: given.workerId ?? defaultWorkerId(random),
    initialPosition,
    leaseRenewIntervalMs,
    leaseExpiryMs,
    rebalanceIntervalMs,
    maxLeasesToSteal,
    maxLeasesForWorker,
    pollIntervalMs,
    maxRecords,
    parentPollIntervalMs,
    shardSyncIntervalMs,
    leaseCleanupIntervalMs,
    shutdownTimeoutMs,
    storeCallTimeoutMs,
    kinesisCallTimeoutMs,
    callProcessRecordsEvenForEmptyRecordList: given.callProcessRecordsEvenForEmptyRecordList ?? false,
    processingRetry,
    kinesisRetry,
  };
}

function defaultWorkerId(random: RandomSource): string {
  const suffix = Math.floor(random() * 0xffffffff)
    .toString(16)
    .padStart(8, '0');
  return `${hostname()}:${process.pid}:${suffix}`;
}
