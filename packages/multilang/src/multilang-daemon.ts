import type { KinesisClient } from '@aws-sdk/client-kinesis';
import type { CloudWatchMetricsClient, Consumer, ConsumerStatus, MetricsSink } from '@kcl/consumer';
import type { Clock, KclEvent, KclEventListener, LeaseStore, Logger, RandomSource } from '@kcl/core';
import { Lifecycle, noopLogger, systemClock, systemRandom } from '@kcl/core';
import { buildMultiLangConsumer, OpenedResources } from './build-multilang-consumer.js';
import type { ChildLauncher, ChildSignaller } from './child-process-launcher.js';
import type { ChildSession } from './child-session.js';
import { logConsumerEvent } from './log-consumer-event.js';
import type { MultiLangConfiguration } from './multilang-configuration.js';
import type { MultiLangChildError, MultiLangShardGivenUpError } from './multilang-errors.js';
import { createMultiLangProcessorFactory } from './multilang-record-processor.js';
import { describeRetrieval } from './read-retrieval.js';
import { ReplayMemoryBudget } from './replay-buffer.js';

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
  /** Use this store instead of opening one from the configuration (the daemon does not close it). */
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
  /**
   * Builds the clients and the store, checks the region, starts the worker. Resolves once it runs.
   * Runs once: later calls get the same promise. After a stop that came first it rejects
   * (`MULTILANG_DAEMON_STOPPED`): create a new daemon.
   */
  start(): Promise<void>;
  /**
   * Stops: gracefully (every child gets `shutdownRequested`, `leaseLost`, EOF; leases are released),
   * or forced (children are terminated, leases expire). A graceful stop that outlasts
   * `shutdownGraceMillis` becomes a forced one. Idempotent; a forced stop may follow a graceful one.
   * A stop during the start waits for the start to finish. Never rejects (see `stopped()`).
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
  return new ChildProcessDaemon(options);
}

/**
 * Start and stop bookkeeping is core's `Lifecycle`; what is particular here is the stop: a graceful
 * one is bounded by `shutdownGraceMillis` and turns into a forced one when that runs out, or when a
 * forced stop is asked for meanwhile (`escalate`).
 */
class ChildProcessDaemon implements MultiLangDaemon {
  readonly #options: MultiLangDaemonOptions;
  readonly #configuration: MultiLangConfiguration;
  readonly #logger: Logger;
  readonly #clock: Clock;
  readonly #exitOnChildFailure: boolean;
  readonly #sessions = new Set<ChildSession>();
  readonly #resources = new OpenedResources();
  readonly #lifecycle: Lifecycle;
  /** Set once the worker is built. */
  #consumer: Consumer | null = null;
  /** The worker started: stopping it stops its shards' children. */
  #started = false;
  /** Set once the worker is built, when metrics are on. */
  #metrics: MetricsSink | null = null;
  /** A forced stop was asked for while a graceful one ran (or before it could begin). */
  #forced = false;
  /** Settles when `#forced` is set. */
  readonly #forceRequested: Promise<void>;
  #settleForceRequested: () => void = () => {};

