import type { Shard } from '@aws-sdk/client-kinesis';
import type { Clock, KclEvent, Lease, LeaseStore, Logger, RandomSource, WorkerRecord } from '@kcl/core';
import {
  ApplicationMigratedError,
  isLeaseComplete,
  jitter,
  KclError,
  parseHashKey,
  shardIdOfLeaseKey,
} from '@kcl/core';
import {
  findDeletableLeases,
  HashRangeAuditor,
  planInitialLeases,
  planMissingLeases,
  shardFilterFor,
  shardsFromKinesis,
} from '@kcl/shard-graph';
import { Backoff } from './backoff.js';
import type { ResolvedConsumerOptions } from './consumer-options.js';
import { classifyKinesisError } from './kinesis-errors.js';
import type { StreamReader } from './kinesis-stream.js';
import { type HeldLease, LeaseKeeper } from './lease-keeper.js';
import type { LeasePlanner } from './lease-planner.js';
import type { WorkerMetrics } from './metrics/worker-metrics.js';
import type { ProcessingErrorHandler, RecordProcessorFactory } from './record-processor.js';
import { type BatchReport, ShardConsumer, type ShardConsumerState } from './shard-consumer.js';

export interface WorkerDependencies {
  readonly options: ResolvedConsumerOptions;
  /** The store, with the call deadline already applied. */
  readonly store: LeaseStore;
  readonly stream: StreamReader;
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

export interface LeaseStatus {
  readonly leaseKey: string;
  readonly shardId: string;
  readonly state: ShardConsumerState;
  readonly checkpoint: string;
  readonly millisBehindLatest: number | null;
  readonly recordsProcessed: number;
}

/** Attempts of the start sequence when the store or Kinesis fails transiently (as the Java KCL's 20). */
const START_ATTEMPTS = 20;

interface RunningConsumer {
  readonly consumer: ShardConsumer;
  readonly done: Promise<void>;
}

/**
 * One worker: the loops of ARCHITECTURE §3 (renewal and heartbeat, expiry, rebalancing, shard sync,
 * cleanup) and one shard consumer per held lease — exactly one: a held lease without a running
 * consumer gets one again, and a lease is not taken again while its previous consumer still runs.
 */
export class Worker {
  readonly workerId: string;
  readonly #deps: WorkerDependencies;
  readonly #keeper: LeaseKeeper;
  readonly #consumers = new Map<string, RunningConsumer>();
  /** Stops a start that is still retrying. */
  readonly #starting = new AbortController();
  /** Stops taking new leases (rebalance, sync and cleanup loops). */
  readonly #taking = new AbortController();
  /** Stops renewal and expiry tracking; aborted last on a graceful stop. */
  readonly #renewing = new AbortController();
  readonly #auditor = new HashRangeAuditor();
  #loops: Promise<void>[] = [];
  /** The start sequence in flight (or done), so a stop can wait for it. */
  #initializing: Promise<void> | null = null;
  #stopping = false;
  #consecutiveRebalanceFailures = 0;

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
    });
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
        await untilAborted(this.#initializing, this.#starting.signal);
        break;
      } catch (error) {
        const transient = error instanceof KclError ? error.retryable : isTransientKinesisError(error);
        if (!transient || attempt >= START_ATTEMPTS || this.#starting.signal.aborted) throw error;
        logger.warn('starting the worker failed; retrying', { attempt, error });
        await clock.sleep(backoff.next(), this.#starting.signal);
        if (this.#starting.signal.aborted) throw error;
      }
    }
    this.#deps.emit({ type: 'worker-started', workerId: this.workerId });
    const { options } = this.#deps;
    this.#loops = [
      this.#keeper.watchExpiry(this.#renewing.signal),
      this.#renewLoop(),
      this.#rebalanceLoop(),
      this.#periodic(options.shardSyncIntervalMs, () => this.#syncShards()),
      this.#periodic(options.leaseCleanupIntervalMs, () => this.#cleanUpLeases()),
    ];
  }

  /** Makes a start that is still retrying give up (the consumer is being stopped). */
  cancelStart(): void {
    this.#starting.abort();
  }

  async #initialize(): Promise<void> {
    const { store, logger } = this.#deps;
    const proceed = (): void => {
      if (this.#starting.signal.aborted) {
        throw new KclError('SHUTDOWN', '@kcl/consumer: the worker was stopped while it was starting');
      }
    };
    await store.ensureSchema();
    proceed();
    await this.#checkMigrationMarker();
    proceed();
    await store.heartbeatWorker(this.workerId, { startedAt: new Date(this.#deps.clock.now()).toISOString() });
    proceed();
    let leases = await store.listLeases();
    proceed();
    if (leases.length === 0) {
      await this.#createInitialLeases();
      proceed();
      leases = await store.listLeases();
      proceed();
    }
    await this.#readopt(leases);
    logger.info('worker started', {
      workerId: this.workerId,
      stream: this.#deps.stream.name,
      leases: leases.length,
    });
  }

  /**
   * Graceful: stop taking, let every processor finish its batch and checkpoint in `shutdownRequested`,
   * release the leases, leave the registry — all within `shutdownTimeoutMs`; whatever is still running
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
    const consumers = [...this.#consumers.values()];
    if (graceful) {
      // Leave time for the releases after shutdownRequested.
      const reserve = Math.min(options.storeCallTimeoutMs, Math.floor(options.shutdownTimeoutMs / 4));
      for (const { consumer } of consumers) consumer.requestShutdown(deadline - reserve);
      const finished = await within(clock, remaining(), Promise.all(consumers.map(({ done }) => done)));
      if (!finished) {
        const stuck = [...this.#consumers.values()].map(({ consumer }) => consumer.leaseKey);
        logger.warn('shard consumers did not stop within shutdownTimeoutMs; abandoning them', {
          shutdownTimeoutMs: options.shutdownTimeoutMs,
          leaseKeys: stuck,
        });
        for (const held of this.#keeper.held()) this.#keeper.abandon(held);
      }
    } else {
      for (const held of this.#keeper.held()) this.#keeper.abandon(held);
    }
    this.#renewing.abort();
    if (graceful) await within(clock, remaining(), Promise.allSettled(this.#loops));
    else await Promise.allSettled(this.#loops);
    if (graceful) {
      await within(
        clock,
        remaining(),
        this.#deps.store.removeWorker(this.workerId).catch((error: unknown) => {
          logger.warn('could not remove the worker from the registry', { error });
        }),
      );
      await within(clock, remaining(), this.#deps.metrics.flush());
    }
    this.#deps.emit({ type: 'worker-stopped', workerId: this.workerId, graceful });
  }

  status(): LeaseStatus[] {
    return [...this.#consumers.values()].map(({ consumer }) => ({
      leaseKey: consumer.leaseKey,
      shardId: consumer.shardId,
      state: consumer.state,
      checkpoint: consumer.checkpoint.toString(),
      millisBehindLatest: consumer.millisBehindLatest,
      recordsProcessed: consumer.recordsProcessed,
    }));
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

  /**
   * Renews held leases and heartbeats. A renewal that failed (the whole call, or some leases) is tried
   * again after a short backoff rather than a whole interval later. Expiry is not kept here but by the
   * keeper's own watch, so a hung call cannot keep a lease alive.
   */
  async #renewLoop(): Promise<void> {
    const { clock, options, store, random } = this.#deps;
    const signal = this.#renewing.signal;
    const backoff = new Backoff({ initialMs: 200, maxMs: options.leaseRenewIntervalMs, random });
    let nextRenewAt = clock.monotonicNow() + options.leaseRenewIntervalMs;
    while (!signal.aborted) {
      const now = clock.monotonicNow();
      if (now >= nextRenewAt) {
        try {
          const started = clock.monotonicNow();
          const [result] = await Promise.all([
            this.#keeper.renewAll(),
            store
              .heartbeatWorker(this.workerId)
              .catch((error: unknown) => this.#storeError('heartbeat', error)),
          ]);
          this.#deps.metrics.renewed(result, this.#keeper.size, clock.monotonicNow() - started);
          if (result.failed > 0) {
            nextRenewAt = clock.monotonicNow() + Math.min(options.leaseRenewIntervalMs, backoff.next());
          } else {
            backoff.reset();
            nextRenewAt = now + options.leaseRenewIntervalMs;
          }
        } catch (error) {
          this.#storeError('renew leases', error);
          nextRenewAt = clock.monotonicNow() + Math.min(options.leaseRenewIntervalMs, backoff.next());
        }
      }
      await clock.sleep(Math.max(1, nextRenewAt - clock.monotonicNow()), signal);
    }
  }

  async #rebalanceLoop(): Promise<void> {
    const { clock, options, random } = this.#deps;
    const signal = this.#taking.signal;
    while (!signal.aborted) {
      await this.#rebalance();
      await clock.sleep(jitter(options.rebalanceIntervalMs, 0.25, random), signal);
    }
  }

  async #rebalance(): Promise<void> {
    const { store, clock, planner, metrics } = this.#deps;
    let leases: Lease[];
    let workers: WorkerRecord[];
    try {
      [leases, workers] = await Promise.all([store.listLeases(), store.listWorkers()]);
      this.#consecutiveRebalanceFailures = 0;
    } catch (error) {
      this.#consecutiveRebalanceFailures += 1;
      this.#storeError('list leases', error);
      return;
    }
    if (this.#taking.signal.aborted) return;
    this.#keeper.reconcile(leases);
    this.#reconcileConsumers();
    const now = clock.monotonicNow();
    const plan = planner.plan({
      leases,
      workers,
      heldLeaseKeys: new Set(this.#keeper.held().map((held) => held.leaseKey)),
      now,
    });
    metrics.rebalanced(plan.diagnostics);
    for (const choice of plan.take) {
      if (this.#taking.signal.aborted) return;
      await this.#take(choice.lease, choice.stolen);
    }
  }

  /**
   * Every held lease has exactly one running consumer. A held lease whose consumer ended without
   * giving it up (a late write revived it, a release failed) gets a new consumer: it resumes from the
   * checkpoint, or just releases the lease if the shard is finished.
   */
  #reconcileConsumers(): void {
    for (const held of this.#keeper.held()) {
      if (this.#consumers.has(held.leaseKey)) continue;
      this.#deps.logger.warn('a held lease had no shard consumer; starting one', { leaseKey: held.leaseKey });
      this.#startConsumer(held);
    }
  }

  async #take(lease: Lease, stolen: boolean): Promise<void> {
    const { store, clock, emit, options, logger } = this.#deps;
    if (this.#keeper.get(lease.leaseKey) !== undefined) return;
    const previous = this.#consumers.get(lease.leaseKey);
    if (previous !== undefined) {
      // The previous incarnation's consumer is still finishing: never two consumers for one lease.
      // One stuck for longer than the shutdown timeout is abandoned: its lease is gone (its writes are
      // refused), and being halted it starts no more deliveries.
      const haltedAt = previous.consumer.haltedAt;
      if (haltedAt === null || clock.monotonicNow() - haltedAt < options.shutdownTimeoutMs) return;
      logger.warn('abandoning a shard consumer that did not finish after losing its lease', {
        leaseKey: lease.leaseKey,
        haltedForMs: clock.monotonicNow() - haltedAt,
      });
      this.#consumers.delete(lease.leaseKey);
    }
    const sentAt = clock.monotonicNow();
    try {
      const result = await store.takeLease(lease.leaseKey, lease.leaseCounter, this.workerId);
      if (!result.ok) return;
      if (this.#taking.signal.aborted || this.#consumers.has(lease.leaseKey)) {
        // Stopping (or a consumer appeared meanwhile): give it straight back.
        await store.releaseLease(result.lease.leaseKey, result.lease.leaseCounter).catch(() => undefined);
        return;
      }
      emit({
        type: 'lease-taken',
        workerId: this.workerId,
        leaseKey: lease.leaseKey,
        previousOwner: lease.owner,
        stolen,
      });
      this.#deps.metrics.leaseTaken();
      this.#deps.planner.recordTake(result.lease, sentAt);
      this.#startConsumer(this.#keeper.adopt(result.lease, sentAt));
    } catch (error) {
      this.#storeError('take lease', error);
    }
  }

  /** Leases the store says are ours but that this process does not hold (a restart with the same id). */
  async #readopt(leases: readonly Lease[]): Promise<void> {
    for (const lease of leases) {
      if (
        lease.owner === this.workerId &&
        !isLeaseComplete(lease) &&
        this.#keeper.get(lease.leaseKey) === undefined
      ) {
        await this.#take(lease, false);
      }
    }
  }

  #startConsumer(held: HeldLease): void {
    const deps = this.#deps;
    const consumer = new ShardConsumer({
      held,
      keeper: this.#keeper,
      store: deps.store,
      stream: deps.stream,
      processorFactory: deps.processorFactory,
      settings: {
        maxRecords: deps.options.maxRecords,
        pollIntervalMs: deps.options.pollIntervalMs,
        parentPollIntervalMs: deps.options.parentPollIntervalMs,
        initialTimestamp:
          typeof deps.options.initialPosition === 'object' ? deps.options.initialPosition.timestamp : null,
        callProcessRecordsEvenForEmptyRecordList: deps.options.callProcessRecordsEvenForEmptyRecordList,
        processingRetry: deps.options.processingRetry,
        kinesisRetry: deps.options.kinesisRetry,
        onProcessingError: deps.onProcessingError,
        shutdownTimeoutMs: deps.options.shutdownTimeoutMs,
      },
      workerId: this.workerId,
      clock: deps.clock,
      random: deps.random,
      logger: deps.logger,
      emit: deps.emit,
      onBatch: (report: BatchReport) => deps.metrics.batch(report),
      onGetRecords: (durationMs, records) => deps.metrics.getRecords(durationMs, records),
    });
    const done = consumer
      .run()
      .then((outcome) => {
        deps.logger.debug('shard consumer ended', { leaseKey: held.leaseKey, outcome });
      })
      .finally(() => {
        if (this.#consumers.get(held.leaseKey)?.consumer === consumer) this.#consumers.delete(held.leaseKey);
      });
    this.#consumers.set(held.leaseKey, { consumer, done });
  }

  // ── shard sync and cleanup ────────────────────────────────────────────────────────────────────

  async #createInitialLeases(): Promise<void> {
    const { stream, options, store, emit, logger, clock } = this.#deps;
    // A listing that races a reshard can leave part of the key space uncovered: list again (as the Java KCL does).
    for (let attempt = 1; attempt <= 3; attempt++) {
      const shards = shardsFromKinesis(
        await stream.listShards(shardFilterFor(options.initialPosition), this.#taking.signal),
      );
      const plan = planInitialLeases(shards, { initialPosition: options.initialPosition });
      if (!plan.ok) {
        logger.warn('initial shard listing is not usable yet', { attempt, reason: plan.message });
        await clock.sleep(1_000, this.#taking.signal);
        continue;
      }
      const created: string[] = [];
      for (const init of plan.leases) {
        const result = await store.createLeaseIfAbsent(init);
        if (result.ok) created.push(init.leaseKey);
      }
      if (created.length > 0) {
        emit({ type: 'leases-created', workerId: this.workerId, leaseKeys: created, cause: 'initial' });
      }
      return;
    }
  }

  /**
   * The periodic audit: when the incomplete leases leave the same hole in the hash key space on several
   * consecutive checks, list the shards and create the missing leases. Leases without a hash range
   * (children recorded without one, rows imported from elsewhere) first get theirs from the listing,
   * stored, as the Java KCL does — otherwise one such lease would keep the audit blind for good. Also
   * notices a migration marker.
   */
  async #syncShards(): Promise<void> {
    const { store, stream, options, emit } = this.#deps;
    await this.#checkMigrationMarker();
    let leases = await store.listLeases();
    if (leases.length === 0) {
      await this.#createInitialLeases();
      return;
    }
    let listing: Shard[] | null = null;
    let verdict = this.#auditor.check(leases);
    if (verdict.result.status === 'unknown') {
      listing = await stream.listShards(undefined, this.#taking.signal);
      leases = await this.#fillHashRanges(leases, listing);
      verdict = this.#auditor.check(leases);
    }
    if (!verdict.shouldSync) return;
    listing ??= await stream.listShards(undefined, this.#taking.signal);
    const shards = shardsFromKinesis(listing);
    const plan = planMissingLeases(shards, leases, { initialPosition: options.initialPosition });
    if (!plan.ok) {
      this.#deps.logger.info('shard sync postponed', { reason: plan.message });
      return;
    }
    const created: string[] = [];
    for (const init of plan.leases) {
      const result = await store.createLeaseIfAbsent(init);
      if (result.ok) created.push(init.leaseKey);
    }
    this.#auditor.reset();
    if (created.length > 0)
      emit({ type: 'leases-created', workerId: this.workerId, leaseKeys: created, cause: 'audit' });
  }

  /**
   * Gives incomplete leases without a hash range the range of their shard from `listing`, and stores
   * it. A lease whose shard is not listed any more (trimmed or deleted) covers nothing now: it is left
   * out of the result, so it cannot hide or fill a hole.
   */
  async #fillHashRanges(leases: readonly Lease[], listing: readonly Shard[]): Promise<Lease[]> {
    const { store, logger } = this.#deps;
    const byShard = new Map(listing.map((shard) => [shard.ShardId, shard]));
    const result: Lease[] = [];
    for (const lease of leases) {
      if (lease.hashKeyRange !== null || isLeaseComplete(lease)) {
        result.push(lease);
        continue;
      }
      const range = byShard.get(shardIdOfLeaseKey(lease.leaseKey))?.HashKeyRange;
      if (range?.StartingHashKey === undefined || range.EndingHashKey === undefined) continue;
      const hashKeyRange = {
        startingHashKey: parseHashKey(range.StartingHashKey),
        endingHashKey: parseHashKey(range.EndingHashKey),
      };
      const updated = await store.updateLeaseMeta(lease.leaseKey, { hashKeyRange });
      logger.info('filled a missing hash key range from the shard listing', { leaseKey: lease.leaseKey });
      result.push(updated ?? { ...lease, hashKeyRange });
    }
    return result;
  }

  /**
   * Deletes finished parent leases whose children have all started and whose own parents are gone.
   * A finished lease that knows no children ended because its shard (or the whole stream) no longer
   * exists, or its children were not recorded: the listing tells which. Children found are recorded
   * (the lease is then deleted the usual way); a shard Kinesis no longer lists, and that has no
   * children, is gone for good and its lease is deleted.
   */
  async #cleanUpLeases(): Promise<void> {
    const { store, emit, stream, logger, metrics } = this.#deps;
    const leases = await store.listLeases();
    for (const lease of findDeletableLeases(leases)) {
      await store.deleteLease(lease.leaseKey);
      emit({ type: 'lease-deleted', workerId: this.workerId, leaseKey: lease.leaseKey });
    }
    const childless = leases.filter(
      (lease) => lease.checkpoint.isShardEnd && lease.childShardIds.length === 0,
    );
    if (childless.length === 0) return;
    let listing: Shard[];
    let streamGone = false;
    try {
      listing = await stream.listShards(undefined, this.#taking.signal);
    } catch (error) {
      if (classifyKinesisError(error) !== 'not-found') throw error;
      listing = [];
      streamGone = true;
    }
    const listed = new Set(listing.map((shard) => shard.ShardId));
    let deleted = 0;
    for (const lease of childless) {
      const shardId = shardIdOfLeaseKey(lease.leaseKey);
      const children = listing
        .filter((shard) => shard.ParentShardId === shardId || shard.AdjacentParentShardId === shardId)
        .map((shard) => shard.ShardId as string);
      if (children.length > 0) {
        await store.updateLeaseMeta(lease.leaseKey, { childShardIds: children });
        continue;
      }
      if (listed.has(shardId)) continue;
      await store.deleteLease(lease.leaseKey);
      deleted += 1;
      emit({ type: 'lease-deleted', workerId: this.workerId, leaseKey: lease.leaseKey });
    }
    if (deleted > 0) {
      metrics.garbageLeasesDeleted(deleted);
      const message = streamGone
        ? 'the stream no longer exists: deleted the leases of its finished shards'
        : 'deleted the leases of finished shards that no longer exist';
      logger.warn(message, { stream: stream.name, deleted });
    }
  }

  async #checkMigrationMarker(): Promise<void> {
    const marker = await this.#deps.store.getMigrationMarker();
    if (marker === null) return;
    const error = new ApplicationMigratedError(this.#deps.options.applicationName, marker.migratedTo);
    if (this.#loops.length === 0) throw error;
    this.#deps.logger.error('the application was migrated to another lease store; stopping', {
      migratedTo: marker.migratedTo,
    });
    this.#deps.onFatal(error);
  }

  #storeError(operation: string, error: unknown): void {
    this.#deps.logger.warn(`${operation} failed`, { error });
    this.#deps.emit({ type: 'store-error', workerId: this.workerId, operation, error });
  }
}

function isTransientKinesisError(error: unknown): boolean {
  const kind = classifyKinesisError(error);
  return kind === 'throttled' || kind === 'transient';
}

/** `work`, or a rejection as soon as `signal` aborts (the work itself goes on, ignored). */
function untilAborted<T>(work: Promise<T>, signal: AbortSignal): Promise<T> {
  const stopped = (): KclError =>
    new KclError('SHUTDOWN', '@kcl/consumer: the worker was stopped while it was starting');
  if (signal.aborted) {
    work.catch(() => undefined);
    return Promise.reject(stopped());
  }
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => reject(stopped());
    signal.addEventListener('abort', onAbort, { once: true });
    work.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(error);
      },
    );
  });
}

/** Waits for `work` at most `ms`; true when it settled in time. */
async function within(clock: Clock, ms: number, work: Promise<unknown>): Promise<boolean> {
  const timer = new AbortController();
  const settled = work.then(
    () => true,
    () => true,
  );
  try {
    return await Promise.race([settled, clock.sleep(ms, timer.signal).then(() => false)]);
  } finally {
    timer.abort();
  }
}
