import type { MetricDatum as CloudWatchDatum } from '@aws-sdk/client-cloudwatch';
import type { Clock, Logger, RandomSource } from '@kcl/core';
import { noopLogger, OptionProblems, systemClock, systemRandom } from '@kcl/core';
import { Backoff } from '../backoff.js';
import {
  type CloudWatchModule,
  isRetryablePublication,
  loadCloudWatch,
  requestBatches,
  type StatisticSet,
} from './cloudwatch-publication.js';
import type { MetricDatum, MetricsLevel, MetricsSink, MetricsSinkContext } from './metrics-sink.js';
import { isMetricsLevelEnabled, METRICS_LEVELS } from './metrics-sink.js';

/**
 * The part of a `CloudWatchClient` (from `@aws-sdk/client-cloudwatch`) the sink uses. Declared here,
 * so `@kcl/consumer`'s types do not depend on that optional package; a real client satisfies it.
 */
export interface CloudWatchMetricsClient {
  send(command: unknown, options?: { readonly abortSignal?: AbortSignal }): Promise<unknown>;
}

export interface CloudWatchMetricsSinkOptions {
  /** A `CloudWatchClient`. The sink never closes it. */
  readonly client: CloudWatchMetricsClient;
  /** The CloudWatch namespace. Default: the `applicationName` of the consumer the sink is attached to (as Java). */
  readonly namespace?: string;
  /** Default DETAILED (everything); SUMMARY publishes only SUMMARY metrics; NONE nothing. */
  readonly level?: MetricsLevel;
  /** How long data accumulate before they are published. Default 10 000 (Java `metricsBufferTimeMillis`). */
  readonly bufferTimeMs?: number;
  /** The most distinct (name, dimensions) pairs buffered; new ones beyond are dropped and counted. Default 10 000. */
  readonly maxQueueSize?: number;
  /** Publish early once this many distinct pairs wait. Default 200 (Java `publisherFlushBuffer`). */
  readonly flushSize?: number;
  /** Metric data per PutMetricData request, 1 … 1 000. Default 20 (as Java). */
  readonly maxBatchSize?: number;
  /** Attempts per request when CloudWatch throttles or fails transiently. Default 3. */
  readonly maxAttempts?: number;
  /** Backoff between those attempts. Default 500 ms doubling to 10 s. */
  readonly retry?: { readonly initialMs?: number; readonly maxMs?: number };
  /** Default: the attached consumer's clock, else the system clock. */
  readonly clock?: Clock;
  readonly random?: RandomSource;
  /** Default: the attached consumer's logger, else none. */
  readonly logger?: Logger;
}

/** Counters describing what the sink did, for tests and health checks. */
export interface CloudWatchMetricsSinkStats {
  /** Distinct (name, dimensions) pairs waiting to be published. */
  readonly buffered: number;
  readonly publishedData: number;
  /** Data dropped: queue full, a non-finite value, no namespace, or a request that failed for good. */
  readonly droppedData: number;
  readonly requests: number;
  readonly failedRequests: number;
  /** Publications started (by the timer, `flushSize`, `flush()` or `close()`). */
  readonly flushes: number;
}

export interface CloudWatchMetricsSink extends MetricsSink {
  readonly level: MetricsLevel;
  /** Publishes everything buffered now; resolves when it and every earlier publication is done. Never rejects. */
  flush(): Promise<void>;
  /** Publishes what is left and stops the timer; later data are dropped. */
  close(): Promise<void>;
  stats(): CloudWatchMetricsSinkStats;
}

/** CloudWatch accepts at most this many dimensions per datum. */
const MAX_DIMENSIONS = 30;

/**
 * A sink that publishes to CloudWatch with PutMetricData, as the Java KCL does: data accumulate per
 * (name, unit, dimensions) into statistic sets (SampleCount, Sum, Minimum, Maximum) and are published
 * every `bufferTimeMs`, in requests of at most `maxBatchSize` data. Throttled requests are retried
 * with backoff; a full queue drops new data and counts them. It never throws into the caller.
 *
 * `@aws-sdk/client-cloudwatch` is an optional peer dependency, loaded on first use.
 */
