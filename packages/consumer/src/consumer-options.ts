import { hostname } from 'node:os';
import type { KinesisClient } from '@aws-sdk/client-kinesis';
import type { Clock, KclEventListener, LeaseStore, Logger, RandomSource } from '@kcl/core';
import {
  noopLogger,
  OptionProblems,
  offersTransactionalCheckpoint,
  systemClock,
  systemRandom,
} from '@kcl/core';
import type { MetricsLevel, MetricsSink } from './metrics/metrics-sink.js';
import { METRICS_LEVELS } from './metrics/metrics-sink.js';
import type { PipelineOptions, ResolvedPipelineOptions } from './pipeline/pipeline-options.js';
import { resolvePipelineOptions } from './pipeline/pipeline-options.js';
import type { ProcessingErrorHandler, RecordProcessorFactory } from './processing/record-processor.js';
import {
  checkMultiStream,
  type FormerStreamsStrategy,
  type InitialPosition,
  isInitialPosition,
  type ResolvedMultiStream,
  STREAM_ARN,
  STREAM_NAME,
  type StreamConfig,
  type StreamTracker,
} from './streams/stream-options.js';

export type { InitialPosition } from './streams/stream-options.js';

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

/**
 * A client, as opposed to settings for one. Recognised by its `send` method rather than `instanceof`:
 * an application's `@aws-sdk/client-kinesis` may be another copy than the one kcl resolves, and its
 * client must still be used as given (not mistaken for settings and replaced by a default client).
 */
export function isKinesisClient(value: KinesisClient | KinesisClientSettings): value is KinesisClient {
  return typeof (value as { send?: unknown }).send === 'function';
}

/**
 * How shards are read. `polling` (the default): GetRecords, shared with every other reader of the
 * stream (2 MB/s per shard between them, 5 calls per second). `fanout`: enhanced fan-out — a
 * registered stream consumer with SubscribeToShard, its own 2 MB/s per shard and records pushed
 * within about 70 ms.
 */
export type RetrievalOptions =
  | { readonly mode: 'polling' }
  | {
      readonly mode: 'fanout';
      /** The registered stream consumer's name; registered (and waited for) when missing. Default: the application name. */
      readonly consumerName?: string;
      /** An already registered consumer's ARN: used as given, nothing is registered. */
      readonly consumerArn?: string;
      /** A subscription is renewed after this long (Kinesis ends one at 5 minutes). Default 290 000. */
      readonly subscriptionLifetimeMs?: number;
      /** A subscription that delivers no event for this long (Kinesis sends one every 5 s) is started again. Default 35 000. */
      readonly idleTimeoutMs?: number;
      /** While a shard's events come empty, how often to check (ListShards) whether it was closed without its final event. Default 30 000. */
      readonly closedShardCheckIntervalMs?: number;
      /** How long the start waits for the consumer to become ACTIVE. Default 300 000. */
      readonly registrationTimeoutMs?: number;
    };

/** `retrieval` checked, with its defaults. */
export type ResolvedRetrieval =
  | { readonly mode: 'polling' }
  | {
      readonly mode: 'fanout';
      readonly consumerName: string;
      readonly consumerArn: string | null;
      readonly subscriptionLifetimeMs: number;
      readonly idleTimeoutMs: number;
      readonly closedShardCheckIntervalMs: number;
      readonly registrationTimeoutMs: number;
    };

