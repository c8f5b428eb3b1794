import type { ChildShard } from '@aws-sdk/client-kinesis';
import type { Clock, KclEvent, Lease, LeaseStore, Logger, RandomSource } from '@kcl/core';
import { ExtendedSequenceNumber, KclError, LeaseLostError, shardIdOfLeaseKey } from '@kcl/core';
import {
  checkParentReadiness,
  childShardFromKinesis,
  leaseKeyForShard,
  parentLeaseKeysOf,
  planShardEnd,
  streamIdentifierOfLeaseKey,
} from '@kcl/shard-graph';
import { Backoff } from './backoff.js';
import { ShardCheckpointer } from './checkpointer.js';
import type { IteratorPosition, StreamReader } from './kinesis-stream.js';
import { deaggregateRecords } from './kpl-deaggregation.js';
import type { HeldLease, LeaseKeeper } from './lease-keeper.js';
import { type FetchedBatch, RecordFetcher } from './record-fetcher.js';
import type {
  KinesisRecord,
  ProcessingErrorAction,
  ProcessingErrorHandler,
  RecordProcessor,
  RecordProcessorFactory,
} from './record-processor.js';

export type ShardConsumerState =
  | 'waiting-on-parents'
  | 'initializing'
  | 'processing'
  | 'shard-ending'
  | 'shutting-down'
  | 'finished';

export interface ShardConsumerSettings {
  readonly maxRecords: number;
  readonly pollIntervalMs: number;
  readonly parentPollIntervalMs: number;
  readonly initialTimestamp: Date | null;
  readonly callProcessRecordsEvenForEmptyRecordList: boolean;
  readonly processingRetry: { readonly initialMs: number; readonly maxMs: number };
  readonly kinesisRetry: { readonly initialMs: number; readonly maxMs: number };
  readonly onProcessingError: ProcessingErrorHandler | null;
  /** Longest wait for `shutdownRequested` on a graceful stop. */
  readonly shutdownTimeoutMs: number;
}

/** Figures the worker collects per batch (status, metrics). */
export interface BatchReport {
  readonly leaseKey: string;
  readonly shardId: string;
  readonly records: number;
  readonly bytes: number;
  readonly millisBehindLatest: number;
  readonly processingMs: number;
  readonly droppedAggregates: number;
}

export interface ShardConsumerDependencies {
  readonly held: HeldLease;
  readonly keeper: LeaseKeeper;
  readonly store: LeaseStore;
  readonly stream: StreamReader;
  readonly processorFactory: RecordProcessorFactory;
  readonly settings: ShardConsumerSettings;
  readonly workerId: string;
  readonly clock: Clock;
  readonly random: RandomSource;
  readonly logger: Logger;
  readonly emit: (event: KclEvent) => void;
  readonly onBatch?: (report: BatchReport) => void;
  readonly onGetRecords?: (durationMs: number, records: number) => void;
}

/** `shardEnded` returned without checkpointing SHARD_END. */
export class ShardEndNotCheckpointedError extends KclError {
  constructor(leaseKey: string) {
    super(
      'CHECKPOINT_INVALID',
      `@kcl/consumer: shardEnded of ${leaseKey} returned without checkpointing; call await checkpointer.checkpoint() in shardEnded so the child shards can start`,
    );
  }
}

function isLeaseLost(error: unknown): boolean {
  return (
    error instanceof LeaseLostError || (error instanceof KclError && error.code === 'CHECKPOINT_LEASE_LOST')
  );
}

/** How a shard consumer ended. */
export type ShardConsumerOutcome = 'shard-ended' | 'lease-lost' | 'shutdown' | 'complete';

/**
 * Consumes one lease incarnation: waits for the parents, initializes the processor, delivers batches
 * in order, handles the shard's end (child leases, SHARD_END checkpoint), and shuts down on a lost
 * lease or a graceful stop.
 */