export function createCloudWatchMetricsSink(options: CloudWatchMetricsSinkOptions): CloudWatchMetricsSink {
  const check = new OptionProblems('@kcl/consumer createCloudWatchMetricsSink');
  const given = (options ?? {}) as Partial<CloudWatchMetricsSinkOptions>;
  if (given.client === undefined || given.client === null) {
    check.add('client is required: a CloudWatchClient from @aws-sdk/client-cloudwatch');
  } else {
    check.optionalObjectWith(
      'client',
      given.client,
      ['send'],
      'a CloudWatchClient from @aws-sdk/client-cloudwatch',
    );
  }
  const namespace = given.namespace;
  if (namespace !== undefined && (typeof namespace !== 'string' || !/^.{1,255}$/u.test(namespace))) {
    check.add(`namespace must be 1–255 characters, got ${JSON.stringify(namespace)}`);
  }
  if (typeof namespace === 'string' && namespace.startsWith('AWS/')) {
    check.add(`namespace ${JSON.stringify(namespace)} starts with AWS/, which is reserved for AWS services`);
  }
  check.oneOf('level', given.level, METRICS_LEVELS, 'DETAILED');
  const settings: SinkSettings = {
    bufferTimeMs: check.integer('bufferTimeMs', given.bufferTimeMs, 10_000, { min: 1 }),
    maxQueueSize: check.integer('maxQueueSize', given.maxQueueSize, 10_000, { min: 1 }),
    flushSize: check.integer('flushSize', given.flushSize, 200, { min: 1 }),
    maxBatchSize: check.integer('maxBatchSize', given.maxBatchSize, 20, { min: 1, max: 1_000 }),
    maxAttempts: check.integer('maxAttempts', given.maxAttempts, 3, { min: 1, max: 100 }),
    retry: check.retryDelays('retry', given.retry, { initialMs: 500, maxMs: 10_000 }),
  };
  if (given.clock !== undefined) check.clock('clock', given.clock, systemClock);
  if (given.logger !== undefined) check.logger('logger', given.logger, noopLogger);
  if (given.random !== undefined) check.random('random', given.random, systemRandom);
  check.throwIfAny();
  return new CloudWatchSink(options, settings);
}

interface SinkSettings {
  readonly bufferTimeMs: number;
  readonly maxQueueSize: number;
  readonly flushSize: number;
  readonly maxBatchSize: number;
  readonly maxAttempts: number;
  readonly retry: { readonly initialMs: number; readonly maxMs: number };
}

class CloudWatchSink implements CloudWatchMetricsSink {
  readonly level: MetricsLevel;
  readonly #options: CloudWatchMetricsSinkOptions;
  readonly #settings: SinkSettings;
  readonly #closing = new AbortController();
  #clock: Clock;
  #logger: Logger;
  #namespace: string | null;
  #buffer = new Map<string, StatisticSet>();
  #publishing: Promise<void> = Promise.resolve();
  #queuedFlush: Promise<void> | null = null;
  #timerRunning = false;
  #warnedQueueFull = false;
  #stats = { publishedData: 0, droppedData: 0, requests: 0, failedRequests: 0, flushes: 0 };

  constructor(options: CloudWatchMetricsSinkOptions, settings: SinkSettings) {
    this.#options = options;
    this.#settings = settings;
    this.level = options.level ?? 'DETAILED';
    this.#clock = options.clock ?? systemClock;
    this.#logger = options.logger ?? noopLogger;
    this.#namespace = options.namespace ?? null;
  }