export interface ConsumerOptions {
  /** The stream to read, by name… */
  readonly streamName?: string;
  /** …or by ARN (give exactly one of `streamName`, `streamArn`, `streams`, `streamTracker`). */
  readonly streamArn?: string;
  /**
   * Several streams, one application: their leases share the lease table and one balance, with keys
   * in the Java KCL's multi-stream format (`account:stream:creationEpoch:shardId`).
   */
  readonly streams?: readonly StreamConfig[];
  /** Several streams, asked again every `streamSyncIntervalMs` (streams added and removed at run time). */
  readonly streamTracker?: StreamTracker;
  /** Several streams: how often the list is read again and new streams get their leases. Default 60 000. */
  readonly streamSyncIntervalMs?: number;
  /**
   * Several streams: what happens to the leases of a stream no longer listed. Default
   * `{ strategy: 'auto', waitMs: 3_600_000 }`: read on for an hour, then deleted.
   */
  readonly formerStreams?: FormerStreamsStrategy;
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
  /**
   * Steal by cooperative hand-off (default true): the worker asks the owner to hand the lease over;
   * the owner finishes its batch, checkpoints in `shutdownRequested` and passes the lease on, so no
   * record is processed twice and never by two workers at once. A hand-off not completed within
   * `handoffTimeoutMs` falls back to a plain steal. false: steal directly (as workers before hand-offs
   * did); a worker answers hand-offs it is asked for either way.
   */
  readonly handoff?: boolean;
  /**
   * How long a requested hand-off may take before the requester steals the lease anyway; below
   * `leaseExpiryMs`. Default `leaseExpiryMs` / 2.
   */
  readonly handoffTimeoutMs?: number;
  /** How often a requester checks its pending hand-offs. Default `handoffTimeoutMs` / 4, at most 500. */
  readonly handoffPollIntervalMs?: number;
  /** Wait between GetRecords calls when a shard is caught up. Default 500. */
  readonly pollIntervalMs?: number;
  /** Records per GetRecords call, 1 … 10 000. Default 10 000. */
  readonly maxRecords?: number;
  /**
   * Tie worker liveness to database sessions when the store can (`capabilities.sessionLiveness`:
   * PostgreSQL and MySQL/MariaDB stores that enable sessions): a worker whose process dies is noticed
   * within `livenessCheckIntervalMs` and its leases are taken at once instead of after `leaseExpiryMs`.
   * Each worker then holds one database connection of its own. Default true (used when the store can).
   */
  readonly sessionLiveness?: boolean;
  /**
   * The processors write their results and their checkpoints in one transaction
   * (`checkpointer.transaction`, exactly-once processing; with `pipeline`, `handleBatch` gets the
   * transaction). Needs a lease store that can (`capabilities.transactionalCheckpoint`:
   * `@kcl/store-sql`); with another store `createConsumer` throws a `ConfigurationError`, and so it
   * does for a pipeline whose batches may commit out of shard order (`batchers.concurrency` above 1,
   * `processors.concurrency` above 1 with `handleMessage`) or without `handleBatch`; and a batch whose
   * checkpoint could not reach its last message (messages given different `batchKey`s) fails with
   * `InvalidCheckpointError` instead of committing. Default false.
   */
  readonly exactlyOnce?: boolean;
  /** How often a worker asks which workers still hold their database session. Default 1 000. */
  readonly livenessCheckIntervalMs?: number;
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
  /** Polling (default) or enhanced fan-out. */
  readonly retrieval?: RetrievalOptions;
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
  /** The one stream read; null when the application reads several (`multiStream`). */
  readonly streamIdentity: { readonly streamName: string } | { readonly streamArn: string } | null;
  readonly multiStream: ResolvedMultiStream | null;
  readonly retrieval: ResolvedRetrieval;
  readonly applicationName: string;
  readonly workerId: string;
  readonly initialPosition: InitialPosition;
  readonly leaseRenewIntervalMs: number;
  readonly leaseExpiryMs: number;
  readonly rebalanceIntervalMs: number;
  readonly maxLeasesToSteal: number;
  readonly maxLeasesForWorker: number;
  readonly handoff: boolean;
  readonly handoffTimeoutMs: number;
  readonly handoffPollIntervalMs: number;
  readonly sessionLiveness: boolean;
  readonly exactlyOnce: boolean;
  readonly livenessCheckIntervalMs: number;
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
  handoff: true,
  /** The longest default interval between checks of a pending hand-off. */
  handoffPollIntervalMs: 500,
  pollIntervalMs: 500,
  maxRecords: 10_000,
  parentPollIntervalMs: 2_000,
  shardSyncIntervalMs: 60_000,
  leaseCleanupIntervalMs: 60_000,
  shutdownTimeoutMs: 30_000,
  storeCallTimeoutMs: 10_000,
  kinesisCallTimeoutMs: 30_000,
} as const;

