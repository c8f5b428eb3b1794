import type { Clock, KclEvent, Lease, LeaseStore, Logger, RandomSource, WorkerRecord } from '@kcl/core';
import { ApplicationMigratedError, isLeaseComplete, jitter } from '@kcl/core';
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
import type { StreamReader } from './kinesis-stream.js';
import { type HeldLease, LeaseKeeper } from './lease-keeper.js';
import type { LeasePlanner } from './lease-planner.js';
import type { WorkerMetrics } from './metrics/worker-metrics.js';
import type { ProcessingErrorHandler, RecordProcessorFactory } from './record-processor.js';
import { type BatchReport, ShardConsumer, type ShardConsumerState } from './shard-consumer.js';

export interface WorkerDependencies {
  readonly options: ResolvedConsumerOptions;
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

/**
 * One worker: the loops of ARCHITECTURE §3 (renewal and heartbeat, rebalancing, shard sync, cleanup)
 * and one shard consumer per held lease.
 */
export class Worker {
  readonly workerId: string;
  readonly #deps: WorkerDependencies;
  readonly #keeper: LeaseKeeper;
  readonly #consumers = new Map<string, { consumer: ShardConsumer; done: Promise<void> }>();
  /** Stops taking new leases (rebalance, sync and cleanup loops). */
  readonly #taking = new AbortController();
  /** Stops renewal; aborted last on a graceful stop. */
  readonly #renewing = new AbortController();
  readonly #auditor = new HashRangeAuditor();
  #loops: Promise<void>[] = [];
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

  /** Ensures the schema, registers, creates the initial leases, re-adopts this worker's leases, starts the loops. */
  async start(): Promise<void> {
    const { store, options, logger } = this.#deps;
    await store.ensureSchema();
    await this.#checkMigrationMarker();
    await store.heartbeatWorker(this.workerId, { startedAt: new Date(this.#deps.clock.now()).toISOString() });
    let leases = await store.listLeases();
    if (leases.length === 0) {
      await this.#createInitialLeases();
      leases = await store.listLeases();
    }
    await this.#readopt(leases);
    logger.info('worker started', {
      workerId: this.workerId,
      stream: this.#deps.stream.name,
      leases: leases.length,
    });
    this.#deps.emit({ type: 'worker-started', workerId: this.workerId });
    this.#loops = [
      this.#renewLoop(),
      this.#rebalanceLoop(),
      this.#periodic(options.shardSyncIntervalMs, () => this.#syncShards()),
      this.#periodic(options.leaseCleanupIntervalMs, () => this.#cleanUpLeases()),
    ];
  }

  /**
   * Graceful: stop taking, let every processor checkpoint in `shutdownRequested`, release the leases,
   * leave the registry. Forced: drop everything at once (leases expire for the others).
   */
  async stop(graceful: boolean): Promise<void> {
    if (this.#stopping && graceful) return;
    this.#stopping = true;
    this.#taking.abort();
    const consumers = [...this.#consumers.values()];
    if (graceful) {
      for (const { consumer } of consumers) consumer.requestShutdown();
      await Promise.all(consumers.map(({ done }) => done));
    } else {
      for (const held of this.#keeper.held()) this.#keeper.abandon(held);
    }
    this.#renewing.abort();
    await Promise.allSettled(this.#loops);
    if (graceful) {
      try {
        await this.#deps.store.removeWorker(this.workerId);
      } catch (error) {
        this.#deps.logger.warn('could not remove the worker from the registry', { error });
      }
      await this.#deps.metrics.flush();
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

  /** Renews held leases and heartbeats; wakes early to declare leases that expire locally lost. */
  async #renewLoop(): Promise<void> {
    const { clock, options, store, random } = this.#deps;
    const signal = this.#renewing.signal;
    const backoff = new Backoff({ initialMs: 500, maxMs: options.leaseRenewIntervalMs, random });
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
          backoff.reset();
          nextRenewAt = now + options.leaseRenewIntervalMs;
        } catch (error) {
          this.#storeError('renew leases', error);
          nextRenewAt = clock.monotonicNow() + Math.min(options.leaseRenewIntervalMs, backoff.next());
        }
      }
      this.#keeper.expireOverdue();
      const nextExpiry = this.#keeper.nextExpiry();
      const wakeAt = nextExpiry === null ? nextRenewAt : Math.min(nextRenewAt, nextExpiry + 1);
      await clock.sleep(Math.max(1, wakeAt - clock.monotonicNow()), signal);
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

  async #take(lease: Lease, stolen: boolean): Promise<void> {
    const { store, clock, emit } = this.#deps;
    if (this.#keeper.get(lease.leaseKey) !== undefined) return;
    const sentAt = clock.monotonicNow();
    try {
      const result = await store.takeLease(lease.leaseKey, lease.leaseCounter, this.workerId);
      if (!result.ok) return;
      if (this.#taking.signal.aborted) {
        // Stopping: give it straight back.
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
   * consecutive checks, list the shards and create the missing leases. Also notices a migration marker.
   */
  async #syncShards(): Promise<void> {
    const { store, stream, options, emit } = this.#deps;
    await this.#checkMigrationMarker();
    const leases = await store.listLeases();
    if (leases.length === 0) {
      await this.#createInitialLeases();
      return;
    }
    const verdict = this.#auditor.check(leases);
    if (!verdict.shouldSync) return;
    const shards = shardsFromKinesis(await stream.listShards(undefined, this.#taking.signal));
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

  /** Deletes finished parent leases whose children have all started and whose own parents are gone. */
  async #cleanUpLeases(): Promise<void> {
    const { store, emit } = this.#deps;
    const leases = await store.listLeases();
    for (const lease of findDeletableLeases(leases)) {
      await store.deleteLease(lease.leaseKey);
      emit({ type: 'lease-deleted', workerId: this.workerId, leaseKey: lease.leaseKey });
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