  attach(context: MetricsSinkContext): void {
    if (this.#options.clock === undefined) this.#clock = context.clock;
    if (this.#options.logger === undefined) this.#logger = context.logger;
    if (this.#options.namespace !== undefined) return;
    if (this.#namespace === null) {
      this.#namespace = context.applicationName;
    } else if (this.#namespace !== context.applicationName) {
      this.#logger.warn(
        'CloudWatch metrics sink attached to a second application; keeping the first namespace',
        {
          namespace: this.#namespace,
          applicationName: context.applicationName,
        },
      );
    }
  }

  record(datum: MetricDatum): void {
    try {
      if (this.#closing.signal.aborted || this.level === 'NONE') return;
      if (!isMetricsLevelEnabled(this.level, datum.level)) return;
      if (typeof datum.value !== 'number' || !Number.isFinite(datum.value)) {
        this.#stats.droppedData += 1;
        return;
      }
      const dimensions = Object.entries(datum.dimensions)
        .filter(([name, value]) => name !== '' && typeof value === 'string' && value !== '')
        .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
        .slice(0, MAX_DIMENSIONS);
      const key = `${datum.name}\u0000${datum.unit}\u0000${dimensions.map(([name, value]) => `${name}=${value}`).join('\u0000')}`;
      const existing = this.#buffer.get(key);
      if (existing !== undefined) {
        existing.sampleCount += 1;
        existing.sum += datum.value;
        existing.minimum = Math.min(existing.minimum, datum.value);
        existing.maximum = Math.max(existing.maximum, datum.value);
      } else {
        if (this.#buffer.size >= this.#settings.maxQueueSize) {
          this.#stats.droppedData += 1;
          if (!this.#warnedQueueFull) {
            this.#warnedQueueFull = true;
            this.#logger.warn(
              'CloudWatch metrics queue is full; dropping new metrics until it is published',
              {
                maxQueueSize: this.#settings.maxQueueSize,
              },
            );
          }
          return;
        }
        this.#buffer.set(key, {
          name: datum.name,
          unit: datum.unit,
          dimensions,
          timestamp: this.#clock.now(),
          sampleCount: 1,
          sum: datum.value,
          minimum: datum.value,
          maximum: datum.value,
        });
      }
      if (this.#buffer.size >= this.#settings.flushSize) void this.#queueFlush();
      this.#startTimer();
    } catch (error) {
      this.#logger.warn('CloudWatch metrics sink could not record a datum', { name: datum?.name, error });
    }
  }

  flush(): Promise<void> {
    return this.#queueFlush();
  }

  async close(): Promise<void> {
    this.#closing.abort();
    await this.#queueFlush();
  }

  stats(): CloudWatchMetricsSinkStats {
    return { buffered: this.#buffer.size, ...this.#stats };
  }

  /** Runs while data wait: publishes every `bufferTimeMs`, then ends once the buffer is empty. */
  #startTimer(): void {
    if (this.#timerRunning || this.#closing.signal.aborted) return;
    this.#timerRunning = true;
    void this.#runTimer();
  }

  async #runTimer(): Promise<void> {
    try {
      while (this.#buffer.size > 0 && !this.#closing.signal.aborted) {
        await this.#clock.sleep(this.#settings.bufferTimeMs, this.#closing.signal);
        if (this.#closing.signal.aborted) break;
        await this.#queueFlush();
      }
    } finally {
      this.#timerRunning = false;
    }
  }

  /** Publications run one at a time; a flush asked for while one waits to start shares it. */
  #queueFlush(): Promise<void> {
    if (this.#queuedFlush !== null) return this.#queuedFlush;
    const run = this.#publishing.then(async () => {
      this.#queuedFlush = null;
      await this.#publishBuffer();
    });
    const settled = run.catch((error: unknown) => {
      this.#logger.error('CloudWatch metrics publication failed unexpectedly', { error });
    });
    this.#publishing = settled;
    this.#queuedFlush = settled;
    return settled;
  }

  async #publishBuffer(): Promise<void> {
    if (this.#buffer.size === 0) return;
    const sets = [...this.#buffer.values()];
    this.#buffer = new Map();
    this.#warnedQueueFull = false;
    this.#stats.flushes += 1;
    const namespace = this.#namespace;
    if (namespace === null) {
      this.#stats.droppedData += sets.length;
      this.#logger.error(
        'CloudWatch metrics sink has no namespace: give createCloudWatchMetricsSink a namespace or pass the sink to createConsumer',
        { dropped: sets.length },
      );
      return;
    }
    let module: CloudWatchModule;
    try {
      module = await loadCloudWatch();
    } catch (error) {
      this.#stats.droppedData += sets.length;
      this.#logger.error(
        '@aws-sdk/client-cloudwatch could not be loaded; install it to publish metrics to CloudWatch',
        {
          error,
        },
      );
      return;
    }
    for (const batch of requestBatches(sets, this.#settings.maxBatchSize)) {
      await this.#send(module, namespace, batch);
    }
  }

  async #send(module: CloudWatchModule, namespace: string, data: CloudWatchDatum[]): Promise<void> {
    const backoff = new Backoff({ ...this.#settings.retry, random: this.#options.random ?? systemRandom });
    for (let attempt = 1; ; attempt++) {
      this.#stats.requests += 1;
      try {
        await this.#options.client.send(
          new module.PutMetricDataCommand({ Namespace: namespace, MetricData: data }),
        );
        this.#stats.publishedData += data.length;
        return;
      } catch (error) {
        this.#stats.failedRequests += 1;
        const retryable = isRetryablePublication(error);
        if (!retryable || attempt >= this.#settings.maxAttempts) {
          this.#stats.droppedData += data.length;
          this.#logger.warn('PutMetricData failed; dropping the metrics of this request', {
            attempts: attempt,
            retryable,
            dropped: data.length,
            error,
          });
          return;
        }
        const delayMs = backoff.next();
        this.#logger.debug('PutMetricData throttled or failed; retrying', { attempt, delayMs, error });
        // Closing cuts the wait short: the remaining attempts go at once.
        await this.#clock.sleep(delayMs, this.#closing.signal);
      }
    }
  }
}