const ARN = STREAM_ARN;

/** Every key of `ConsumerOptions`; the `Record` type keeps the list and the interface in step. */
const CONSUMER_OPTION_KEY_SET: Readonly<Record<keyof ConsumerOptions, true>> = {
  streamName: true,
  streamArn: true,
  streams: true,
  streamTracker: true,
  streamSyncIntervalMs: true,
  formerStreams: true,
  applicationName: true,
  workerId: true,
  kinesis: true,
  leaseStore: true,
  initialPosition: true,
  leaseRenewIntervalMs: true,
  leaseExpiryMs: true,
  rebalanceIntervalMs: true,
  maxLeasesToSteal: true,
  maxLeasesForWorker: true,
  handoff: true,
  handoffTimeoutMs: true,
  handoffPollIntervalMs: true,
  pollIntervalMs: true,
  maxRecords: true,
  sessionLiveness: true,
  livenessCheckIntervalMs: true,
  exactlyOnce: true,
  parentPollIntervalMs: true,
  shardSyncIntervalMs: true,
  leaseCleanupIntervalMs: true,
  shutdownTimeoutMs: true,
  storeCallTimeoutMs: true,
  kinesisCallTimeoutMs: true,
  callProcessRecordsEvenForEmptyRecordList: true,
  processor: true,
  pipeline: true,
  retrieval: true,
  onProcessingError: true,
  processingRetry: true,
  kinesisRetry: true,
  logger: true,
  onEvent: true,
  metrics: true,
  metricsLevel: true,
  signal: true,
  clock: true,
  random: true,
};
const CONSUMER_OPTION_KEYS = Object.keys(CONSUMER_OPTION_KEY_SET);

/**
 * Everything `createConsumer` takes from its options, checked once: the settings, and the parts it
 * is given (processor or pipeline, metrics sink, clock, logger, random source).
 */
export interface ConsumerSetup {
  readonly options: ResolvedConsumerOptions;
  /** The processor factory, or null when the consumer runs `pipeline`. */
  readonly processor: RecordProcessorFactory | null;
  /** The pipeline options, resolved, or null when the consumer runs `processor`. */
  readonly pipeline: ResolvedPipelineOptions | null;
  readonly onProcessingError: ProcessingErrorHandler | null;
  readonly metrics: MetricsSink | null;
  readonly metricsLevel: MetricsLevel | undefined;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly random: RandomSource;
}

/** Checks every option and fills in defaults; throws one `ConfigurationError` listing every problem. */
export function resolveConsumerOptions(
  options: ConsumerOptions,
  random: RandomSource = options?.random ?? systemRandom,
): ResolvedConsumerOptions {
  return resolveConsumerSetup(options, random).options;
}

/**
 * `resolveConsumerOptions`, and the parts `createConsumer` is given, checked in the same round (one
 * `ConfigurationError` for all). `workerRandom` draws the default worker id.
 */
