import type { KinesisClient } from '@aws-sdk/client-kinesis';
import type {
  CloudWatchMetricsClient,
  Consumer,
  ConsumerOptions,
  MetricsSink,
  RecordProcessorFactory,
} from '@kcl/consumer';
import { createCloudWatchMetricsSink, createConsumer } from '@kcl/consumer';
import type { Clock, KclEventListener, LeaseStore, Logger, RandomSource } from '@kcl/core';
import {
  createClientForEndpoint,
  createCloudWatchClient,
  createKinesisClient,
  kinesisHttpVersion,
  requireRegion,
} from './aws-clients.js';
import type { MultiLangConfiguration } from './multilang-configuration.js';
import { openMultiLangLeaseStore } from './multilang-lease-store.js';
import { retrievalOptions } from './read-retrieval.js';

/**
 * What was opened for a daemon (clients, the lease store, the metrics sink), closed in the reverse
 * order; a failure to close one is logged and the others are still closed.
 */
export class OpenedResources {
  readonly #closers: (() => Promise<void> | void)[] = [];

  add(close: () => Promise<void> | void): void {
    this.#closers.push(close);
  }

  async closeAll(logger: Logger): Promise<void> {
    for (const close of this.#closers.splice(0).reverse()) {
      try {
        await close();
      } catch (error) {
        logger.warn('closing a client failed', { error });
      }
    }
  }
}

export interface MultiLangConsumerContext {
  readonly configuration: MultiLangConfiguration;
  readonly workingDirectory: string;
  readonly logger: Logger;
  readonly clock: Clock;
  readonly random: RandomSource;
  readonly processor: RecordProcessorFactory;
  readonly onEvent: KclEventListener;
  /** Given: used as they are and left open. */
  readonly kinesis?: KinesisClient | undefined;
  readonly leaseStore?: LeaseStore | undefined;
  readonly cloudWatch?: CloudWatchMetricsClient | undefined;
  /** Where everything opened here is registered, also when building fails half-way. */
  readonly resources: OpenedResources;
}

export interface MultiLangConsumer {
  readonly consumer: Consumer;
  /** The CloudWatch sink, when metrics are on. */
  readonly metrics: MetricsSink | null;
}

/** Builds the clients, the lease store and the metrics sink a configuration names, and the consumer on them. */
export async function buildMultiLangConsumer(context: MultiLangConsumerContext): Promise<MultiLangConsumer> {
  const kinesis = await openKinesisClient(context);
  const leaseStore = await openLeaseStoreOnce(context);
  await requireRegion(kinesis);
  const metrics = openMetricsSink(context);
  const consumer = createConsumer({
    ...consumerSettings(context.configuration),
    kinesis,
    leaseStore,
    processor: context.processor,
    ...(metrics === null ? {} : { metrics }),
    logger: context.logger,
    onEvent: context.onEvent,
    clock: context.clock,
    random: context.random,
  });
  return { consumer, metrics };
}

function onPlaceholderCredentials(logger: Logger): (endpoint: string | null) => void {
  return (endpoint) =>
    logger.warn('no AWS credentials found; using placeholder credentials for the local endpoint', {
      endpoint,
    });
}

async function openKinesisClient(context: MultiLangConsumerContext): Promise<KinesisClient> {
  if (context.kinesis !== undefined) return context.kinesis;
  const { configuration } = context;
  const client = await createClientForEndpoint(
    (credentials) =>
      createKinesisClient({
        region: configuration.region,
        endpoint: configuration.kinesisEndpoint,
        credentials,
        httpVersion: kinesisHttpVersion(configuration.retrieval.mode, configuration.kinesisEndpoint),
      }),
    configuration.kinesisCredentials,
    configuration.kinesisEndpoint,
    () => onPlaceholderCredentials(context.logger)(configuration.kinesisEndpoint),
  );
  context.resources.add(() => client.destroy());
  return client;
}

async function openLeaseStoreOnce(context: MultiLangConsumerContext): Promise<LeaseStore> {
  if (context.leaseStore !== undefined) return context.leaseStore;
  const store = await openMultiLangLeaseStore(context.configuration, {
    workingDirectory: context.workingDirectory,
    logger: context.logger,
    onPlaceholderCredentials: onPlaceholderCredentials(context.logger),
  });
  context.resources.add(() => store.close());
  return store;
}

/** CloudWatch metrics, published as the Java KCL publishes them (namespace = applicationName). */
function openMetricsSink(context: MultiLangConsumerContext): MetricsSink | null {
  const { configuration } = context;
  if (configuration.metrics.level === 'NONE') return null;
  let client = context.cloudWatch;
  if (client === undefined) {
    const built = createCloudWatchClient({
      region: configuration.region,
      credentials: configuration.cloudWatchCredentials,
    });
    context.resources.add(() => built.destroy());
    client = built;
  }
  const sink = createCloudWatchMetricsSink({
    client,
    level: configuration.metrics.level,
    bufferTimeMs: configuration.metrics.bufferTimeMs,
    maxQueueSize: configuration.metrics.maxQueueSize,
  });
  context.resources.add(() => sink.close());
  context.logger.info('CloudWatch metrics', {
    level: configuration.metrics.level,
    namespace: configuration.applicationName,
  });
  return sink;
}

/** The consumer's settings that come from the properties file. */
function consumerSettings(
  configuration: MultiLangConfiguration,
): Omit<ConsumerOptions, 'kinesis' | 'leaseStore' | 'processor'> {
  const { timings } = configuration;
  return {
    ...configuration.stream,
    applicationName: configuration.applicationName,
    ...(configuration.workerId === null ? {} : { workerId: configuration.workerId }),
    initialPosition: configuration.initialPosition,
    leaseRenewIntervalMs: timings.leaseRenewIntervalMs,
    leaseExpiryMs: timings.leaseExpiryMs,
    rebalanceIntervalMs: timings.rebalanceIntervalMs,
    maxLeasesToSteal: configuration.maxLeasesToSteal,
    ...(configuration.maxLeasesForWorker === null
      ? {}
      : { maxLeasesForWorker: configuration.maxLeasesForWorker }),
    retrieval: retrievalOptions(configuration.retrieval),
    pollIntervalMs: timings.pollIntervalMs,
    maxRecords: configuration.maxRecords,
    parentPollIntervalMs: timings.parentPollIntervalMs,
    shardSyncIntervalMs: timings.shardSyncIntervalMs,
    leaseCleanupIntervalMs: timings.shardSyncIntervalMs,
    // Half the grace for the children's last checkpoint, so the leases are still released in time.
    shutdownTimeoutMs: Math.floor(timings.shutdownGraceMs / 2),
    callProcessRecordsEvenForEmptyRecordList: configuration.callProcessRecordsEvenForEmptyRecordList,
    processingRetry: { initialMs: timings.retryInitialMs, maxMs: timings.retryMaxMs },
    metricsLevel: configuration.metrics.level,
  };
}
