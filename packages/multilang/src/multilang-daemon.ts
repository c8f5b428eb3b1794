import type { KinesisClient } from '@aws-sdk/client-kinesis';
import type { CloudWatchMetricsClient, Consumer, ConsumerStatus, MetricsSink } from '@kcl/consumer';
import { createCloudWatchMetricsSink, createConsumer } from '@kcl/consumer';
import type { Clock, KclEvent, KclEventListener, LeaseStore, Logger, RandomSource } from '@kcl/core';
import { ConfigurationError, noopLogger, systemClock, systemRandom } from '@kcl/core';
import { createDynamoLeaseStore } from '@kcl/store-dynamo';
import {
  createClientForEndpoint,
  createCloudWatchClient,
  createDynamoClient,
  createKinesisClient,
} from './aws-clients.js';
import type { ChildLauncher, ChildSignaller } from './child-process-launcher.js';
import type { ChildSession } from './child-session.js';
import type { MultiLangConfiguration } from './multilang-configuration.js';
import type { MultiLangChildError, MultiLangShardGivenUpError } from './multilang-errors.js';
import { createMultiLangProcessorFactory } from './multilang-record-processor.js';
import { ReplayMemoryBudget } from './replay-buffer.js';
import type { OwnedLeaseStore } from './sql-lease-store-factory.js';
import { openSqlLeaseStore } from './sql-lease-store-factory.js';

export interface MultiLangDaemonOptions {
  readonly configuration: MultiLangConfiguration;
  /** The children's environment (and the SDK's, which reads `process.env` itself). */
  readonly environment: Readonly<Record<string, string | undefined>>;
  /** Where the children run. */
  readonly workingDirectory: string;
  readonly logger?: Logger;
  readonly clock?: Clock;
  readonly random?: RandomSource;
  /** Overrides `kcl.exitOnChildFailure` (the CLI's `--exit-on-child-failure`). */
  readonly exitOnChildFailure?: boolean;
  /** Use this store instead of building one from the configuration (the daemon does not close it). */
  readonly leaseStore?: LeaseStore;
  /** Use this client instead of building one from the configuration (the daemon does not destroy it). */
  readonly kinesis?: KinesisClient;
  /** Publish metrics with this client instead of one built from the configuration (not destroyed). */
  readonly cloudWatch?: CloudWatchMetricsClient;
  readonly launcher?: ChildLauncher;
  /**
   * How children are sent SIGTERM/SIGKILL. Default: the child itself; the CLI signals the child's
   * whole process group (`signalProcessGroup`).
   */
  readonly signalChild?: ChildSignaller;
  readonly onEvent?: KclEventListener;
  /**
   * Told when a shard's lease is given up because its children keep failing (`kcl.childFailureLimit`).
   * Also logged at ERROR and counted in the `LeasesGivenUp` metric.
   */
  readonly onShardGivenUp?: (error: MultiLangShardGivenUpError) => void;
}

export interface MultiLangDaemonStopOptions {
  /** True (default): children checkpoint (`shutdownRequested`), leases are released; bounded by `shutdownGraceMillis`. */
  readonly graceful?: boolean;
}

export interface MultiLangDaemon {
  /** Builds the clients and the store, checks the region, starts the worker. Resolves once it runs. */
  start(): Promise<void>;
  /**
   * Stops: gracefully (every child gets `shutdownRequested`, `leaseLost`, EOF; leases are released),
   * or forced (children are terminated, leases expire). A graceful stop that outlasts
   * `shutdownGraceMillis` becomes a forced one. Idempotent; a forced stop may follow a graceful one.
   */
  stop(options?: MultiLangDaemonStopOptions): Promise<void>;
  /** Resolves when the daemon stopped as asked; rejects with the reason when it stopped on its own. */
  stopped(): Promise<void>;
  /** The worker's status, once started. */
  status(): ConsumerStatus | null;
  /** How many child processes are running. */
  readonly childCount: number;
}