export function resolveConsumerSetup(options: ConsumerOptions, workerRandom?: RandomSource): ConsumerSetup {
  const check = new OptionProblems('@kcl/consumer createConsumer');
  const given = (options ?? {}) as Partial<ConsumerOptions>;
  check.unknownKeys('', given, CONSUMER_OPTION_KEYS);
  const initialPosition = checkInitialPosition(check, given.initialPosition);
  const multiStream = checkMultiStream(check, given, initialPosition);
  const streamIdentity = multiStream === null ? checkStream(check, given) : null;
  if (multiStream !== null && (given.streamName !== undefined || given.streamArn !== undefined)) {
    check.add(
      `${given.streamName !== undefined ? 'streamName' : 'streamArn'} and ${given.streams !== undefined ? 'streams' : 'streamTracker'} are both set: give one stream, or several`,
    );
  }
  const applicationName = check.string(
    'applicationName',
    given.applicationName,
    undefined,
    'it names the application whose leases the store holds',
  );
  checkLeaseStore(check, given, applicationName);
  const workerId = given.workerId === undefined ? undefined : check.string('workerId', given.workerId);
  if (given.kinesis === undefined || given.kinesis === null || typeof given.kinesis !== 'object') {
    check.add('kinesis is required: a KinesisClient or { region, endpoint?, credentials? }');
  }

  let pipeline: ResolvedPipelineOptions | null = null;
  if (given.processor !== undefined && given.pipeline !== undefined) {
    check.add('processor and pipeline are both set: give exactly one');
  } else if (given.pipeline !== undefined) {
    pipeline = resolvePipelineOptions(given.pipeline, check.within('pipeline'));
  } else if (typeof given.processor !== 'function') {
    check.add('processor (a function (shardId, context) => RecordProcessor) or pipeline is required');
  }
  const metrics = check.optionalObjectWith<MetricsSink>(
    'metrics',
    given.metrics,
    ['record'],
    'a MetricsSink, e.g. createCloudWatchMetricsSink(…)',
  );
  const metricsLevel =
    given.metricsLevel === undefined
      ? undefined
      : check.oneOf('metricsLevel', given.metricsLevel, METRICS_LEVELS, 'DETAILED');

  const leaseRenewIntervalMs = check.integer(
    'leaseRenewIntervalMs',
    given.leaseRenewIntervalMs,
    CONSUMER_DEFAULTS.leaseRenewIntervalMs,
    { min: 1 },
  );
  const leaseExpiryMs = check.integer('leaseExpiryMs', given.leaseExpiryMs, CONSUMER_DEFAULTS.leaseExpiryMs, {
    min: 1,
  });
  if (leaseExpiryMs <= leaseRenewIntervalMs) {
    check.add(
      `leaseExpiryMs (${leaseExpiryMs}) must exceed leaseRenewIntervalMs (${leaseRenewIntervalMs}), or every lease expires before it is renewed; 1.5 × the renew interval is typical`,
    );
  }
  const storeCallTimeoutMs = check.integer(
    'storeCallTimeoutMs',
    given.storeCallTimeoutMs,
    Math.min(CONSUMER_DEFAULTS.storeCallTimeoutMs, leaseRenewIntervalMs),
    { min: 1 },
  );
  if (given.storeCallTimeoutMs !== undefined && storeCallTimeoutMs >= leaseExpiryMs) {
    check.add(
      `storeCallTimeoutMs (${storeCallTimeoutMs}) must be below leaseExpiryMs (${leaseExpiryMs}): a renewal that may take longer than the lease lasts cannot keep it`,
    );
  }
  const handoffTimeoutMs = check.integer(
    'handoffTimeoutMs',
    given.handoffTimeoutMs,
    Math.max(1, Math.floor(leaseExpiryMs / 2)),
    { min: 1 },
  );
  if (handoffTimeoutMs >= leaseExpiryMs) {
    check.add(
      `handoffTimeoutMs (${handoffTimeoutMs}) must be below leaseExpiryMs (${leaseExpiryMs}): a hand-off that waits longer than a lease lasts cannot be told from a dead owner; leaseExpiryMs / 2 is the default`,
    );
  }
  const handoffPollIntervalMs = check.integer(
    'handoffPollIntervalMs',
    given.handoffPollIntervalMs,
    Math.max(1, Math.min(CONSUMER_DEFAULTS.handoffPollIntervalMs, Math.floor(handoffTimeoutMs / 4))),
    { min: 1 },
  );
  if (given.handoffPollIntervalMs !== undefined && handoffPollIntervalMs >= handoffTimeoutMs) {
    check.add(
      `handoffPollIntervalMs (${handoffPollIntervalMs}) must be below handoffTimeoutMs (${handoffTimeoutMs}): a pending hand-off is checked at least once before it times out`,
    );
  }
  const handoff = check.boolean('handoff', given.handoff, CONSUMER_DEFAULTS.handoff);
  const sessionLiveness = check.boolean('sessionLiveness', given.sessionLiveness, true);
  const exactlyOnce = check.boolean('exactlyOnce', given.exactlyOnce, false);
  if (exactlyOnce && pipeline !== null) checkExactlyOncePipeline(check, pipeline);
  if (
    exactlyOnce &&
    isLeaseStoreShaped(given.leaseStore) &&
    !offersTransactionalCheckpoint(given.leaseStore)
  ) {
    check.add(
      `exactlyOnce needs a lease store that writes checkpoints in the application's transaction (capabilities.transactionalCheckpoint), and ${given.leaseStore.description} does not: use a @kcl/store-sql store (PostgreSQL, MySQL/MariaDB or SQLite), or drop exactlyOnce for at-least-once processing`,
    );
  }
  const livenessCheckIntervalMs = check.integer(
    'livenessCheckIntervalMs',
    given.livenessCheckIntervalMs,
    1_000,
    { min: 1 },
  );
  const integerOption = (name: IntegerOption, min = 1): number =>
    check.integer(name, given[name], CONSUMER_DEFAULTS[name], { min });
  const settings = {
    rebalanceIntervalMs: integerOption('rebalanceIntervalMs'),
    maxLeasesToSteal: integerOption('maxLeasesToSteal', 0),
    maxLeasesForWorker:
      check.optionalInteger('maxLeasesForWorker', given.maxLeasesForWorker, { min: 1 }) ??
      CONSUMER_DEFAULTS.maxLeasesForWorker,
    pollIntervalMs: integerOption('pollIntervalMs', 0),
    maxRecords: check.integer('maxRecords', given.maxRecords, CONSUMER_DEFAULTS.maxRecords, {
      min: 1,
      max: 10_000,
    }),
    parentPollIntervalMs: integerOption('parentPollIntervalMs'),
    shardSyncIntervalMs: integerOption('shardSyncIntervalMs'),
    leaseCleanupIntervalMs: integerOption('leaseCleanupIntervalMs'),
    shutdownTimeoutMs: integerOption('shutdownTimeoutMs', 0),
    kinesisCallTimeoutMs: integerOption('kinesisCallTimeoutMs'),
  };
  const retrieval = checkRetrieval(check, given.retrieval, applicationName);
  if (multiStream !== null && retrieval.mode === 'fanout' && retrieval.consumerArn !== null) {
    check.add(
      'retrieval.consumerArn names the stream consumer of one stream; with several streams give retrieval.consumerName (one consumer of that name is registered on each stream)',
    );
  }
  const processingRetry = check.retryDelays('processingRetry', given.processingRetry, {
    initialMs: 500,
    maxMs: 30_000,
  });
  const kinesisRetry = check.retryDelays('kinesisRetry', given.kinesisRetry, {
    initialMs: 200,
    maxMs: 10_000,
  });
  const onProcessingError = check.optionalFunction<ProcessingErrorHandler>(
    'onProcessingError',
    given.onProcessingError,
    '(error, context) => "retry" | "skip"',
  );
  check.signal('signal', given.signal);
  const clock = check.clock('clock', given.clock, systemClock);
  const logger = check.logger('logger', given.logger, noopLogger);
  const random = check.random('random', given.random, systemRandom);
  check.throwIfAny();

  return {
    options: {
      streamIdentity,
      multiStream,
      retrieval,
      applicationName,
      workerId: workerId ?? defaultWorkerId(workerRandom ?? random),
      initialPosition,
      leaseRenewIntervalMs,
      leaseExpiryMs,
      handoff,
      handoffTimeoutMs,
      handoffPollIntervalMs,
      sessionLiveness,
      exactlyOnce,
      livenessCheckIntervalMs,
      ...settings,
      storeCallTimeoutMs,
      callProcessRecordsEvenForEmptyRecordList: given.callProcessRecordsEvenForEmptyRecordList ?? false,
      processingRetry,
      kinesisRetry,
    },
    processor: pipeline === null ? (given.processor as RecordProcessorFactory) : null,
    pipeline,
    onProcessingError: onProcessingError ?? null,
    metrics: metrics ?? null,
    metricsLevel,
    clock,
    logger,
    random,
  };
}

