import type {
  Clock,
  KclEvent,
  Lease,
  LeaseHandoffStep,
  LeaseStore,
  Logger,
  RandomSource,
  WorkerRecord,
} from '@kcl/core';
import {
  ApplicationMigratedError,
  encodeLeaseFigures,
  isLeaseComplete,
  jitter,
  KclError,
  LEASE_FIGURES_METADATA_KEY,
  LEASE_RENEW_INTERVAL_METADATA_KEY,
  untilAborted,
} from '@kcl/core';
import { streamIdentifierOfLeaseKey } from '@kcl/shard-graph';
import { linkSignals } from './abort-link.js';
import { Backoff } from './backoff.js';
import type { ResolvedConsumerOptions } from './consumer-options.js';
import { within } from './deadline.js';
import { isRetryableKinesisError } from './kinesis/kinesis-errors.js';
import type { StreamIdentity, StreamReader } from './kinesis/kinesis-stream.js';
import { type HandoffOutcome, HandoffRequests } from './leases/handoff-requests.js';
import { cleanUpLeases } from './leases/lease-cleanup.js';
import { LeaseKeeper } from './leases/lease-keeper.js';
import type { LeasePlanner } from './leases/lease-planner.js';
import { runRenewalLoop } from './leases/renewal-loop.js';
import { SessionLiveness } from './leases/session-liveness.js';
import { LeaseFigureTracker } from './metrics/lease-figure-tracker.js';
import type { WorkerMetrics } from './metrics/worker-metrics.js';
import { Mutex } from './mutex.js';
import type { ProcessingErrorHandler, RecordProcessorFactory } from './processing/record-processor.js';
import { type LeaseStatus, ShardConsumers, type StreamBinding } from './processing/shard-consumers.js';
import { type ShardConsumerSettings, shardConsumerSettings } from './processing/shard-run.js';
import { type DescribableStreamReader, type StreamEntry, StreamRegistry } from './streams/stream-registry.js';

export interface WorkerDependencies {
  readonly options: ResolvedConsumerOptions;
  /** The store, with the call deadline already applied. */
  readonly store: LeaseStore;
  /** The one stream read; null when the application reads several (`readerFor` then). */
  readonly stream: StreamReader | null;
  /** Several streams: the reader of each. */
  readonly readerFor?: ((identity: StreamIdentity) => DescribableStreamReader) | null;
  /** Several streams: the Kinesis client's region (a stream known from its leases only is addressed by ARN). */
  readonly kinesisRegion?: () => Promise<string>;
  /**
   * Fan-out: resolves to the ARN of the stream consumer registered on a stream (registering it when
   * missing); null when polling.
   */
  readonly registerStreamConsumer: ((stream: StreamIdentity, signal: AbortSignal) => Promise<string>) | null;
  readonly processorFactory: RecordProcessorFactory;
  readonly onProcessingError: ProcessingErrorHandler | null;
  readonly planner: LeasePlanner;
  readonly metrics: WorkerMetrics;
  readonly clock: Clock;
  readonly random: RandomSource;
  readonly logger: Logger;
  readonly emit: (event: KclEvent) => void;
  /** Called when the worker stops on its own because of an unrecoverable error. */
  readonly onFatal: (error: unknown) => void;
}

/** Attempts of the start sequence when the store or Kinesis fails transiently (as the Java KCL's 20). */
const START_ATTEMPTS = 20;

/**
 * One worker: the loops of ARCHITECTURE §3 (renewal and heartbeat, expiry, rebalancing, shard sync,
 * cleanup) and one shard consumer per held lease — exactly one: a held lease without a running
 * consumer gets one again, and a lease is not taken again while its previous consumer still runs.
 */
export class Worker {
  readonly workerId: string;
  readonly #deps: WorkerDependencies;
  readonly #keeper: LeaseKeeper;
  readonly #consumers: ShardConsumers;
  /** Stops a start that is still retrying. */
  readonly #starting = new AbortController();
  /** Stops taking new leases (rebalance, sync and cleanup loops). */
  readonly #taking = new AbortController();
  /** Stops renewal and expiry tracking; aborted last on a graceful stop. */
  readonly #renewing = new AbortController();
  readonly #streams: StreamRegistry;
  /** The shard consumer settings of each stream (its initial timestamp, its stream consumer). */
  readonly #bindings = new WeakMap<StreamEntry, StreamBinding>();
  /** The hand-offs this worker asked for and waits on. */
  readonly #handoffs: HandoffRequests;
  /** Hand-offs being settled right now (read, no longer pending, not yet taken up or dropped). */
  readonly #settling = new Set<string>();
  /** One check of the pending hand-offs at a time (the periodic check, and a graceful stop's). */
  readonly #handoffCheck = new Mutex();
  #loops: Promise<void>[] = [];
  /** The rebalance loop (it requests hand-offs), once started. */
  #rebalancing: Promise<void> = Promise.resolve();
  /** The start sequence in flight (or done), so a stop can wait for it. */
  #initializing: Promise<void> | null = null;
  #stopping = false;
  /** Fan-out: each stream's registered stream consumer ARN, once asked for (absent: to be registered again). */
  readonly #streamConsumers = new Map<string, Promise<string>>();
  /** Set when a graceful stop leaves the worker registry: no more heartbeats. */
  #leaving = false;
  /** Session liveness, when the store offers it and it is not turned off. */
  readonly #liveness: SessionLiveness | null;
  /**
   * Who the last rebalance listing named — lease owners, and the requesters of pending hand-offs (one
   * that dies before the lease reaches it must be judged, or the lease handed to it waits for its
   * expiry): the liveness check's candidates.
   */
  #lastListed: ReadonlySet<string> = new Set();
  /**
   * Workers found dead by their session, with the registry heartbeat they had then (null: no row, as
   * after a graceful stop): they stay out of the fair share until that heartbeat moves or their row
   * comes back (alive after all: no longer judged dead either) or goes. A crashed worker
   * never removes its row, and the registry alone counts it live until its heartbeat is old — after
   * its leases were taken at once, it would otherwise hold a share of nothing for that long.
   */
  readonly #goneWorkers = new Map<string, { readonly heartbeat: number | null; readonly since: number }>();
  /** Leases of workers judged dead, with the counter they had when first listed so. */
  #deadOwnerCounters = new Map<string, { owner: string; counter: number }>();
  /** Wakes the rebalance loop early (a worker was found dead). */
  #wake = new AbortController();
  /** Said once: leases without a stream in a multi-stream application. */
  #warnedUnaccepted = false;
  /** A shard reported a processing error no retry can fix: the worker was told to stop. */
  #processingFailed = false;
  /** The heartbeat in flight, so that leaving the registry is not undone by it. */
  #heartbeating: Promise<void> = Promise.resolve();
  /** What the heartbeat publishes about each held lease (throughput, lag, last checkpoint). */
  readonly #figures: LeaseFigureTracker;
  /** When the worker started (the wall clock), published with every heartbeat. */
  #startedAt = '';