export class ShardConsumer {
  readonly leaseKey: string;
  readonly shardId: string;
  readonly #deps: ShardConsumerDependencies;
  readonly #stop = new AbortController();
  readonly #halt = new AbortController();
  #state: ShardConsumerState = 'waiting-on-parents';
  #processor: RecordProcessor | null = null;
  #checkpointer: ShardCheckpointer | null = null;
  #fetcher: RecordFetcher | null = null;
  #millisBehindLatest: number | null = null;
  #recordsProcessed = 0;
  #run: Promise<ShardConsumerOutcome> | null = null;
  #shutdownDeadline: number | null = null;
  #haltedAt: number | null = null;

  constructor(deps: ShardConsumerDependencies) {
    this.#deps = deps;
    this.leaseKey = deps.held.leaseKey;
    this.shardId = shardIdOfLeaseKey(deps.held.leaseKey);
    const halt = (): void => {
      this.#haltedAt ??= deps.clock.monotonicNow();
      this.#halt.abort();
    };
    if (deps.held.signal.aborted) halt();
    deps.held.signal.addEventListener('abort', halt, { once: true });
    this.#stop.signal.addEventListener('abort', halt, { once: true });
  }

  get state(): ShardConsumerState {
    return this.#state;
  }

  get held(): HeldLease {
    return this.#deps.held;
  }

  get millisBehindLatest(): number | null {
    return this.#millisBehindLatest;
  }

  get recordsProcessed(): number {
    return this.#recordsProcessed;
  }

  get checkpoint(): ExtendedSequenceNumber {
    return this.#checkpointer?.lastCheckpoint ?? this.#deps.held.lease.checkpoint;
  }

  /** Runs the consumer to its end. Calling it again returns the same run. */
  run(): Promise<ShardConsumerOutcome> {
    this.#run ??= this.#execute();
    return this.#run;
  }

  /**
   * Asks for a graceful stop: the current batch finishes, then `shutdownRequested` and a release.
   * `deadline` (monotonic ms) bounds `shutdownRequested`; without it, it gets `shutdownTimeoutMs`.
   */
  requestShutdown(deadline: number | null = null): void {
    if (deadline !== null && (this.#shutdownDeadline === null || deadline < this.#shutdownDeadline)) {
      this.#shutdownDeadline = deadline;
    }
    this.#stop.abort();
  }

  /** True once the consumer is halting (a stop was asked for, or its lease is gone). */
  get halted(): boolean {
    return this.#halted;
  }

  /** When the consumer began halting (monotonic ms), or null. */
  get haltedAt(): number | null {
    return this.#haltedAt;
  }

  get #halted(): boolean {
    return this.#stop.signal.aborted || this.#deps.held.signal.aborted;
  }