/** The options checked with `integerOption`: whole numbers with a default. */
type IntegerOption =
  | 'rebalanceIntervalMs'
  | 'maxLeasesToSteal'
  | 'pollIntervalMs'
  | 'parentPollIntervalMs'
  | 'shardSyncIntervalMs'
  | 'leaseCleanupIntervalMs'
  | 'shutdownTimeoutMs'
  | 'kinesisCallTimeoutMs';

/** Exactly one of `streamName` and `streamArn`, well formed. */
function checkStream(
  check: OptionProblems,
  given: Partial<ConsumerOptions>,
): ResolvedConsumerOptions['streamIdentity'] | null {
  const hasName = given.streamName !== undefined;
  const hasArn = given.streamArn !== undefined;
  if (hasName === hasArn) {
    check.add(
      hasName
        ? 'streamName and streamArn are both set: give exactly one'
        : 'streamName or streamArn is required (the stream to consume)',
    );
    return null;
  }
  if (hasName) {
    if (typeof given.streamName === 'string' && STREAM_NAME.test(given.streamName)) {
      return { streamName: given.streamName };
    }
    check.add(
      `streamName ${JSON.stringify(given.streamName)} is not a valid stream name (1–128 of A–Z a–z 0–9 _ . -)`,
    );
    return null;
  }
  if (typeof given.streamArn === 'string' && ARN.test(given.streamArn)) return { streamArn: given.streamArn };
  check.add(
    `streamArn ${JSON.stringify(given.streamArn)} is not a Kinesis stream ARN (arn:aws:kinesis:<region>:<account>:stream/<name>)`,
  );
  return null;
}