/**
 * The MultiLangDaemon: a kcl consumer whose record processors are child processes speaking the
 * multilang protocol, one per lease.
 */
export function createMultiLangDaemon(options: MultiLangDaemonOptions): MultiLangDaemon {
  const { configuration } = options;
  const logger = options.logger ?? noopLogger;
  const clock = options.clock ?? systemClock;
  const random = options.random ?? systemRandom;
  const exitOnChildFailure = options.exitOnChildFailure ?? configuration.exitOnChildFailure;
  const sessions = new Set<ChildSession>();
  const cleanups: (() => Promise<void> | void)[] = [];

  let consumer: Consumer | null = null;
  let starting: Promise<void> | null = null;
  let gracefulStop: Promise<void> | null = null;
  let forcedStop: Promise<void> | null = null;
  let finished: Promise<void> | null = null;
  let failure: unknown = null;
  let resolveStopped: () => void = () => {};
  let rejectStopped: (error: unknown) => void = () => {};
  const stoppedPromise = new Promise<void>((resolve, reject) => {
    resolveStopped = resolve;
    rejectStopped = reject;
  });
  stoppedPromise.catch(() => undefined);

  const failWith = (error: unknown): void => {
    failure ??= error;
    void daemon.stop({ graceful: true });
  };

  // Set once the worker is built, when metrics are on.
  let metricsSink: MetricsSink | null = null;
  const countForShard = (name: string, shardId: string): void => {
    metricsSink?.record({
      name,
      value: 1,
      unit: 'Count',
      dimensions: { Operation: 'MultiLangDaemon', ShardId: shardId },
      level: 'SUMMARY',
    });
  };

  // The processor has already logged it at ERROR, with the shard and the cause.
  const onShardGivenUp = (error: MultiLangShardGivenUpError): void => {
    countForShard('LeasesGivenUp', error.shardId);
    options.onShardGivenUp?.(error);
  };

  const onChildFailure = (error: MultiLangChildError): void => {
    countForShard('ChildFailures', error.shardId);
    if (error.reason === 'replay-incomplete') {
      logger.error(
        'stopping: a child cannot be restarted without skipping records; restart the daemon to resume from the checkpoints',
        {
          shardId: error.shardId,
        },
      );
      failWith(error);
    } else if (exitOnChildFailure) {
      logger.error('stopping because a child failed (kcl.exitOnChildFailure / --exit-on-child-failure)', {
        shardId: error.shardId,
        reason: error.reason,
      });
      failWith(error);
    }
  };

  const processorFactory = createMultiLangProcessorFactory({
    command: configuration.executable,
    workingDirectory: options.workingDirectory,
    environment: options.environment,
    logger,
    clock,
    messageTimeoutMs: configuration.timings.childMessageTimeoutMs,
    exitTimeoutMs: configuration.timings.childExitTimeoutMs,
    killTimeoutMs: configuration.timings.childKillTimeoutMs,
    replayBufferMaxBytes: configuration.replayBufferMaxBytes,
    // One budget for every shard: memory no longer grows with the number of leases held.
    replayBudget: new ReplayMemoryBudget(configuration.replayBufferTotalMaxBytes),
    childFailureLimit: configuration.childFailureLimit,
    onChildFailure,
    onShardGivenUp,
    sessions,
    ...(options.launcher === undefined ? {} : { launcher: options.launcher }),
    ...(options.signalChild === undefined ? {} : { signalChild: options.signalChild }),
  });

  const logEvent = (event: KclEvent): void => {
    switch (event.type) {
      case 'lease-taken':
        logger.info('lease taken', {
          leaseKey: event.leaseKey,
          previousOwner: event.previousOwner,
          stolen: event.stolen,
        });
        break;
      case 'lease-released':
        logger.info('lease released', { leaseKey: event.leaseKey });
        break;
      case 'leases-created':
        logger.info('leases created', { leaseKeys: event.leaseKeys, cause: event.cause });
        break;
      case 'shard-ended':
        logger.info('shard ended', { leaseKey: event.leaseKey, childShardIds: event.childShardIds });
        break;
      case 'checkpoint-written':
        logger.debug('checkpoint written', {
          leaseKey: event.leaseKey,
          checkpoint: event.checkpoint.toString(),
        });
        break;
      default:
        break;
    }
    options.onEvent?.(event);
  };

  const terminateChildren = async (): Promise<void> => {
    await Promise.all([...sessions].map((session) => session.terminate()));
  };

  const cleanUp = async (): Promise<void> => {
    await terminateChildren();
    for (const cleanup of cleanups.splice(0).reverse()) {
      try {
        await cleanup();
      } catch (error) {
        logger.warn('closing a client failed', { error });
      }
    }
  };

  const build = async (): Promise<Consumer> => {
    const placeholder = (endpoint: string | null) => () =>
      logger.warn('no AWS credentials found; using placeholder credentials for the local endpoint', {
        endpoint,
      });
    const kinesis =
      options.kinesis ??
      (await createClientForEndpoint(
        (credentials) =>
          createKinesisClient({
            region: configuration.region,
            endpoint: configuration.kinesisEndpoint,
            credentials,
          }),
        configuration.kinesisCredentials,
        configuration.kinesisEndpoint,
        placeholder(configuration.kinesisEndpoint),
      ));
    if (options.kinesis === undefined) cleanups.push(() => kinesis.destroy());

    let leaseStore: LeaseStore;
    const regionChecks: Promise<unknown>[] = [kinesis.config.region()];
    if (options.leaseStore !== undefined) {
      leaseStore = options.leaseStore;
    } else if (configuration.leaseStore.kind === 'dynamodb') {
      const client = await createClientForEndpoint(
        (credentials) =>
          createDynamoClient({
            region: configuration.region,
            endpoint: configuration.dynamoDBEndpoint,
            credentials,
          }),
        configuration.dynamoDBCredentials,
        configuration.dynamoDBEndpoint,
        placeholder(configuration.dynamoDBEndpoint),
      );
      cleanups.push(() => client.destroy());
      regionChecks.push(client.config.region());
      leaseStore = createDynamoLeaseStore({
        client,
        applicationName: configuration.applicationName,
        tableName: configuration.leaseStore.tableName,
        // Only while a new table is being created: see it ACTIVE soon after it is.
        schemaPollIntervalMs: 250,
      });
      logger.info('lease store: DynamoDB (Java KCL table format)', {
        tableName: configuration.leaseStore.tableName,
      });
    } else {
      const owned: OwnedLeaseStore = await openSqlLeaseStore({
        url: configuration.leaseStore.url,
        applicationName: configuration.applicationName,
        tableName: configuration.leaseStore.tableName,
        workingDirectory: options.workingDirectory,
        onPoolError: (error) => logger.warn('idle SQL connection failed', { error }),
      });
      cleanups.push(() => owned.close());
      leaseStore = owned.store;
      logger.info(`lease store: ${owned.description}`);
    }

    try {
      await Promise.all(regionChecks);
    } catch (error) {
      throw new ConfigurationError('@kcl/multilang (properties)', [
        `no AWS region: set regionName, or AWS_REGION in the environment (${error instanceof Error ? error.message : String(error)})`,
      ]);
    }

    let metrics: MetricsSink | null = null;
    if (configuration.metrics.level !== 'NONE') {
      let client = options.cloudWatch;
      if (client === undefined) {
        const built = createCloudWatchClient({
          region: configuration.region,
          credentials: configuration.cloudWatchCredentials,
        });
        cleanups.push(() => built.destroy());
        client = built;
      }
      const sink = createCloudWatchMetricsSink({
        client,
        level: configuration.metrics.level,
        bufferTimeMs: configuration.metrics.bufferTimeMs,
        maxQueueSize: configuration.metrics.maxQueueSize,
      });
      cleanups.push(() => sink.close());
      metrics = sink;
      metricsSink = sink;
      logger.info('CloudWatch metrics', {
        level: configuration.metrics.level,
        namespace: configuration.applicationName,
      });
    }

    const { timings } = configuration;
    return createConsumer({
      ...configuration.stream,
      applicationName: configuration.applicationName,
      ...(configuration.workerId === null ? {} : { workerId: configuration.workerId }),
      kinesis,
      leaseStore,
      initialPosition: configuration.initialPosition,
      leaseRenewIntervalMs: timings.leaseRenewIntervalMs,
      leaseExpiryMs: timings.leaseExpiryMs,
      rebalanceIntervalMs: timings.rebalanceIntervalMs,
      maxLeasesToSteal: configuration.maxLeasesToSteal,
      ...(configuration.maxLeasesForWorker === null
        ? {}
        : { maxLeasesForWorker: configuration.maxLeasesForWorker }),
      pollIntervalMs: timings.pollIntervalMs,
      maxRecords: configuration.maxRecords,
      parentPollIntervalMs: timings.parentPollIntervalMs,
      shardSyncIntervalMs: timings.shardSyncIntervalMs,
      leaseCleanupIntervalMs: timings.shardSyncIntervalMs,
      // Half the grace for the children's last checkpoint, so the leases are still released in time.
      shutdownTimeoutMs: Math.floor(timings.shutdownGraceMs / 2),
      callProcessRecordsEvenForEmptyRecordList: configuration.callProcessRecordsEvenForEmptyRecordList,
      processingRetry: { initialMs: timings.retryInitialMs, maxMs: timings.retryMaxMs },
      processor: processorFactory,
      ...(metrics === null ? {} : { metrics }),
      metricsLevel: configuration.metrics.level,
      logger,
      onEvent: logEvent,
      clock,
      random,
    });
  };

  const finish = (): Promise<void> => {
    finished ??= (async () => {
      await cleanUp();
      if (failure === null) resolveStopped();
      else rejectStopped(failure);
    })();
    return finished;
  };

  const daemon: MultiLangDaemon = {
    start() {
      starting ??= (async () => {
        try {
          consumer = await build();
          await consumer.start();
        } catch (error) {
          failure ??= error;
          await finish();
          throw error;
        }
        logger.info('kcl-multilang started', {
          workerId: consumer.workerId,
          applicationName: configuration.applicationName,
          ...configuration.stream,
          executableName: configuration.executable.text,
        });
        const running = consumer;
        running.stopped().catch((error: unknown) => {
          logger.error('the worker stopped on its own', { error });
          failWith(error);
        });
      })();
      return starting;
    },

    stop(stopOptions = {}) {
      const graceful = stopOptions.graceful ?? true;
      if (!graceful) {
        forcedStop ??= (async () => {
          logger.warn('forced stop: terminating every child; leases expire instead of being released');
          const stopping = consumer?.stop({ graceful: false }) ?? Promise.resolve();
          await terminateChildren();
          await stopping;
          await finish();
        })();
        return forcedStop;
      }
      gracefulStop ??= (async () => {
        if (starting !== null) await starting.catch(() => undefined);
        const running = consumer;
        if (running === null) {
          await finish();
          return;
        }
        logger.info('stopping: children checkpoint and leases are released', {
          shutdownGraceMillis: configuration.timings.shutdownGraceMs,
        });
        const deadline = new AbortController();
        const outcome = await Promise.race([
          running.stop({ graceful: true }).then(() => 'stopped' as const),
          clock.sleep(configuration.timings.shutdownGraceMs, deadline.signal).then(() => 'timeout' as const),
        ]);
        deadline.abort();
        if (outcome === 'timeout') {
          logger.warn('the graceful stop took longer than shutdownGraceMillis; forcing it', {
            shutdownGraceMillis: configuration.timings.shutdownGraceMs,
          });
          await daemon.stop({ graceful: false });
          return;
        }
        await finish();
      })();
      return gracefulStop;
    },

    stopped() {
      return stoppedPromise;
    },

    status() {
      return consumer?.status() ?? null;
    },

    get childCount() {
      return sessions.size;
    },
  };
  return daemon;
}