  constructor(deps: WorkerDependencies) {
    this.#deps = deps;
    this.workerId = deps.options.workerId;
    this.#keeper = new LeaseKeeper({
      store: deps.store,
      workerId: deps.options.workerId,
      leaseExpiryMs: deps.options.leaseExpiryMs,
      clock: deps.clock,
      logger: deps.logger,
      emit: deps.emit,
      onLost: (held) => {
        deps.metrics.leaseLost();
        deps.logger.info('lease lost', { leaseKey: held.leaseKey });
      },
      onHandoffRequested: (held, handoff) => this.#consumers.handOver(held, handoff),
    });
    this.#handoffs = new HandoffRequests({
      store: deps.store,
      workerId: deps.options.workerId,
      timeoutMs: deps.options.handoffTimeoutMs,
      leaseExpiryMs: deps.options.leaseExpiryMs,
      clock: deps.clock,
      onReadError: (_leaseKey, error) => this.#storeError('read a lease asked for', error),
    });
    this.#streams = new StreamRegistry({
      single:
        deps.options.streamIdentity === null || deps.stream === null
          ? null
          : { identity: deps.options.streamIdentity, reader: deps.stream },
      multi:
        deps.options.multiStream === null || deps.readerFor === undefined || deps.readerFor === null
          ? null
          : {
              settings: deps.options.multiStream,
              readerFor: deps.readerFor,
              region: deps.kinesisRegion ?? (() => Promise.reject(new Error('no region given'))),
            },
      initialPosition: deps.options.initialPosition,
      store: deps.store,
      workerId: deps.options.workerId,
      clock: deps.clock,
      logger: deps.logger,
      emit: deps.emit,
    });
    this.#liveness =
      deps.options.sessionLiveness && deps.store.capabilities.sessionLiveness === true
        ? new SessionLiveness({
            store: deps.store,
            workerId: deps.options.workerId,
            checkIntervalMs: deps.options.livenessCheckIntervalMs,
            logger: deps.logger,
            onDead: () => this.#wake.abort(),
          })
        : null;
    const figures = new LeaseFigureTracker(deps.clock);
    this.#figures = figures;
    this.#consumers = new ShardConsumers({
      keeper: this.#keeper,
      store: deps.store,
      streamOf: (leaseKey) => this.#bindingOf(leaseKey),
      processorFactory: deps.processorFactory,
      settings: {
        ...shardConsumerSettings(deps.options, deps.onProcessingError),
        onFatal: (error) => this.#processingFatal(error),
      },
      workerId: deps.options.workerId,
      clock: deps.clock,
      random: deps.random,
      logger: deps.logger,
      emit: (event) => {
        if (event.type === 'checkpoint-written') figures.checkpointed(event.leaseKey);
        deps.emit(event);
      },
      metrics: deps.metrics,
      figures,
    });
  }

  /** How a lease's shards are read: its stream's reader and settings (null: not a stream read here). */
  #bindingOf(leaseKey: string): StreamBinding | null {
    const entry = this.#streams.forLeaseKey(leaseKey);
    if (entry === null) return null;
    let binding = this.#bindings.get(entry);
    if (binding === undefined) {
      const { options, onProcessingError } = this.#deps;
      const settings: ShardConsumerSettings = shardConsumerSettings(
        { ...options, initialPosition: entry.initialPosition },
        onProcessingError,
        {
          consumerArn: () => this.#streamConsumerArn(entry, this.#taking.signal),
          consumerGone: (consumerArn) => this.#streamConsumerGone(entry, consumerArn),
        },
      );
      binding = {
        stream: entry.reader,
        consumedStream: entry.stream,
        settings: { ...settings, onFatal: (error) => this.#processingFatal(error) },
      };
      this.#bindings.set(entry, binding);
    }
    return binding;
  }

  /**
   * Ensures the schema, registers, creates the initial leases, re-adopts this worker's leases, starts
   * the loops. Transient store and Kinesis failures are retried with backoff (up to 20 attempts);
   * anything else — or a stop — ends the start with the error.
   */
  async start(): Promise<void> {
    const { clock, logger, random } = this.#deps;
    const backoff = new Backoff({ initialMs: 500, maxMs: 5_000, random });
    for (let attempt = 1; ; attempt++) {
      try {
        // A stop during the start ends it at once, even while a store call hangs; the stop then waits
        // (within its deadline) for what is in flight, so nothing is written after it returns.
        this.#initializing = this.#initialize();
        await untilAborted(this.#initializing, this.#starting.signal, stoppedWhileStarting);
        break;
      } catch (error) {
        const transient = KclError.is(error) ? error.retryable : isRetryableKinesisError(error);
        if (!transient || attempt >= START_ATTEMPTS || this.#starting.signal.aborted) {
          await this.#liveness?.close();
          throw error;
        }
        logger.warn('starting the worker failed; retrying', { attempt, error });
        await clock.sleep(backoff.next(), this.#starting.signal);
        if (this.#starting.signal.aborted) throw error;
      }
    }
    this.#deps.emit({ type: 'worker-started', workerId: this.workerId });
    const { options } = this.#deps;
    this.#rebalancing = this.#rebalanceLoop();
    this.#loops = [
      this.#keeper.watchExpiry(this.#renewing.signal),
      this.#renewLoop(),
      this.#rebalancing,
      this.#periodic(options.shardSyncIntervalMs, () => this.#syncShards()),
      this.#periodic(options.leaseCleanupIntervalMs, () => this.#cleanUpLeases()),
      this.#periodic(options.handoffPollIntervalMs, () => this.#checkHandoffs()),
    ];
    if (options.multiStream !== null) {
      this.#loops.push(this.#periodic(options.multiStream.syncIntervalMs, () => this.#syncStreams()));
    }
    const liveness = this.#liveness;
    if (liveness !== null) {
      this.#loops.push(this.#periodic(options.livenessCheckIntervalMs, () => this.#checkLiveness(liveness)));
    }
  }

  /** Makes a start that is still retrying give up (the consumer is being stopped). */
  cancelStart(): void {
    this.#starting.abort();
  }

  async #initialize(): Promise<void> {
    const { store, logger } = this.#deps;
    const proceed = (): void => {
      if (this.#starting.signal.aborted) throw stoppedWhileStarting();
    };
    await store.admin.ensureSchema();
    proceed();
    await this.#checkMigrationMarker();
    proceed();
    const single = this.#streams.single;
    if (this.#deps.registerStreamConsumer !== null && single !== null) {
      await this.#streamConsumerArn(single, this.#starting.signal);
      proceed();
    }
    // The session first: a worker others saw registered without one is not taken for dead (only a
    // worker seen holding its session and then without it is).
    if (this.#liveness !== null && !this.#liveness.attached) {
      // Best effort: without a session the worker runs as on a store without sessions until a check
      // attaches one (an earlier session of this worker id may not have ended yet).
      await this.#liveness.attach(this.#starting.signal);
      proceed();
    }
    this.#startedAt = new Date(this.#deps.clock.now()).toISOString();
    await store.workers.heartbeat(this.workerId, this.#heartbeatMetadata());
    proceed();
    const listed = await this.#streams.sync(this.#starting.signal).then(
      () => null,
      (error: unknown) => error,
    );
    proceed();
    let leases = await store.leases.list();
    proceed();
    if (listed !== null) {
      // The stream list could not be read: with leases in the table the worker reads those (no stream
      // counts as former until a list was read) and asks again at every stream sync; without, it
      // cannot know what to read, and the start is retried.
      if (!leases.some((lease) => this.#streams.accepts(lease.leaseKey))) throw listed;
      logger.warn('the stream list could not be read; reading the streams the lease table holds', {
        error: listed,
      });
    }
    if (await this.#createInitialLeases(this.#streams.tracked(), leases)) {
      proceed();
      leases = await store.leases.list();
      proceed();
    }
    this.#streams.noteLeases(leases);
    await this.#readopt(leases);
    logger.info('worker started', {
      workerId: this.workerId,
      streams: this.#streams.tracked().map((entry) => entry.identifier ?? entry.stream.name),
      leases: leases.length,
    });
  }

  /**
   * Creates the leases of the streams among `entries` that have none in `leases` (a new application,
   * or a stream new to it) at their initial positions. True when it created any.
   */
  async #createInitialLeases(entries: readonly StreamEntry[], leases: readonly Lease[]): Promise<boolean> {
    let created = false;
    for (const entry of entries) {
      if (this.#streams.leasesOf(entry, leases).length > 0) continue;
      if (!this.#streams.mayCreateLeases(entry)) {
        this.#warnLeasesDeleted(entry);
        continue;
      }
      await entry.sync.createInitialLeases(this.#taking.signal);
      created = true;
    }
    return created;
  }

  /**
   * Graceful: stop taking, leave the registry (so no owner hands this worker a lease any more), let
   * every processor finish its batch and checkpoint in `shutdownRequested`, release the leases — all
   * within `shutdownTimeoutMs`; whatever is still running
   * then is abandoned (its leases expire for the others). Forced: drop everything at once.
   */
  async stop(graceful: boolean): Promise<void> {
    if (this.#stopping && graceful) return;
    this.#stopping = true;
    const { clock, options, logger } = this.#deps;
    const deadline = clock.monotonicNow() + options.shutdownTimeoutMs;
    const remaining = (): number => Math.max(0, deadline - clock.monotonicNow());
    this.#starting.abort();
    this.#taking.abort();
    if (graceful && this.#initializing !== null) {
      await within(
        clock,
        remaining(),
        this.#initializing.catch(() => undefined),
      );
    }
    const draining = graceful ? this.#leave(deadline) : Promise.resolve(this.#handoffs.clear());
    const consumers = this.#consumers.running();
    if (graceful) {
      // Leave time for the releases after shutdownRequested.
      const reserve = Math.min(options.storeCallTimeoutMs, Math.floor(options.shutdownTimeoutMs / 4));
      for (const { consumer } of consumers) consumer.requestShutdown(deadline - reserve);
      const finished = await within(clock, remaining(), Promise.all(consumers.map(({ done }) => done)));
      if (!finished) {
        const stuck = this.#consumers.running().map(({ consumer }) => consumer.leaseKey);
        logger.warn('shard consumers did not stop within shutdownTimeoutMs; abandoning them', {
          shutdownTimeoutMs: options.shutdownTimeoutMs,
          leaseKeys: stuck,
        });
        for (const held of this.#keeper.held()) this.#keeper.abandon(held);
      }
    } else {
      for (const held of this.#keeper.held()) this.#keeper.abandon(held);
      // The session ends once the abandoned consumers have ended (within shutdownTimeoutMs), not at
      // once: until then the others wait for the leases to expire, as without sessions.
      const liveness = this.#liveness;
      if (liveness !== null) {
        void within(
          clock,
          options.shutdownTimeoutMs,
          Promise.allSettled(consumers.map(({ done }) => done)),
        ).then(() => liveness.close());
      }
    }
    if (graceful) await within(clock, remaining(), draining);
    this.#renewing.abort();
    if (graceful) await within(clock, remaining(), Promise.allSettled(this.#loops));
    else await Promise.allSettled(this.#loops);
    if (graceful) {
      await within(
        clock,
        remaining(),
        this.#deps.store.workers.remove(this.workerId).catch((error: unknown) => {
          logger.warn('could not remove the worker from the registry', { error });
        }),
      );
      await within(clock, remaining(), this.#deps.metrics.flush());
    }
    // Last: once the session ends, the others take whatever this worker still holds at once.
    if (this.#liveness !== null && graceful) await within(clock, remaining(), this.#liveness.close());
    this.#deps.emit({ type: 'worker-stopped', workerId: this.workerId, graceful });
  }

  status(): LeaseStatus[] {
    return this.#consumers.status();
  }

  // ── loops ─────────────────────────────────────────────────────────────────────────────────────

  /** Work, then sleep; never overlapping; ends when `signal` aborts. */
  async #periodic(
    intervalMs: number,
    work: () => Promise<void>,
    signal = this.#taking.signal,
  ): Promise<void> {
    const { clock } = this.#deps;
    await clock.sleep(intervalMs, signal);
    while (!signal.aborted) {
      await work().catch((error: unknown) => this.#storeError('periodic task', error));
      await clock.sleep(intervalMs, signal);
    }
  }

  /** Renewal and heartbeat (the keeper's expiry watch runs beside it). */
  #renewLoop(): Promise<void> {
    const { clock, options, random, metrics } = this.#deps;
    return runRenewalLoop({
      keeper: this.#keeper,
      renewIntervalMs: options.leaseRenewIntervalMs,
      clock,
      random,
      onRound: (round, held, durationMs) => metrics.renewed(round, held, durationMs),
      onStoreError: (operation, error) => this.#storeError(operation, error),
      heartbeat: () => this.#heartbeat(),
      signal: this.#renewing.signal,
    });
  }

  async #rebalanceLoop(): Promise<void> {
    const { clock, options, random } = this.#deps;
    const signal = this.#taking.signal;
    while (!signal.aborted) {
      // A fresh wake before the listing: a death found while this round runs wakes the next one.
      if (this.#wake.signal.aborted) this.#wake = new AbortController();
      await this.#rebalance();
      // A worker found dead wakes the loop early: its leases are taken at once.
      const link = linkSignals(signal, this.#wake.signal);
      try {
        await clock.sleep(jitter(options.rebalanceIntervalMs, 0.25, random), link.signal);
      } finally {
        link.dispose();
      }
    }
  }

  async #rebalance(): Promise<void> {
    const { store, clock, planner, metrics, options } = this.#deps;
    let leases: Lease[];
    let workers: WorkerRecord[];
    const listedAt = clock.monotonicNow();
    try {
      // Without metadata: every worker's entry carries its lease figures (kilobytes), which the plan
      // does not need, and every worker lists every worker this often.
      [leases, workers] = await Promise.all([store.leases.list(), store.workers.list({ metadata: false })]);
    } catch (error) {
      this.#storeError('list leases', error);
      return;
    }
    if (this.#taking.signal.aborted) return;
    this.#lastListed = new Set(
      leases.flatMap((lease) => [
        ...(lease.owner === null ? [] : [lease.owner]),
        ...(lease.handoff === null ? [] : [lease.handoff.to]),
      ]),
    );
    this.#noteGoneWorkers(workers);
    this.#reviveWriters(leases);
    // Several streams: a lease without a stream in its key is no shard this worker can read.
    if (this.#streams.multiStream) leases = this.#acceptedLeases(leases);
    this.#keeper.reconcile(leases);
    this.#consumers.reconcile(this.#keeper.held());
    if (options.handoff) this.#adoptHandoffs(leases, listedAt);
    const now = clock.monotonicNow();
    const plan = planner.plan({
      leases,
      workers,
      heldLeaseKeys: new Set(this.#keeper.held().map((held) => held.leaseKey)),
      now,
      wallNow: clock.now(),
      waitingHandoffs: new Set([...this.#handoffs.keys(), ...this.#settling]),
      ...(this.#liveness === null
        ? {}
        : { deadOwners: this.#liveness.dead(), goneWorkers: new Set(this.#goneWorkers.keys()) }),
    });
    metrics.rebalanced(plan.diagnostics);
    for (const choice of plan.take) {
      if (this.#taking.signal.aborted) return;
      const { lease, stolen } = choice;
      // A steal from a live owner becomes a hand-off: the owner finishes its batch and checkpoints
      // before the lease moves, so nothing is processed twice nor by two workers at once.
      // A lease already in a hand-off nobody settles (see the planner) is stolen directly.
      if (
        stolen &&
        options.handoff &&
        lease.owner !== null &&
        lease.owner !== this.workerId &&
        lease.handoff === null
      ) {
        await this.#requestHandoff(lease);
      } else {
        await this.#take(lease, stolen);
      }
    }
  }

  async #take(lease: Lease, stolen: boolean): Promise<void> {
    // A hand-off this worker waits on, or is settling, is settled by `#checkHandoffs` alone — unless
    // its owner was found dead: nobody will hand the lease over, so it is taken now.
    if (this.#settling.has(lease.leaseKey)) return;
    if (this.#handoffs.has(lease.leaseKey)) {
      if (lease.owner === null || this.#liveness?.dead().has(lease.owner) !== true) return;
      this.#handoffs.drop(lease.leaseKey);
    }
    await this.#takeNow(lease, stolen);
  }

  /** Takes the lease at its listed counter; true when it is now held and consumed here. */
  async #takeNow(lease: Lease, stolen: boolean): Promise<boolean> {
    const { store, clock } = this.#deps;
    if (this.#keeper.get(lease.leaseKey) !== undefined) return false;
    // The previous incarnation's consumer is still finishing: never two consumers for one lease.
    if (!this.#consumers.mayStart(lease.leaseKey)) return false;
    const sentAt = clock.monotonicNow();
    try {
      const result = await store.leases.take(lease.leaseKey, lease.leaseCounter, this.workerId);
      if (!result.ok) return false;
      return await this.#consume(result.lease, sentAt, lease.owner, stolen);
    } catch (error) {
      this.#storeError('take lease', error);
      return false;
    }
  }

  /**
   * Starts consuming a lease the store now says is this worker's (taken, or handed over), its expiry
   * counted from `writeSentAt`. A worker that is stopping (or already runs a consumer of it) gives it
   * straight back.
   */
  async #consume(
    lease: Lease,
    writeSentAt: number,
    previousOwner: string | null,
    stolen: boolean,
  ): Promise<boolean> {
    const { store, emit } = this.#deps;
    if (this.#taking.signal.aborted || this.#consumers.has(lease.leaseKey)) {
      await store.leases.release(lease.leaseKey, lease.leaseCounter).catch(() => undefined);
      return false;
    }
    emit({ type: 'lease-taken', workerId: this.workerId, leaseKey: lease.leaseKey, previousOwner, stolen });
    this.#deps.metrics.leaseTaken();
    this.#deps.planner.recordTake(lease, writeSentAt);
    this.#consumers.start(this.#keeper.adopt(lease, writeSentAt));
    return true;
  }

  // ── fan-out ──────────────────────────────────────────────────────────────────────────────────

  /**
   * The registered stream consumer's ARN: registered (or checked) once, and again after a subscription
   * found it gone. After the start, a failure that retrying will not mend (a `consumerArn` that does
   * not exist, say) stops the worker: no shard could be read.
   */
  #streamConsumerArn(entry: StreamEntry, signal: AbortSignal): Promise<string> {
    const register = this.#deps.registerStreamConsumer;
    if (register === null) {
      return Promise.reject(
        new KclError('FANOUT_NOT_CONFIGURED', '@kcl/consumer: this consumer reads by polling, not fan-out'),
      );
    }
    const key = entry.identifier ?? '';
    let current = this.#streamConsumers.get(key);
    if (current === undefined) {
      const registering = register(entry.identity, signal);
      current = registering;
      this.#streamConsumers.set(key, registering);
      registering.catch((error: unknown) => {
        if (this.#streamConsumers.get(key) === registering) this.#streamConsumers.delete(key);
        const lasting = !(KclError.is(error) ? error.retryable : isRetryableKinesisError(error));
        if (!lasting || this.#loops.length === 0 || signal.aborted) return;
        if (entry.identifier === undefined) {
          this.#deps.logger.error('the stream consumer cannot be used; stopping', { error });
          this.#deps.onFatal(error);
        } else {
          // One stream of several: its shards are given up and tried again; the others read on.
          this.#deps.logger.error('the stream consumer of a stream cannot be used', {
            stream: entry.identifier,
            error,
          });
        }
      });
    }
    return current;
  }

  #streamConsumerGone(entry: StreamEntry, consumerArn: string): void {
    const key = entry.identifier ?? '';
    const current = this.#streamConsumers.get(key);
    if (current === undefined) return;
    void current.then(
      (arn) => {
        if (arn === consumerArn && this.#streamConsumers.get(key) === current) {
          this.#deps.logger.warn('the stream consumer is gone; registering it again', { consumerArn });
          this.#streamConsumers.delete(key);
        }
      },
      () => undefined,
    );
  }

  // ── hand-offs this worker asked for ───────────────────────────────────────────────────────────

  async #requestHandoff(lease: Lease): Promise<void> {
    const from = lease.owner;
    if (from === null || this.#handoffs.has(lease.leaseKey)) return;
    if (this.#keeper.get(lease.leaseKey) !== undefined) return;
    try {
      if (!(await this.#handoffs.request(lease))) return;
    } catch (error) {
      this.#storeError('request hand-off', error);
      return;
    }
    this.#deps.logger.info('asked for a lease', { leaseKey: lease.leaseKey, from });
    this.#handoffEvent(lease.leaseKey, from, 'requested');
  }

  /**
   * Hand-offs to this worker that the listing shows and nobody here waits on (asked for before a
   * restart under the same worker id, or by a request whose answer was lost) are waited on like its
   * own: taking such a lease directly would move it while its owner is handing it over.
   */
  #adoptHandoffs(leases: readonly Lease[], listedAt: number): void {
    for (const lease of leases) {
      if (this.#settling.has(lease.leaseKey) || this.#keeper.get(lease.leaseKey) !== undefined) continue;
      if (!this.#handoffs.adopt(lease, listedAt)) continue;
      this.#deps.logger.info('waiting on a hand-off asked for earlier', {
        leaseKey: lease.leaseKey,
        from: lease.owner,
      });
    }
  }

  /** Reads the pending hand-offs; takes over those handed over, steals those that timed out. */
  #checkHandoffs(): Promise<void> {
    return this.#handoffCheck.run(() => this.#checkHandoffsNow());
  }

  async #checkHandoffsNow(): Promise<void> {
    if (this.#handoffs.size === 0) return;
    // Until each outcome is settled, a rebalance must not take these leases itself (it would race the
    // adoption of a lease just handed over).
    const settling = [...this.#handoffs.keys()];
    for (const leaseKey of settling) this.#settling.add(leaseKey);
    try {
      for (const outcome of await this.#handoffs.check()) await this.#settleHandoff(outcome);
    } finally {
      for (const leaseKey of settling) this.#settling.delete(leaseKey);
    }
  }

  #heartbeat(): Promise<void> {
    if (this.#leaving) return Promise.resolve();
    this.#heartbeating = this.#deps.store.workers.heartbeat(this.workerId, this.#heartbeatMetadata()).then(
      () => undefined,
      (error: unknown) => this.#storeError('heartbeat', error),
    );
    return this.#heartbeating;
  }

  /**
   * What the registry shows about this worker: its start, its heartbeat interval (tools judge its
   * liveness by it), and the figures of the leases it holds.
   */
  #heartbeatMetadata(): Record<string, string> {
    return {
      startedAt: this.#startedAt,
      [LEASE_RENEW_INTERVAL_METADATA_KEY]: String(this.#deps.options.leaseRenewIntervalMs),
      [LEASE_FIGURES_METADATA_KEY]: this.#leaseFigures(),
    };
  }

  /** The figures of the held leases; none (an empty list) when they cannot be computed: never skip a heartbeat. */
  #leaseFigures(): string {
    try {
      return this.#figures.publish(this.#keeper.held().map((held) => held.leaseKey));
    } catch (error) {
      this.#deps.logger.warn('could not compute the lease figures; the heartbeat goes without them', {
        error,
      });
      return encodeLeaseFigures([]);
    }
  }

  /**
   * The start of a graceful stop: once the rebalance loop has ended (no more hand-off requests), the
   * worker leaves the registry — after its last heartbeat landed, so that it does not register it
   * again — and an owner that checks the registry from then on releases a lease this worker asked for
   * instead of handing it over. A completion already on its way (its owner read the registry earlier)
   * is caught here: until every pending hand-off is settled (at most its timeout, and the stop's
   * `deadline`), they are read, and a lease handed over is released at once, so any worker takes it up
   * at the owner's checkpoint instead of after its expiry. One that timed out is not stolen.
   */
  async #leave(deadline: number): Promise<void> {
    const { clock, options, store, logger } = this.#deps;
    const remaining = (): number => Math.max(0, deadline - clock.monotonicNow());
    await within(clock, remaining(), this.#rebalancing);
    this.#leaving = true;
    await within(
      clock,
      remaining(),
      this.#heartbeating
        .then(() => store.workers.remove(this.workerId))
        .catch((error: unknown) => {
          logger.warn('could not remove the worker from the registry', { error });
        }),
    );
    while (this.#handoffs.size > 0) {
      await this.#checkHandoffs().catch((error: unknown) =>
        this.#storeError('read a lease asked for', error),
      );
      if (this.#handoffs.size === 0 || remaining() <= 0) break;
      await clock.sleep(Math.min(options.handoffPollIntervalMs, remaining()));
    }
    this.#handoffs.clear();
  }

  async #settleHandoff(outcome: HandoffOutcome): Promise<void> {
    const { logger } = this.#deps;
    if (outcome.kind === 'dropped') {
      if (outcome.confirmed) this.#handoffEvent(outcome.leaseKey, outcome.from, 'dropped');
      return;
    }
    const { lease, from } = outcome;
    if (outcome.kind === 'received') {
      if (this.#keeper.get(lease.leaseKey) !== undefined) return;
      if (this.#taking.signal.aborted) {
        // Stopping: given straight back, whatever still runs here.
        await this.#deps.store.leases.release(lease.leaseKey, lease.leaseCounter).catch(() => undefined);
        return;
      }
      if (!this.#consumers.mayStart(lease.leaseKey)) {
        // Ours in the store; the next rebalance takes it up once the earlier consumer has ended.
        logger.info('a lease was handed over while its earlier consumer still ends', {
          leaseKey: lease.leaseKey,
        });
        return;
      }
      if (await this.#consume(lease, outcome.writeSentAt, from, true)) {
        this.#handoffEvent(lease.leaseKey, from, 'received');
      }
      return;
    }
    // A stopping worker does not steal: the owner may still be in `shutdownRequested`.
    if (this.#taking.signal.aborted) return;
    logger.warn('a hand-off was not completed in time; stealing the lease', {
      leaseKey: lease.leaseKey,
      from,
      handoffTimeoutMs: this.#deps.options.handoffTimeoutMs,
    });
    if (await this.#takeNow(lease, true)) this.#handoffEvent(lease.leaseKey, from, 'fell-back');
  }

  #handoffEvent(leaseKey: string, from: string, step: LeaseHandoffStep): void {
    this.#deps.emit({
      type: 'lease-handoff',
      workerId: this.workerId,
      leaseKey,
      from,
      to: this.workerId,
      step,
    });
  }

  /** Leases the store says are ours but that this process does not hold (a restart with the same id). */
  async #readopt(leases: readonly Lease[]): Promise<void> {
    for (const lease of leases) {
      if (
        lease.owner === this.workerId &&
        this.#streams.accepts(lease.leaseKey) &&
        !isLeaseComplete(lease) &&
        this.#keeper.get(lease.leaseKey) === undefined
      ) {
        await this.#take(lease, false);
      }
    }
  }

  // ── shard sync and cleanup ────────────────────────────────────────────────────────────────────

  /**
   * The hole audit (which also notices a migration marker): of the one stream, or of each stream
   * listed and each former stream that still has leases.
   */
  async #syncShards(): Promise<void> {
    await this.#checkMigrationMarker();
    const single = this.#streams.single;
    if (single !== null) {
      await single.sync.audit(this.#taking.signal);
      return;
    }
    const leases = await this.#deps.store.leases.list();
    this.#streams.noteLeases(leases);
    for (const entry of this.#streamsOf(leases)) {
      if (this.#taking.signal.aborted) return;
      const streamLeases = this.#streams.leasesOf(entry, leases);
      // A former stream without leases is done with; only a listed one gets leases again — and not
      // one whose leases this worker saw (another worker deleted them as a former stream).
      if (streamLeases.length === 0) {
        if (!this.#streams.tracked().includes(entry)) continue;
        if (!this.#streams.mayCreateLeases(entry)) {
          this.#warnLeasesDeleted(entry);
          continue;
        }
      }
      try {
        await entry.sync.audit(this.#taking.signal, streamLeases);
      } catch (error) {
        this.#storeError(`shard sync of ${entry.identifier}`, error);
      }
    }
  }

  #noteGoneWorkers(workers: readonly WorkerRecord[]): void {
    const liveness = this.#liveness;
    if (liveness === null) return;
    const heartbeats = new Map(workers.map((worker) => [worker.workerId, worker.heartbeat]));
    const now = this.#deps.clock.monotonicNow();
    for (const [workerId, gone] of this.#goneWorkers) {
      const heartbeat = heartbeats.get(workerId) ?? null;
      if (heartbeat !== gone.heartbeat) {
        // Its row moved since it was found dead: it heartbeats, or registered again after a graceful
        // stop removed the row — alive (restarted under its id, or without a session).
        this.#goneWorkers.delete(workerId);
        if (heartbeat !== null) liveness.revive(workerId, 'registry');
      } else if (
        heartbeat === null &&
        !liveness.dead().has(workerId) &&
        now - gone.since > this.#deps.options.leaseExpiryMs
      ) {
        this.#goneWorkers.delete(workerId);
      }
    }
    for (const workerId of liveness.dead()) {
      if (!this.#goneWorkers.has(workerId)) {
        this.#goneWorkers.set(workerId, { heartbeat: heartbeats.get(workerId) ?? null, since: now });
      }
    }
  }

  /**
   * One liveness check. Workers kept out of the share are watched in the same statement for a lease
   * expiry after they were found dead (a crashed worker's row lingers for ever): one seen holding a
   * session again is alive, and back in the share at once, not only at its next heartbeat.
   */
  async #checkLiveness(liveness: SessionLiveness): Promise<void> {
    const since = this.#deps.clock.monotonicNow() - this.#deps.options.leaseExpiryMs;
    const watched = [...this.#goneWorkers].flatMap(([workerId, gone]) =>
      gone.since >= since && !liveness.dead().has(workerId) ? [workerId] : [],
    );
    await liveness.check(this.#lastListed, watched);
    for (const workerId of liveness.watchedLive()) this.#goneWorkers.delete(workerId);
  }

  /**
   * Session liveness: a worker judged dead whose lease counter moved while it still owned the lease
   * wrote it — it lives without a session — and is not judged dead any more. The counters seen at the
   * judgement are kept per lease.
   */
  #reviveWriters(leases: readonly Lease[]): void {
    const liveness = this.#liveness;
    if (liveness === null) return;
    const dead = liveness.dead();
    const seen = new Map<string, { owner: string; counter: number }>();
    for (const lease of leases) {
      if (lease.owner === null || !dead.has(lease.owner)) continue;
      const before = this.#deadOwnerCounters.get(lease.leaseKey);
      if (before !== undefined && before.owner === lease.owner && before.counter !== lease.leaseCounter) {
        liveness.revive(lease.owner);
        continue;
      }
      seen.set(lease.leaseKey, before ?? { owner: lease.owner, counter: lease.leaseCounter });
    }
    this.#deadOwnerCounters = seen;
  }

  /**
   * The leases of this application's streams. Several streams: leases keyed by a bare shard id (an
   * application that read one stream under the same name before) are left alone, said once.
   */
  #acceptedLeases(leases: readonly Lease[]): Lease[] {
    const accepted = leases.filter((lease) => this.#streams.accepts(lease.leaseKey));
    if (accepted.length < leases.length && !this.#warnedUnaccepted) {
      this.#warnedUnaccepted = true;
      this.#deps.logger.warn(
        'the lease table holds leases without a stream in their key (written when the application read one stream); they are not read — migrate them or use another applicationName',
        {
          leaseKeys: leases
            .filter((lease) => !this.#streams.accepts(lease.leaseKey))
            .slice(0, 5)
            .map((l) => l.leaseKey),
        },
      );
    }
    return accepted;
  }

  #warnLeasesDeleted(entry: StreamEntry): void {
    this.#deps.logger.warn(
      'a listed stream has no leases although this worker saw some: another worker deleted them as a former stream; they are not created again — every worker must list the same streams',
      { stream: entry.identifier },
    );
  }

  /** The streams listed, and the former streams that `leases` still hold leases of. */
  #streamsOf(leases: readonly Lease[]): StreamEntry[] {
    const entries = new Set(this.#streams.tracked());
    for (const lease of leases) {
      if (!this.#streams.accepts(lease.leaseKey)) continue;
      const entry = this.#streams.forLeaseKey(lease.leaseKey);
      if (entry !== null) entries.add(entry);
    }
    return [...entries];
  }

  /**
   * Several streams: reads the stream list again, creates the leases of streams new to the
   * application, and deletes the leases of former streams that are due (`formerStreams`) or no
   * longer exist. Their consumers then lose their leases and end.
   */
  async #syncStreams(): Promise<void> {
    const { store, logger, emit, metrics } = this.#deps;
    const signal = this.#taking.signal;
    const changes = await this.#streams.sync(signal);
    let leases = await store.leases.list();
    if (changes.added.length > 0 && (await this.#createInitialLeases(changes.added, leases))) {
      leases = await store.leases.list();
    }
    this.#streams.noteLeases(leases);
    const byStream = new Map<string, Lease[]>();
    for (const lease of this.#acceptedLeases(leases)) {
      const identifier = streamIdentifierOfLeaseKey(lease.leaseKey);
      if (identifier === undefined) continue;
      byStream.set(identifier, [...(byStream.get(identifier) ?? []), lease]);
    }
    const listed = new Set(this.#streams.tracked().map((entry) => entry.identifier));
    metrics.streams({
      listed: listed.size,
      former: [...byStream.keys()].filter((identifier) => !listed.has(identifier)).length,
    });
    const due = await this.#streams.dueForDeletion(new Set(byStream.keys()), signal);
    let deletedStreams = 0;
    for (const identifier of due) {
      if (signal.aborted) return;
      const streamLeases = byStream.get(identifier) ?? [];
      for (const lease of streamLeases) {
        await store.leases.delete(lease.leaseKey);
        emit({ type: 'lease-deleted', workerId: this.workerId, leaseKey: lease.leaseKey });
      }
      this.#streams.forget(identifier);
      deletedStreams += 1;
      logger.warn('deleted the leases of a former stream', {
        stream: identifier,
        leases: streamLeases.length,
      });
    }
    if (deletedStreams > 0) metrics.streamLeasesDeleted(deletedStreams);
  }

  async #cleanUpLeases(): Promise<void> {
    const { store, logger, emit, metrics } = this.#deps;
    await cleanUpLeases({
      store,
      streamOf: (leaseKey) =>
        this.#streams.accepts(leaseKey) ? (this.#streams.forLeaseKey(leaseKey)?.reader ?? null) : null,
      workerId: this.workerId,
      logger,
      emit,
      onGarbageDeleted: (count) => metrics.garbageLeasesDeleted(count),
      signal: this.#taking.signal,
    });
  }

  async #checkMigrationMarker(): Promise<void> {
    const marker = await this.#deps.store.admin.getMigrationMarker();
    if (marker === null) return;
    const error = new ApplicationMigratedError(this.#deps.options.applicationName, marker.migratedTo);
    if (this.#loops.length === 0) throw error;
    this.#deps.logger.error('the application was migrated to another lease store; stopping', {
      migratedTo: marker.migratedTo,
    });
    this.#deps.onFatal(error);
  }

  /** A shard's processing failed in a way no retry can fix: the worker stops (once, for all shards). */
  #processingFatal(error: unknown): void {
    if (this.#processingFailed) return;
    this.#processingFailed = true;
    this.#deps.onFatal(error);
  }

  #storeError(operation: string, error: unknown): void {
    this.#deps.logger.warn(`${operation} failed`, { error });
    this.#deps.emit({ type: 'store-error', workerId: this.workerId, operation, error });
  }
}

function stoppedWhileStarting(): KclError {
  return new KclError('CONSUMER_STOPPED', '@kcl/consumer: the worker was stopped while it was starting');
}