/**
 * With `exactlyOnce`, a pipeline commits through `batch.transaction`: only batches handed over one at a
 * time in shard order make that exactly-once (ARCHITECTURE §6), so other settings are refused.
 */
function checkExactlyOncePipeline(check: OptionProblems, pipeline: ResolvedPipelineOptions): void {
  if (pipeline.handleBatch === null) {
    check.add(
      'exactlyOnce with pipeline needs pipeline.handleBatch, which writes through batch.transaction(…)',
    );
  }
  if (pipeline.batchers.concurrency > 1) {
    check.add(
      `exactlyOnce needs pipeline.batchers.concurrency 1 (got ${pipeline.batchers.concurrency}): a batch that commits before an earlier one cannot move the checkpoint past the earlier one's messages, so its rows would be at-least-once`,
    );
  }
  if (pipeline.handleMessage !== null && pipeline.processors.concurrency > 1) {
    check.add(
      `exactlyOnce needs pipeline.processors.concurrency 1 with handleMessage (got ${pipeline.processors.concurrency}): messages must reach the batches in shard order`,
    );
  }
}

/** Whether `store` is an object with capabilities to read (checkLeaseStore reports the rest). */
function isLeaseStoreShaped(store: unknown): store is LeaseStore {
  return typeof store === 'object' && store !== null && 'capabilities' in store;
}

/** A v2 `LeaseStore`, bound to the same application. */
function checkLeaseStore(
  check: OptionProblems,
  given: Partial<ConsumerOptions>,
  applicationName: string,
): void {
  const store = given.leaseStore;
  if (store === undefined || store === null) {
    check.add(
      'leaseStore is required: any LeaseStore, e.g. createSqlLeaseStore(…) or createDynamoLeaseStore(…)',
    );
    return;
  }
  if (applicationName !== '' && store.applicationName !== applicationName) {
    check.add(
      `leaseStore is bound to application ${JSON.stringify(store.applicationName)} but applicationName is ${JSON.stringify(applicationName)}: create the store with the same applicationName`,
    );
  }
  if (store.specificationVersion !== 'v2') {
    check.add(
      `leaseStore implements the LeaseStore specification ${JSON.stringify(store.specificationVersion)}; this consumer needs v2: use store packages of the same kcl release`,
    );
  }
}

function checkInitialPosition(check: OptionProblems, given: InitialPosition | undefined): InitialPosition {
  const position = given ?? CONSUMER_DEFAULTS.initialPosition;
  if (!isInitialPosition(position)) {
    check.add(
      `initialPosition ${JSON.stringify(position)} must be 'TRIM_HORIZON', 'LATEST' or { timestamp: Date }`,
    );
  }
  return position;
}

function defaultWorkerId(random: RandomSource): string {
  const suffix = Math.floor(random() * 0xffffffff)
    .toString(16)
    .padStart(8, '0');
  return `${hostname()}:${process.pid}:${suffix}`;
}