  constructor(options: MultiLangDaemonOptions) {
    this.#options = options;
    this.#configuration = options.configuration;
    this.#logger = options.logger ?? noopLogger;
    this.#clock = options.clock ?? systemClock;
    this.#exitOnChildFailure = options.exitOnChildFailure ?? options.configuration.exitOnChildFailure;
    this.#forceRequested = new Promise<void>((resolve) => {
      this.#settleForceRequested = resolve;
    });
    this.#lifecycle = new Lifecycle({
      component: '@kcl/multilang',
      stoppedCode: 'MULTILANG_DAEMON_STOPPED',
      start: () => this.#start(),
      stop: (graceful) => this.#stop(graceful),
      escalate: () => this.#requestForce(),
    });
  }

  start(): Promise<void> {
    return this.#lifecycle.start();
  }

  stop(options: MultiLangDaemonStopOptions = {}): Promise<void> {
    const graceful = options.graceful ?? true;
    // During the start the Lifecycle has no stop to escalate yet: remember it for the stop that follows.
    if (!graceful && this.#lifecycle.state === 'starting') this.#requestForce();
    return this.#lifecycle.stop(graceful);
  }

  stopped(): Promise<void> {
    return this.#lifecycle.stopped();
  }

  status(): ConsumerStatus | null {
    return this.#consumer?.status() ?? null;
  }

  get childCount(): number {
    return this.#sessions.size;
  }

  async #start(): Promise<void> {
    const options = this.#options;
    const configuration = this.#configuration;
    let consumer: Consumer;
    // Before the build: registering a fan-out consumer can take a while, and this says why it happens.
    const retrieval = describeRetrieval(configuration.retrieval);
    this.#logger[retrieval.warn ? 'warn' : 'info'](retrieval.message);
    try {
      const built = await buildMultiLangConsumer({
        configuration,
        workingDirectory: options.workingDirectory,
        logger: this.#logger,
        clock: this.#clock,
        random: options.random ?? systemRandom,
        processor: this.#processorFactory(),
        onEvent: (event) => this.#onEvent(event),
        kinesis: options.kinesis,
        leaseStore: options.leaseStore,
        cloudWatch: options.cloudWatch,
        resources: this.#resources,
      });
      this.#metrics = built.metrics;
      consumer = built.consumer;
      this.#consumer = consumer;
      await consumer.start();
    } catch (error) {
      // Also when a stop was asked for meanwhile: `stopped()` rejects with why the start failed.
      this.#lifecycle.fail(error);
      throw error;
    }
    this.#started = true;
    this.#logger.info('kcl-multilang started', {
      workerId: consumer.workerId,
      applicationName: configuration.applicationName,
      ...configuration.stream,
      executableName: configuration.executable.text,
    });
    consumer.stopped().catch((error: unknown) => {
      this.#logger.error('the worker stopped on its own', { error });
      this.#failWith(error);
    });
  }

  /** Takes the daemon down, once (after the start settled, whether it worked or not). */
  async #stop(graceful: boolean): Promise<void> {
    try {
      const consumer = this.#started ? this.#consumer : null;
      if (consumer !== null) {
        if (graceful && !this.#forced) await this.#stopGracefully(consumer);
        else await this.#stopForcibly(consumer);
      }
    } finally {
      await this.#terminateChildren();
      await this.#resources.closeAll(this.#logger);
    }
  }

  async #stopGracefully(consumer: Consumer): Promise<void> {
    const graceMs = this.#configuration.timings.shutdownGraceMs;
    this.#logger.info('stopping: children checkpoint and leases are released', {
      shutdownGraceMillis: graceMs,
    });
    const deadline = new AbortController();
    const outcome = await Promise.race([
      consumer.stop({ graceful: true }).then(() => 'stopped' as const),
      this.#clock.sleep(graceMs, deadline.signal).then(() => 'timeout' as const),
      this.#forceRequested.then(() => 'forced' as const),
    ]);
    deadline.abort();
    if (outcome === 'timeout') {
      this.#logger.warn('the graceful stop took longer than shutdownGraceMillis; forcing it', {
        shutdownGraceMillis: graceMs,
      });
    }
    if (outcome !== 'stopped') await this.#stopForcibly(consumer);
  }

  async #stopForcibly(consumer: Consumer): Promise<void> {
    this.#logger.warn('forced stop: terminating every child; leases expire instead of being released');
    const stopping = consumer.stop({ graceful: false });
    await this.#terminateChildren();
    await stopping;
  }

  #requestForce(): void {
    this.#forced = true;
    this.#settleForceRequested();
  }

  async #terminateChildren(): Promise<void> {
    await Promise.all([...this.#sessions].map((session) => session.terminate()));
  }

  /** Stops the daemon gracefully; `stopped()` rejects with `error`. */
  #failWith(error: unknown): void {
    this.#lifecycle.fail(error);
    void this.#lifecycle.stop(true);
  }

  #processorFactory() {
    const options = this.#options;
    const configuration = this.#configuration;
    return createMultiLangProcessorFactory({
      command: configuration.executable,
      workingDirectory: options.workingDirectory,
      environment: options.environment,
      logger: this.#logger,
      clock: this.#clock,
      messageTimeoutMs: configuration.timings.childMessageTimeoutMs,
      exitTimeoutMs: configuration.timings.childExitTimeoutMs,
      killTimeoutMs: configuration.timings.childKillTimeoutMs,
      replayBufferMaxBytes: configuration.replayBufferMaxBytes,
      // One budget for every shard: memory no longer grows with the number of leases held.
      replayBudget: new ReplayMemoryBudget(configuration.replayBufferTotalMaxBytes),
      childFailureLimit: configuration.childFailureLimit,
      onChildFailure: (error) => this.#onChildFailure(error),
      onShardGivenUp: (error) => this.#onShardGivenUp(error),
      sessions: this.#sessions,
      ...(options.launcher === undefined ? {} : { launcher: options.launcher }),
      ...(options.signalChild === undefined ? {} : { signalChild: options.signalChild }),
    });
  }

  #onChildFailure(error: MultiLangChildError): void {
    this.#countForShard('ChildFailures', error.shardId);
    if (error.reason === 'replay-incomplete') {
      this.#logger.error(
        'stopping: a child cannot be restarted without skipping records; restart the daemon to resume from the checkpoints',
        { shardId: error.shardId },
      );
      this.#failWith(error);
    } else if (this.#exitOnChildFailure) {
      this.#logger.error(
        'stopping because a child failed (kcl.exitOnChildFailure / --exit-on-child-failure)',
        { shardId: error.shardId, reason: error.reason },
      );
      this.#failWith(error);
    }
  }

  /** The processor has already logged it at ERROR, with the shard and the cause. */
  #onShardGivenUp(error: MultiLangShardGivenUpError): void {
    this.#countForShard('LeasesGivenUp', error.shardId);
    this.#options.onShardGivenUp?.(error);
  }

  #countForShard(name: string, shardId: string): void {
    this.#metrics?.record({
      name,
      value: 1,
      unit: 'Count',
      dimensions: { Operation: 'MultiLangDaemon', ShardId: shardId },
      level: 'SUMMARY',
    });
  }

  #onEvent(event: KclEvent): void {
    logConsumerEvent(this.#logger, event);
    this.#options.onEvent?.(event);
  }
}