  /** Aborts when the consumer halts (a stop, or the lease gone): one signal for the consumer's life. */
  #haltSignal(): AbortSignal {
    return this.#halt.signal;
  }

  async #execute(): Promise<ShardConsumerOutcome> {
    const { held, logger } = this.#deps;
    try {
      if (!(await this.#waitForParents())) return await this.#finish();
      if (held.lease.checkpoint.isShardEnd) {
        // Finished earlier (its children were created before SHARD_END was written): nothing to read.
        this.#state = 'finished';
        await this.#deps.keeper.release(held);
        return 'complete';
      }
      this.#processor = this.#deps.processorFactory(this.shardId, {
        shardId: this.shardId,
        leaseKey: this.leaseKey,
        workerId: this.#deps.workerId,
      });
      this.#checkpointer = new ShardCheckpointer({
        held,
        keeper: this.#deps.keeper,
        store: this.#deps.store,
        workerId: this.#deps.workerId,
        emit: this.#deps.emit,
      });
      if (!(await this.#initialize())) return await this.#finish();
      return await this.#process();
    } catch (error) {
      logger.error('shard consumer failed', { leaseKey: this.leaseKey, error });
      this.#deps.emit({
        type: 'processing-error',
        workerId: this.#deps.workerId,
        leaseKey: this.leaseKey,
        error,
        attempt: 1,
        action: 'skip',
      });
      // Give the lease up so this or another worker starts the shard again from its checkpoint.
      this.requestShutdown();
      return await this.#finish();
    } finally {
      await this.#fetcher?.stop();
      this.#state = 'finished';
    }
  }

  async #waitForParents(): Promise<boolean> {
    const { held, store, clock, settings } = this.#deps;
    const parentKeys = parentLeaseKeysOf(held.lease);
    if (parentKeys.length === 0) return true;
    const backoff = new Backoff({
      initialMs: 500,
      maxMs: settings.parentPollIntervalMs,
      random: this.#deps.random,
    });
    while (!this.#halted) {
      try {
        const parents = new Map<string, Lease | null>();
        for (const parentKey of parentKeys) parents.set(parentKey, await store.getLease(parentKey));
        if (checkParentReadiness(held.lease, (key) => parents.get(key)).ready) return true;
        await clock.sleep(settings.parentPollIntervalMs, this.#haltSignal());
      } catch (error) {
        this.#deps.logger.warn('reading parent leases failed', { leaseKey: this.leaseKey, error });
        await clock.sleep(backoff.next(), this.#haltSignal());
      }
    }
    return false;
  }

  /** The lease key of another shard of the same stream (multi-stream keys keep their prefix). */
  #siblingKey(shardId: string): string {
    return leaseKeyForShard(shardId, streamIdentifierOfLeaseKey(this.leaseKey));
  }

  async #initialize(): Promise<boolean> {
    this.#state = 'initializing';
    const { held, clock, settings } = this.#deps;
    const processor = this.#processor;
    if (processor === null) return false;
    const backoff = new Backoff({ ...settings.processingRetry, random: this.#deps.random });
    while (!this.#halted) {
      try {
        await processor.initialize?.({
          shardId: this.shardId,
          leaseKey: this.leaseKey,
          checkpoint: held.lease.checkpoint,
          pendingCheckpoint: held.lease.pendingCheckpoint,
        });
        return true;
      } catch (error) {
        this.#deps.logger.warn('processor initialize failed; retrying', { leaseKey: this.leaseKey, error });
        await clock.sleep(backoff.next(), this.#haltSignal());
      }
    }
    return false;
  }

  #startPosition(): IteratorPosition {
    const checkpoint = this.#deps.held.lease.checkpoint;
    switch (checkpoint.sentinel) {
      case 'TRIM_HORIZON':
        return { type: 'TRIM_HORIZON' };
      case 'LATEST':
        return { type: 'LATEST' };
      case 'AT_TIMESTAMP': {
        const timestamp = this.#deps.settings.initialTimestamp;
        if (timestamp === null) {
          this.#deps.logger.warn(
            'lease checkpoint is AT_TIMESTAMP but no initial timestamp is configured; reading from TRIM_HORIZON',
            {
              leaseKey: this.leaseKey,
            },
          );
          return { type: 'TRIM_HORIZON' };
        }
        return { type: 'AT_TIMESTAMP', timestamp };
      }
      case 'SHARD_END':
        return { type: 'TRIM_HORIZON' };
      default:
        return { type: 'AT_SEQUENCE_NUMBER', sequenceNumber: checkpoint.sequenceNumber };
    }
  }

  async #process(): Promise<ShardConsumerOutcome> {
    this.#state = 'processing';
    const deps = this.#deps;
    const fetcher = new RecordFetcher({
      stream: deps.stream,
      shardId: this.shardId,
      start: this.#startPosition(),
      maxRecords: deps.settings.maxRecords,
      pollIntervalMs: deps.settings.pollIntervalMs,
      minCallSpacingMs: 200,
      clock: deps.clock,
      random: deps.random,
      backoff: deps.settings.kinesisRetry,
      onIssue: (issue) => {
        if (issue.kind === 'expired-iterator') {
          deps.emit({ type: 'iterator-expired', workerId: deps.workerId, leaseKey: this.leaseKey });
        } else if (issue.kind === 'throttled' || issue.kind === 'transient') {
          deps.emit({
            type: 'throttled',
            workerId: deps.workerId,
            leaseKey: this.leaseKey,
            operation: issue.kind === 'throttled' ? 'GetRecords' : 'GetRecords (transient failure)',
            backoffMs: issue.backoffMs,
          });
        }
        deps.logger.debug('GetRecords issue', {
          leaseKey: this.leaseKey,
          kind: issue.kind,
          backoffMs: issue.backoffMs,
        });
      },
      ...(deps.onGetRecords === undefined ? {} : { onCall: deps.onGetRecords }),
    });
    this.#fetcher = fetcher;
    fetcher.start();
    const halt = this.#haltSignal();
    while (!this.#halted) {
      const batch = await fetcher.next(halt);
      if (batch === null || this.#halted) break;
      // A shard reaches its end only when every record of it was delivered and acknowledged: a
      // delivery cut short (by a stop or a lost lease) is not a delivery, so it ends here instead.
      if (!(await this.#deliver(batch))) break;
      if (batch.shardEnd !== null) {
        await fetcher.stop();
        return this.#endShard(batch);
      }
    }
    return this.#finish();
  }

  /**
   * Delivers one batch. Returns false when the delivery did not complete because the consumer is
   * halting (stopping, or the lease is lost): the processor may not have handled every record.
   */
  async #deliver(batch: FetchedBatch): Promise<boolean> {
    const { held, settings, clock } = this.#deps;
    const checkpointer = this.#checkpointer;
    const processor = this.#processor;
    if (checkpointer === null || processor === null) return false;
    this.#millisBehindLatest = batch.millisBehindLatest;
    const { records: expanded, droppedAggregates } = deaggregateRecords(
      batch.records,
      held.lease.hashKeyRange,
    );
    // Records at or below the checkpoint were handled already: drop them, on every attempt (a
    // processor that checkpointed in the middle of a batch and then threw gets only the rest again).
    const pending = (): KinesisRecord[] => {
      const last = checkpointer.lastCheckpoint;
      return expanded.filter((record) =>
        ExtendedSequenceNumber.of(record.sequenceNumber, record.subSequenceNumber).isAfter(last),
      );
    };
    let records = pending();
    if (records.length === 0 && !settings.callProcessRecordsEvenForEmptyRecordList) {
      this.#report(records, batch, 0, droppedAggregates);
      return true;
    }
    const lastRecord = records.at(-1);
    if (lastRecord !== undefined) {
      checkpointer.beginDelivery(
        ExtendedSequenceNumber.of(lastRecord.sequenceNumber, lastRecord.subSequenceNumber),
      );
    }
    let completed = false;
    try {
      const backoff = new Backoff({ ...settings.processingRetry, random: this.#deps.random });
      for (let attempt = 1; ; attempt++) {
        if (this.#halted || !held.isHeld()) return false;
        if (attempt > 1) {
          records = pending();
          if (records.length === 0) {
            completed = true;
            this.#report(records, batch, 0, droppedAggregates);
            return true;
          }
        }
        const started = clock.monotonicNow();
        try {
          await processor.processRecords({
            shardId: this.shardId,
            leaseKey: this.leaseKey,
            records,
            millisBehindLatest: batch.millisBehindLatest,
            checkpointer,
            signal: this.#haltSignal(),
          });
          this.#recordsProcessed += records.length;
          this.#report(records, batch, clock.monotonicNow() - started, droppedAggregates);
          // Returned, but after the stop (or the loss) began: it may have handled only part of the
          // batch, so this is not a completed delivery.
          if (this.#halted) return false;
          completed = true;
          return true;
        } catch (error) {
          // A checkpoint refused because the lease is gone ends delivery: there is nothing to retry.
          if (isLeaseLost(error) || !held.isHeld()) return false;
          const action = await this.#decide(error, records, attempt);
          this.#deps.emit({
            type: 'processing-error',
            workerId: this.#deps.workerId,
            leaseKey: this.leaseKey,
            error,
            attempt,
            action,
          });
          this.#deps.logger.warn('processRecords failed', {
            leaseKey: this.leaseKey,
            attempt,
            action,
            error,
          });
          if (action === 'skip') {
            completed = true;
            return true;
          }
          if (this.#halted) return false;
          await clock.sleep(backoff.next(), this.#haltSignal());
        }
      }
    } finally {
      checkpointer.endDelivery(completed);
    }
  }

  async #decide(
    error: unknown,
    records: readonly KinesisRecord[],
    attempt: number,
  ): Promise<ProcessingErrorAction> {
    const handler = this.#deps.settings.onProcessingError;
    if (handler === null) return 'retry';
    try {
      const action = await handler(error, {
        shardId: this.shardId,
        leaseKey: this.leaseKey,
        records,
        attempt,
      });
      return action === 'skip' ? 'skip' : 'retry';
    } catch {
      return 'retry';
    }
  }

  #report(
    records: readonly KinesisRecord[],
    batch: FetchedBatch,
    processingMs: number,
    droppedAggregates: number,
  ): void {
    let bytes = 0;
    for (const record of records) bytes += record.data.byteLength;
    this.#deps.onBatch?.({
      leaseKey: this.leaseKey,
      shardId: this.shardId,
      records: records.length,
      bytes,
      millisBehindLatest: batch.millisBehindLatest,
      processingMs,
      droppedAggregates,
    });
  }

  async #endShard(batch: FetchedBatch): Promise<ShardConsumerOutcome> {
    this.#state = 'shard-ending';
    const deps = this.#deps;
    const { held, store, keeper, clock, settings } = deps;
    const checkpointer = this.#checkpointer;
    const processor = this.#processor;
    if (checkpointer === null || processor === null || batch.shardEnd === null) return this.#finish();
    const backoff = new Backoff({
      initialMs: 500,
      maxMs: settings.parentPollIntervalMs,
      random: deps.random,
    });

    let childShards: readonly ChildShard[] = batch.shardEnd.childShards;
    let childShardIds: readonly string[] | null = null;
    // A stop asked for meanwhile wins: the next owner reads the end again and finishes the shard.
    while (!this.#halted && held.isHeld()) {
      try {
        if (childShards.length === 0 && !batch.shardEnd.gone) childShards = await this.#lookUpChildren();
        const leases = new Map<string, Lease | null>();
        for (const child of childShards) {
          for (const shardId of [child.ShardId ?? '', ...(child.ParentShards ?? [])]) {
            const key = this.#siblingKey(shardId);
            if (!leases.has(key)) leases.set(key, await store.getLease(key));
          }
        }
        const plan = planShardEnd({
          lease: held.lease,
          childShards: childShards.map(childShardFromKinesis),
          lookup: (key) => leases.get(key),
          random: deps.random,
        });
        if (plan.kind === 'invalid') {
          deps.logger.warn('invalid shard end; looking the children up', {
            leaseKey: this.leaseKey,
            reason: plan.message,
          });
          childShards = [];
          await clock.sleep(backoff.next(), this.#haltSignal());
          continue;
        }
        if (plan.kind === 'blocked') {
          deps.logger.info('shard end waits for the other parent of a merge', {
            leaseKey: this.leaseKey,
            reason: plan.message,
          });
          if (plan.dropLease || this.#stop.signal.aborted) return this.#finish();
          await clock.sleep(backoff.next(), this.#haltSignal());
          continue;
        }
        const created: string[] = [];
        for (const init of plan.leasesToCreate) {
          const result = await store.createLeaseIfAbsent(init);
          if (result.ok) created.push(init.leaseKey);
        }
        if (created.length > 0) {
          deps.emit({
            type: 'leases-created',
            workerId: deps.workerId,
            leaseKeys: created,
            cause: 'shard-end',
          });
        }
        if (plan.childShardIds.length > 0) {
          await store.updateLeaseMeta(this.leaseKey, { childShardIds: plan.childShardIds });
        }
        childShardIds = plan.childShardIds;
        break;
      } catch (error) {
        deps.logger.warn('creating child leases failed; retrying', { leaseKey: this.leaseKey, error });
        await clock.sleep(backoff.next(), this.#haltSignal());
      }
    }
    if (childShardIds === null) return this.#finish();

    checkpointer.allowShardEnd();
    const processingBackoff = new Backoff({ ...settings.processingRetry, random: deps.random });
    for (let attempt = 1; !this.#halted && held.isHeld(); attempt++) {
      try {
        if (processor.shardEnded === undefined) {
          await checkpointer.checkpoint();
        } else {
          await processor.shardEnded({
            shardId: this.shardId,
            leaseKey: this.leaseKey,
            checkpointer,
            signal: this.#haltSignal(),
          });
        }
        if (!checkpointer.lastCheckpoint.isShardEnd) {
          throw new ShardEndNotCheckpointedError(this.leaseKey);
        }
      } catch (error) {
        if (checkpointer.lastCheckpoint.isShardEnd) break;
        deps.emit({
          type: 'processing-error',
          workerId: deps.workerId,
          leaseKey: this.leaseKey,
          error,
          attempt,
          action: 'retry',
        });
        deps.logger.warn('shardEnded failed; retrying', { leaseKey: this.leaseKey, attempt, error });
        await clock.sleep(processingBackoff.next(), this.#haltSignal());
        continue;
      }
      break;
    }
    if (!checkpointer.lastCheckpoint.isShardEnd) {
      checkpointer.revokeShardEnd();
      return this.#finish();
    }
    // SHARD_END is written: the shard is done whatever happens next. A failed release is not a reason
    // to run shardEnded again; the lease then just expires (nobody needs a finished lease).
    deps.emit({ type: 'shard-ended', workerId: deps.workerId, leaseKey: this.leaseKey, childShardIds });
    this.#state = 'finished';
    await keeper.release(held);
    return 'shard-ended';
  }

  /** Children of this shard from ListShards, for an end that came without ChildShards. */
  async #lookUpChildren(): Promise<ChildShard[]> {
    const shards = await this.#deps.stream.listShards(undefined, this.#deps.held.signal);
    return shards
      .filter((shard) => shard.ParentShardId === this.shardId || shard.AdjacentParentShardId === this.shardId)
      .map((shard) => ({
        ShardId: shard.ShardId,
        ParentShards: [shard.ParentShardId, shard.AdjacentParentShardId].filter(
          (id): id is string => id !== undefined && id !== null,
        ),
        HashKeyRange: shard.HashKeyRange,
      }));
  }

  /** Shutdown: graceful (shutdownRequested, release, leaseLost) or after a loss (leaseLost). */
  async #finish(): Promise<ShardConsumerOutcome> {
    const deps = this.#deps;
    const processor = this.#processor;
    const checkpointer = this.#checkpointer;
    this.#state = 'shutting-down';
    await this.#fetcher?.stop();
    const lost = !deps.held.isHeld();
    // A shutdownRequested still running past its budget: leaseLost follows it once it returns, so the
    // processor's calls never overlap.
    let overrunning: Promise<unknown> | null = null;
    if (!lost && processor !== null && checkpointer !== null && processor.shutdownRequested !== undefined) {
      const budgetMs =
        this.#shutdownDeadline === null
          ? deps.settings.shutdownTimeoutMs
          : Math.max(0, this.#shutdownDeadline - deps.clock.monotonicNow());
      // The processor's signal aborts a little before the budget ends, so a processor that stops
      // waiting then can still write its checkpoint before the lease is released.
      const hurry = new AbortController();
      const timers = new AbortController();
      void deps.clock.sleep(Math.floor(budgetMs * 0.8), timers.signal).then(() => hurry.abort());
      const timer = deps.clock.sleep(budgetMs, timers.signal).then(() => 'timeout' as const);
      const call = Promise.resolve().then(() =>
        processor.shutdownRequested?.({
          shardId: this.shardId,
          leaseKey: this.leaseKey,
          checkpointer,
          signal: hurry.signal,
        }),
      );
      try {
        const outcome = await Promise.race([call.then(() => 'done' as const), timer]);
        if (outcome === 'timeout') {
          overrunning = call;
          deps.logger.warn('shutdownRequested did not finish in time', {
            leaseKey: this.leaseKey,
            shutdownTimeoutMs: deps.settings.shutdownTimeoutMs,
          });
        }
      } catch (error) {
        deps.logger.warn('shutdownRequested failed', { leaseKey: this.leaseKey, error });
      } finally {
        timers.abort();
      }
    }
    if (!lost) await deps.keeper.release(deps.held);
    if (processor !== null) {
      const leaseLost = async (): Promise<void> => {
        try {
          await processor.leaseLost?.({ shardId: this.shardId, leaseKey: this.leaseKey });
        } catch (error) {
          deps.logger.warn('leaseLost failed', { leaseKey: this.leaseKey, error });
        }
      };
      if (overrunning === null) await leaseLost();
      else void overrunning.catch(() => undefined).then(leaseLost);
    }
    this.#state = 'finished';
    return lost ? 'lease-lost' : 'shutdown';
  }
}