const CONSUMER_NAME = /^[a-zA-Z0-9_.-]{1,128}$/;
const CONSUMER_ARN =
  /^arn:aws[a-z-]*:kinesis:[a-z0-9-]+:\d{12}:stream\/[A-Za-z0-9_.-]{1,128}\/consumer\/[A-Za-z0-9_.-]{1,128}:\d+$/;

function checkRetrieval(check: OptionProblems, given: unknown, applicationName: string): ResolvedRetrieval {
  if (given === undefined) return { mode: 'polling' };
  if (typeof given !== 'object' || given === null) {
    check.add("retrieval must be { mode: 'polling' } or { mode: 'fanout', consumerName? }");
    return { mode: 'polling' };
  }
  const options = given as Record<string, unknown>;
  check.unknownKeys('retrieval', options, [...RETRIEVAL_KEYS]);
  if (options.mode === undefined) {
    check.add("retrieval.mode is required: 'polling' or 'fanout'");
    return { mode: 'polling' };
  }
  const mode = check.oneOf('retrieval.mode', options.mode, ['polling', 'fanout'] as const, 'polling');
  if (mode === 'polling') {
    const fanoutKeys = Object.keys(options).filter(
      (key) => key !== 'mode' && RETRIEVAL_KEYS.has(key) && options[key] !== undefined,
    );
    if (fanoutKeys.length > 0) {
      check.add(`retrieval.${fanoutKeys.join(', retrieval.')} only apply to mode 'fanout'`);
    }
    return { mode };
  }
  const within = check.within('retrieval');
  const consumerName = within.string('consumerName', options.consumerName, applicationName.slice(0, 128));
  if (options.consumerName !== undefined && !CONSUMER_NAME.test(consumerName)) {
    check.add(
      `retrieval.consumerName must be 1–128 letters, digits, '_', '.' or '-' (a Kinesis stream consumer name), got ${JSON.stringify(consumerName)}`,
    );
  } else if (options.consumerName === undefined && !CONSUMER_NAME.test(consumerName)) {
    check.add(
      `retrieval.consumerName is needed: the application name ${JSON.stringify(applicationName)} is not a valid stream consumer name (1–128 letters, digits, '_', '.' or '-')`,
    );
  }
  let consumerArn: string | null = null;
  if (options.consumerArn !== undefined) {
    consumerArn = within.string('consumerArn', options.consumerArn);
    if (consumerArn !== '' && !CONSUMER_ARN.test(consumerArn)) {
      check.add(
        `retrieval.consumerArn must be a stream consumer ARN (arn:aws:kinesis:<region>:<account>:stream/<stream>/consumer/<name>:<timestamp>), got ${JSON.stringify(consumerArn)}`,
      );
    }
  }
  const subscriptionLifetimeMs = within.integer(
    'subscriptionLifetimeMs',
    options.subscriptionLifetimeMs,
    290_000,
    {
      min: 1_000,
      max: 300_000,
    },
  );
  // Kinesis sends an event at least every 5 s (kinesis-local every second): below that, every
  // subscription would end as idle.
  const idleTimeoutMs = within.integer('idleTimeoutMs', options.idleTimeoutMs, 35_000, { min: 1_000 });
  const closedShardCheckIntervalMs = within.integer(
    'closedShardCheckIntervalMs',
    options.closedShardCheckIntervalMs,
    30_000,
    { min: 100 },
  );
  const registrationTimeoutMs = within.integer(
    'registrationTimeoutMs',
    options.registrationTimeoutMs,
    300_000,
    {
      min: 1,
    },
  );
  return {
    mode,
    consumerName,
    consumerArn,
    subscriptionLifetimeMs,
    idleTimeoutMs,
    closedShardCheckIntervalMs,
    registrationTimeoutMs,
  };
}

const RETRIEVAL_KEYS = new Set([
  'mode',
  'consumerName',
  'consumerArn',
  'subscriptionLifetimeMs',
  'idleTimeoutMs',
  'closedShardCheckIntervalMs',
  'registrationTimeoutMs',
]);
