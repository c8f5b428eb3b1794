import { KinesisClient } from '@aws-sdk/client-kinesis';
import type { KclEvent, KclEventListener, LifecycleState } from '@kcl/core';
import { guardLeaseStore, Lifecycle } from '@kcl/core';
import { NodeHttpHandler } from '@smithy/node-http-handler';
import type { ConsumerOptions, KinesisClientSettings, ResolvedRetrieval } from './consumer-options.js';
import { isKinesisClient, resolveConsumerSetup } from './consumer-options.js';
import { KinesisStream, type StreamIdentity } from './kinesis/kinesis-stream.js';
import { ensureStreamConsumer } from './kinesis/stream-consumer.js';
import { createLeasePlanner } from './leases/lease-planner.js';
import { withStoreDeadlines } from './leases/store-deadlines.js';
import { WorkerMetrics } from './metrics/worker-metrics.js';
import { pipelineProcessorFactory } from './pipeline/create-pipeline-processor-factory.js';
import type { RecordProcessorFactory } from './processing/record-processor.js';
import type { LeaseStatus } from './processing/shard-consumers.js';
import { Worker, type WorkerDependencies } from './worker.js';

export type ConsumerState = LifecycleState;

export interface ConsumerStatus {
  readonly workerId: string;
  readonly state: ConsumerState;
  /** One entry per lease this worker holds. */
  readonly leases: readonly LeaseStatus[];
}

export interface StopOptions {
  /**
   * True (the default): stop taking leases, let processors checkpoint in `shutdownRequested`, release
   * the leases so other workers take them at once. False: drop everything now; the leases expire.
   */
  readonly graceful?: boolean;
}

/** A worker of a consumer fleet. */
export interface Consumer {
  readonly workerId: string;
  /** Starts the worker; resolves once it is running (schema ensured, registered, loops started). */
  start(): Promise<void>;
  /** Stops the worker. Idempotent: later calls return the same promise (a forced stop can follow a graceful one). */
  stop(options?: StopOptions): Promise<void>;
  /** Resolves when the worker has stopped; rejects with the error if it stopped on its own. */
  stopped(): Promise<void>;
  status(): ConsumerStatus;
  /** Subscribes to events; returns the unsubscribe function. */
  on(listener: KclEventListener): () => void;
}

/**
 * Creates a consumer worker. Options are validated here: one `ConfigurationError` lists every problem.
 *
 * ```ts
 * const consumer = createConsumer({ streamName: 'orders', applicationName: 'billing', kinesis, leaseStore, processor });
 * await consumer.start();
 * ```
 */
