import { KinesisClient } from '@aws-sdk/client-kinesis';
import type { KclEvent, KclEventListener } from '@kcl/core';
import { noopLogger, systemClock, systemRandom } from '@kcl/core';
import { NodeHttpHandler } from '@smithy/node-http-handler';
import type { ConsumerOptions } from './consumer-options.js';
import { resolveConsumerOptions } from './consumer-options.js';
import { KinesisStream } from './kinesis-stream.js';
import { createLeasePlanner } from './lease-planner.js';
import { WorkerMetrics } from './metrics/worker-metrics.js';
import { createPipelineProcessorFactory } from './pipeline/create-pipeline-processor-factory.js';
import type { RecordProcessorFactory } from './record-processor.js';
import { withStoreDeadlines } from './store-deadlines.js';
import { type LeaseStatus, Worker } from './worker.js';

export type ConsumerState = 'created' | 'starting' | 'running' | 'stopping' | 'stopped' | 'failed';

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
  const random = options?.random ?? systemRandom;
  const resolved = resolveConsumerOptions(options, random);
  const clock = options.clock ?? systemClock;
  const logger = options.logger ?? noopLogger;
  options.metrics?.attach?.({
    applicationName: resolved.applicationName,
    workerId: resolved.workerId,
    clock,
    logger,
  });
  const metrics = new WorkerMetrics(options.metrics ?? null, resolved.workerId, options.metricsLevel);
  const processorFactory: RecordProcessorFactory =
    options.pipeline !== undefined
      ? createPipelineProcessorFactory(options.pipeline, { clock, random, logger })
      : (options.processor as RecordProcessorFactory);
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

  const ownsClient = !(options.kinesis instanceof KinesisClient);
  const kinesis =
    options.kinesis instanceof KinesisClient
      ? options.kinesis
      : new KinesisClient({ ...options.kinesis, requestHandler: new NodeHttpHandler() });
  const stream = new KinesisStream(kinesis, resolved.streamIdentity, {
    clock,
    random,
    callTimeoutMs: resolved.kinesisCallTimeoutMs,
  });

  let state: ConsumerState = 'created';
  let starting: Promise<void> | null = null;
  let stopping: Promise<void> | null = null;
  let failure: unknown = null;
  let resolveStopped: () => void = () => {};
  let rejectStopped: (error: unknown) => void = () => {};
  const stoppedPromise = new Promise<void>((resolve, reject) => {
    resolveStopped = resolve;
    rejectStopped = reject;
  });
  // A caller that never asks for `stopped()` must not see an unhandled rejection.
  stoppedPromise.catch(() => undefined);

  const worker = new Worker({
    options: resolved,
    store: withStoreDeadlines(options.leaseStore, clock, resolved.storeCallTimeoutMs),
    stream,
    processorFactory,
    onProcessingError: options.onProcessingError ?? null,
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
      failure = error;
      void consumer.stop({ graceful: true });
    },
  });

  const finish = async (graceful: boolean): Promise<void> => {
    // Let a start in progress settle first (a start still retrying gives up), so the loops it starts
    // are stopped too.
    worker.cancelStart();
    if (starting !== null && state === 'starting') await starting.catch(() => undefined);
    state = 'stopping';
    try {
      await worker.stop(graceful);
    } finally {
      if (ownsClient) kinesis.destroy();
      state = failure === null ? 'stopped' : 'failed';
      if (failure === null) resolveStopped();
      else rejectStopped(failure);
    }
  };

  const consumer: Consumer = {
    workerId: resolved.workerId,

    start() {
      if (starting !== null) return starting;
      if (stopping !== null)
        return Promise.reject(new Error('@kcl/consumer: the consumer was stopped; create a new one'));
      state = 'starting';
      const attempt = worker.start().then(
        () => {
          state = 'running';
        },
        async (error: unknown) => {
          // A stop under way (it made the start give up) finishes the consumer itself.
          if (stopping !== null) throw error;
          failure = error;
          state = 'stopping';
          stopping = finish(false);
          await stopping.catch(() => undefined);
          throw error;
        },
      );
      attempt.catch(() => undefined);
      starting = attempt;
      return attempt;
    },

    stop(stopOptions = {}) {
      const graceful = stopOptions.graceful ?? true;
      if (stopping === null) {
        stopping = finish(graceful);
      } else if (!graceful) {
        // A forced stop during a graceful one: drop what is left now.
        void worker.stop(false);
      }
      return stopping.catch(() => undefined);
    },

    stopped() {
      return stoppedPromise;
    },

    status() {
      return { workerId: resolved.workerId, state, leases: worker.status() };
    },

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