export function createConsumer(options: ConsumerOptions): Consumer {
  const setup = resolveConsumerSetup(options);
  const { options: resolved, clock, logger, random } = setup;
  setup.metrics?.attach?.({
    applicationName: resolved.applicationName,
    workerId: resolved.workerId,
    clock,
    logger,
  });
  const metrics = new WorkerMetrics(setup.metrics, resolved.workerId, setup.metricsLevel);
  const processorFactory: RecordProcessorFactory =
    setup.pipeline !== null
      ? pipelineProcessorFactory(
          setup.pipeline,
          { clock, random, logger },
          { exactlyOnce: resolved.exactlyOnce },
        )
      : (setup.processor as RecordProcessorFactory);
  const listeners = new Set<KclEventListener>();
  if (options.onEvent !== undefined) listeners.add(options.onEvent);
  const emit = (event: KclEvent): void => {
    metrics.event(event);
    for (const listener of listeners) {
      try {
        listener(event);
      } catch (error) {
        logger.warn('event listener threw', { type: event.type, error });
      }
    }
  };

  const ownsClient = !isKinesisClient(options.kinesis);
  const kinesis = isKinesisClient(options.kinesis)
    ? options.kinesis
    : new KinesisClient({
        ...options.kinesis,
        ...(needsHttp1(options.kinesis, resolved.retrieval) ? { requestHandler: new NodeHttpHandler() } : {}),
      });
  const readerFor = (identity: StreamIdentity): KinesisStream =>
    new KinesisStream(kinesis, identity, { clock, random, callTimeoutMs: resolved.kinesisCallTimeoutMs });
  const stream = resolved.streamIdentity === null ? null : readerFor(resolved.streamIdentity);

  /** Fan-out: the registered stream consumer the worker subscribes with (registered when missing). */
  const streamConsumerRegistration = (): WorkerDependencies['registerStreamConsumer'] => {
    const retrieval = resolved.retrieval;
    if (retrieval.mode !== 'fanout') return null;
    return async (streamIdentity, signal) => {
      const registered = await ensureStreamConsumer({
        kinesis,
        stream: streamIdentity,
        consumerName: retrieval.consumerName,
        ...(retrieval.consumerArn === null ? {} : { consumerArn: retrieval.consumerArn }),
        timeoutMs: retrieval.registrationTimeoutMs,
        clock,
        random,
        signal,
        onProgress: (status, delayMs) =>
          logger.info('waiting for the stream consumer to become ACTIVE', {
            consumerName: retrieval.consumerName,
            status,
            delayMs,
          }),
      });
      logger.info('stream consumer ready', {
        stream: 'streamName' in streamIdentity ? streamIdentity.streamName : streamIdentity.streamArn,
        consumerName: registered.consumerName,
        consumerArn: registered.consumerArn,
      });
      return registered.consumerArn;
    };
  };

  // The start/stop bookkeeping: a stop during the start makes it give up (interrupt) and then takes
  // down what it began; a forced stop during a graceful one drops what is left (escalate).
  const lifecycle = new Lifecycle({
    component: '@kcl/consumer',
    stoppedCode: 'CONSUMER_STOPPED',
    start: () => worker.start(),
    stop: async (graceful) => {
      try {
        await worker.stop(graceful);
      } finally {
        if (ownsClient) kinesis.destroy();
      }
    },
    interrupt: () => worker.cancelStart(),
    escalate: () => void worker.stop(false),
  });

  const worker = new Worker({
    options: resolved,
    store: withStoreDeadlines(
      guardLeaseStore(options.leaseStore, '@kcl/consumer createConsumer'),
      clock,
      resolved.storeCallTimeoutMs,
    ),
    stream,
    readerFor: resolved.multiStream === null ? null : readerFor,
    kinesisRegion: () => kinesis.config.region(),
    registerStreamConsumer: streamConsumerRegistration(),
    processorFactory,
    onProcessingError: setup.onProcessingError,
    planner: createLeasePlanner({
      workerId: resolved.workerId,
      leaseExpiryMs: resolved.leaseExpiryMs,
      maxLeasesToSteal: resolved.maxLeasesToSteal,
      maxLeasesForWorker: resolved.maxLeasesForWorker,
      random,
    }),
    metrics,
    clock,
    random,
    logger,
    emit,
    onFatal: (error) => {
      lifecycle.fail(error);
      void lifecycle.stop(true);
    },
  });

  const consumer: Consumer = {
    workerId: resolved.workerId,
    start: () => lifecycle.start(),
    stop: (stopOptions = {}) => lifecycle.stop(stopOptions.graceful ?? true),
    stopped: () => lifecycle.stopped(),
    status: () => ({ workerId: resolved.workerId, state: lifecycle.state, leases: worker.status() }),
    on(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
  };

  if (options.signal !== undefined) {
    if (options.signal.aborted) void consumer.stop();
    else options.signal.addEventListener('abort', () => void consumer.stop(), { once: true });
  }
  return consumer;
}

/**
 * The handler of a client kcl builds: HTTP/1.1, which every Kinesis endpoint and emulator speaks —
 * except for enhanced fan-out on AWS, whose SubscribeToShard needs the SDK's default HTTP/2 handler.
 * A plain `http:` endpoint is an emulator (kinesis-local serves SubscribeToShard over HTTP/1.1 only).
 */
function needsHttp1(settings: KinesisClientSettings, retrieval: ResolvedRetrieval): boolean {
  if (retrieval.mode !== 'fanout') return true;
  return settings.endpoint?.toLowerCase().startsWith('http:') === true;
}
