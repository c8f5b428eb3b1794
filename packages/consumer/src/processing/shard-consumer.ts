import type { Clock, KclEvent, LeaseHandoff, LeaseStore, Logger, RandomSource } from '@kcl/core';
import {
  type ExtendedSequenceNumber,
  isKclError,
  KclError,
  shardIdOfLeaseKey,
  untilAborted,
} from '@kcl/core';
import { Backoff } from '../backoff.js';
import { type IteratorPosition, type StreamReader, startPositionOf } from '../kinesis/kinesis-stream.js';
import {
  type BatchSource,
  type FetchedBatch,
  type FetchIssue,
  RecordFetcher,
} from '../kinesis/record-fetcher.js';
import { ShardSubscriber, type SubscriptionIssueKind } from '../kinesis/shard-subscriber.js';
import type { HeldLease } from '../leases/held-lease.js';
import type { LeaseKeeper } from '../leases/lease-keeper.js';
import { waitForParents } from '../leases/wait-for-parents.js';
import type { ConsumedStream } from '../streams/stream-options.js';
import { type BatchReport, deliverBatch } from './batch-delivery.js';
import { ShardCheckpointer } from './checkpointer.js';
import { requestProcessorShutdown } from './processor-shutdown.js';
import type { RecordProcessorFactory } from './record-processor.js';
import { writeShardEnd } from './shard-end.js';
import type { FanOutSettings, ProcessorRun, ShardConsumerSettings, ShardRun } from './shard-run.js';

export type ShardConsumerState =
  | 'waiting-on-parents'
  | 'initializing'
  | 'processing'
  | 'shard-ending'
  | 'shutting-down'
  | 'finished';

/** What every shard consumer of one worker shares. */
export interface ShardConsumerContext {
  readonly keeper: LeaseKeeper;
  readonly store: LeaseStore;
  readonly stream: StreamReader;
  /** The stream as processors see it (its name, and its identifier with several streams). */
  readonly consumedStream: ConsumedStream;
  readonly processorFactory: RecordProcessorFactory;
  readonly settings: ShardConsumerSettings;
  readonly workerId: string;
  readonly clock: Clock;
  readonly random: RandomSource;
  readonly logger: Logger;
  readonly emit: (event: KclEvent) => void;
}

export interface ShardConsumerDependencies extends ShardConsumerContext {
  readonly held: HeldLease;
  readonly onBatch?: (report: BatchReport) => void;
  /** Each successful GetRecords call (polling, and a fan-out read of a closed shard's rest). */
  readonly onGetRecords?: (durationMs: number, records: number) => void;
  /** Each fan-out subscription started (its SubscribeToShard call answered). */
  readonly onSubscribed?: (durationMs: number) => void;
  /** Each event a fan-out subscription delivered. */
  readonly onSubscriptionEvent?: (records: number) => void;
  /** Each issue of a fan-out subscription (failed, throttled, renewed, idle, …). */
  readonly onSubscriptionIssue?: (kind: SubscriptionIssueKind) => void;
}

/** How a shard consumer ended. */
export type ShardConsumerOutcome = 'shard-ended' | 'lease-lost' | 'shutdown' | 'complete';

/**
 * Consumes one lease incarnation: waits for the parents, initializes the processor, delivers batches
 * in order, handles the shard's end (child leases, SHARD_END checkpoint), and shuts down on a lost
 * lease or a graceful stop. The steps live in their own modules (`waitForParents`, `deliverBatch`,
 * `writeShardEnd`, `requestProcessorShutdown`); this class keeps the state that ties them together.
 */
export class ShardConsumer {
  readonly leaseKey: string;
  readonly shardId: string;
  readonly #deps: ShardConsumerDependencies;
  readonly #run: ShardRun;
  readonly #stop = new AbortController();
  readonly #halt = new AbortController();
  #state: ShardConsumerState = 'waiting-on-parents';
  /** Set once the processor exists (and its checkpointer). */
  #processorRun: ProcessorRun | null = null;
  #fetcher: BatchSource | null = null;
  #millisBehindLatest: number | null = null;
  #recordsProcessed = 0;
  #execution: Promise<ShardConsumerOutcome> | null = null;
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
    this.#run = {
      held: deps.held,
      leaseKey: this.leaseKey,
      shardId: this.shardId,
      workerId: deps.workerId,
      store: deps.store,
      stream: deps.stream,
      settings: deps.settings,
      clock: deps.clock,
      random: deps.random,
      logger: deps.logger,
      emit: deps.emit,
      halted: () => this.#halted,
      stopRequested: () => this.#stop.signal.aborted,
      haltSignal: this.#halt.signal,
    };
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
    return this.#processorRun?.checkpointer.lastCheckpoint ?? this.#deps.held.lease.checkpoint;
  }

  /** Runs the consumer to its end. Calling it again returns the same run. */
  run(): Promise<ShardConsumerOutcome> {
    this.#execution ??= this.#execute();
    return this.#execution;
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

  /**
   * Another worker asked for the lease: stop as on a graceful stop (the current batch finishes, then
   * `shutdownRequested`), but hand the lease over instead of releasing it. `shutdownRequested` gets
   * three quarters of the time left before the requester's deadline (at most `shutdownTimeoutMs`), so
   * the hand-off completes before the requester gives up waiting and steals the lease.
   */
  handOver(handoff: LeaseHandoff): void {
    const { clock } = this.#deps;
    if (handoff.deadline === null) {
      this.requestShutdown();
      return;
    }
    const left = Math.max(0, handoff.deadline.getTime() - clock.now());
    this.requestShutdown(clock.monotonicNow() + Math.floor((left * 3) / 4));
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

  async #execute(): Promise<ShardConsumerOutcome> {
    const { held, logger } = this.#deps;
    try {
      if (!(await waitForParents(this.#run))) return await this.#finish();
      if (held.lease.checkpoint.isShardEnd) {
        // Finished earlier (its children were created before SHARD_END was written): nothing to read.
        this.#state = 'finished';
        await this.#deps.keeper.release(held);
        return 'complete';
      }
      const processor = this.#deps.processorFactory(this.shardId, {
        shardId: this.shardId,
        leaseKey: this.leaseKey,
        workerId: this.#deps.workerId,
        stream: this.#deps.consumedStream,
      });
      const checkpointer = new ShardCheckpointer({
        held,
        keeper: this.#deps.keeper,
        store: this.#deps.store,
        workerId: this.#deps.workerId,
        emit: this.#deps.emit,
      });
      const run: ProcessorRun = { ...this.#run, processor, checkpointer };
      this.#processorRun = run;
      if (!(await this.#initialize(run))) return await this.#finish();
      return await this.#process(run);
    } catch (error) {
      if (isKclError(error, 'STREAM_CONSUMER_GONE') || isKclError(error, 'STREAM_CONSUMER_NOT_ACTIVE')) {
        // Not the processor's failure: the lease is given up and read again once the stream
        // consumer is registered (again).
        logger.warn('the stream consumer is not usable; giving the lease up for now', {
          leaseKey: this.leaseKey,
          error,
        });
        this.requestShutdown();
        return await this.#finish();
      }
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

  async #initialize({ processor }: ProcessorRun): Promise<boolean> {
    this.#state = 'initializing';
    const { held, clock, settings } = this.#deps;
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
        await clock.sleep(backoff.next(), this.#halt.signal);
      }
    }
    return false;
  }

  async #process(run: ProcessorRun): Promise<ShardConsumerOutcome> {
    this.#state = 'processing';
    // Fan-out may wait for the stream consumer to be registered (again): a halt ends that wait.
    const fetcher = await untilAborted(this.#createFetcher(), this.#halt.signal, haltedWhileWaiting).catch(
      (error: unknown) => {
        if (this.#halted) return null;
        throw error;
      },
    );
    if (fetcher === null || this.#halted) {
      void fetcher?.stop();
      return this.#finish();
    }
    this.#fetcher = fetcher;
    fetcher.start();
    const halt = this.#halt.signal;
    while (!this.#halted) {
      const batch = await fetcher.next(halt);
      if (batch === null || this.#halted) break;
      // A shard reaches its end only when every record of it was delivered and acknowledged: a
      // delivery cut short (by a stop or a lost lease) is not a delivery, so it ends here instead.
      if (!(await this.#deliver(run, batch))) break;
      if (batch.shardEnd !== null) {
        await fetcher.stop();
        return this.#endShard(run, batch.shardEnd);
      }
    }
    return this.#finish();
  }

  /** The fetcher of the shard (polling or a fan-out subscription), from the checkpoint; its issues become events. */
  async #createFetcher(): Promise<BatchSource> {
    const deps = this.#deps;
    const { settings, logger } = deps;
    const leaseKey = this.leaseKey;
    const start = startPositionOf(deps.held.lease.checkpoint, settings.initialTimestamp, () =>
      logger.warn(
        'lease checkpoint is AT_TIMESTAMP but no initial timestamp is configured; reading from TRIM_HORIZON',
        { leaseKey },
      ),
    );
    const fanout = settings.fanout;
    if (fanout !== null) return this.#createSubscriber(start, fanout);
    return new RecordFetcher({
      stream: deps.stream,
      shardId: this.shardId,
      start,
      maxRecords: settings.maxRecords,
      pollIntervalMs: settings.pollIntervalMs,
      minCallSpacingMs: 200,
      clock: deps.clock,
      random: deps.random,
      backoff: settings.kinesisRetry,
      onIssue: (issue) => this.#onGetRecordsIssue(issue),
      ...(deps.onGetRecords === undefined ? {} : { onCall: deps.onGetRecords }),
    });
  }

  /** A GetRecords issue becomes an event (expired iterator, throttling) and a debug log. */
  #onGetRecordsIssue(issue: {
    readonly kind: FetchIssue['kind'] | SubscriptionIssueKind;
    readonly backoffMs: number;
  }): void {
    const { emit, workerId, logger } = this.#deps;
    const leaseKey = this.leaseKey;
    if (issue.kind === 'expired-iterator') {
      emit({ type: 'iterator-expired', workerId, leaseKey });
    } else if (issue.kind === 'throttled' || issue.kind === 'transient') {
      emit({
        type: 'throttled',
        workerId,
        leaseKey,
        operation: issue.kind === 'throttled' ? 'GetRecords' : 'GetRecords (transient failure)',
        backoffMs: issue.backoffMs,
      });
    }
    logger.debug('GetRecords issue', { leaseKey, kind: issue.kind, backoffMs: issue.backoffMs });
  }

  async #createSubscriber(start: IteratorPosition, fanout: FanOutSettings): Promise<ShardSubscriber> {
    const deps = this.#deps;
    const { workerId, settings, logger } = deps;
    const leaseKey = this.leaseKey;
    const consumerArn = await fanout.consumerArn();
    return new ShardSubscriber({
      onConsumerGone: () => fanout.consumerGone(consumerArn),
      stream: deps.stream,
      consumerArn,
      shardId: this.shardId,
      start,
      clock: deps.clock,
      random: deps.random,
      backoff: settings.kinesisRetry,
      subscriptionLifetimeMs: fanout.subscriptionLifetimeMs,
      idleTimeoutMs: fanout.idleTimeoutMs,
      closedShardCheckIntervalMs: fanout.closedShardCheckIntervalMs,
      polling: { maxRecords: settings.maxRecords, pollIntervalMs: settings.pollIntervalMs },
      onIssue: (issue) => {
        if (issue.operation === 'GetRecords') {
          // The rest of a closed shard, read by polling: reported as polling reports it.
          this.#onGetRecordsIssue(issue);
          return;
        }
        deps.onSubscriptionIssue?.(issue.kind);
        if (issue.kind === 'throttled' || issue.kind === 'transient' || issue.kind === 'resource-in-use') {
          deps.emit({
            type: 'throttled',
            workerId,
            leaseKey,
            operation:
              issue.kind === 'throttled'
                ? 'SubscribeToShard'
                : issue.kind === 'resource-in-use'
                  ? 'SubscribeToShard (another subscription is active)'
                  : 'SubscribeToShard (transient failure)',
            backoffMs: issue.backoffMs,
          });
        }
        const log = issue.kind === 'invalid-argument' ? logger.warn : logger.debug;
        log.call(logger, 'SubscribeToShard issue', {
          leaseKey,
          kind: issue.kind,
          backoffMs: issue.backoffMs,
          error: issue.error,
        });
      },
      // Events are not GetRecords calls: they have their own metrics. GetRecords runs only for a
      // closed shard's rest, and reports as polling does.
      ...(deps.onSubscribed === undefined ? {} : { onSubscribed: deps.onSubscribed }),
      ...(deps.onSubscriptionEvent === undefined
        ? {}
        : { onEvent: (_waitedMs: number, records: number) => deps.onSubscriptionEvent?.(records) }),
      ...(deps.onGetRecords === undefined ? {} : { onGetRecords: deps.onGetRecords }),
    });
  }

  /** Delivers one batch; false when the delivery did not complete because the consumer is halting. */
  #deliver(run: ProcessorRun, batch: FetchedBatch): Promise<boolean> {
    this.#millisBehindLatest = batch.millisBehindLatest;
    const { onBatch } = this.#deps;
    return deliverBatch(
      {
        ...run,
        ...(onBatch === undefined ? {} : { onBatch }),
        onProcessed: (records) => {
          this.#recordsProcessed += records;
        },
      },
      batch,
    );
  }

  async #endShard(
    run: ProcessorRun,
    seen: NonNullable<FetchedBatch['shardEnd']>,
  ): Promise<ShardConsumerOutcome> {
    this.#state = 'shard-ending';
    const childShardIds = await writeShardEnd(run, seen);
    if (childShardIds === null) return this.#finish();
    // SHARD_END is written: the shard is done whatever happens next. A failed release is not a reason
    // to run shardEnded again; the lease then just expires (nobody needs a finished lease).
    const { emit, workerId, keeper, held } = this.#deps;
    emit({ type: 'shard-ended', workerId, leaseKey: this.leaseKey, childShardIds });
    this.#state = 'finished';
    await keeper.release(held);
    return 'shard-ended';
  }

  /**
   * Gives the held lease up at the end of a graceful shutdown: to the worker that asked for it when a
   * hand-off is in progress (write retries end at its deadline), else back to the store.
   */
  async #giveUp(): Promise<void> {
    const { keeper, held, clock, settings } = this.#deps;
    const handoff = keeper.handoffOf(held);
    if (handoff === null) {
      await keeper.release(held);
      return;
    }
    if (!(await this.#isRegistered(handoff.to))) {
      // The requester stopped (a graceful stop removes it from the registry): handing the lease to it
      // would leave the shard idle until the lease expires; released, any worker takes it at once.
      this.#deps.logger.info('the worker that asked for the lease has stopped; releasing it instead', {
        leaseKey: this.leaseKey,
        to: handoff.to,
      });
      await keeper.release(held);
      return;
    }
    const left =
      handoff.deadline === null ? settings.shutdownTimeoutMs : handoff.deadline.getTime() - clock.now();
    await keeper.completeHandoff(held, clock.monotonicNow() + Math.max(0, left));
  }

  /** Whether `workerId` is in the worker registry; true when the registry cannot be read. */
  async #isRegistered(workerId: string): Promise<boolean> {
    try {
      const workers = await this.#deps.store.workers.list({ metadata: false });
      return workers.some((worker) => worker.workerId === workerId);
    } catch (error) {
      this.#deps.logger.warn('could not read the worker registry before a hand-off', {
        leaseKey: this.leaseKey,
        error,
      });
      return true;
    }
  }

  /**
   * A `shutdownRequested` still running when its budget ended, during a hand-off: it may still write
   * its checkpoint, so the lease is not handed over under it. It gets until the requester's deadline;
   * true when it returned by then (then the hand-off completes after it, and the new owner starts at
   * its checkpoint). Past the deadline the lease moves anyway, as a steal would move it.
   */
  async #awaitOverrun(overrunning: Promise<unknown>): Promise<boolean> {
    const { keeper, held, clock } = this.#deps;
    const handoff = keeper.handoffOf(held);
    if (handoff === null || handoff.deadline === null) return false;
    const left = handoff.deadline.getTime() - clock.now();
    if (left <= 0) return false;
    const timers = new AbortController();
    try {
      return await Promise.race([
        overrunning.then(
          () => true,
          () => true,
        ),
        clock.sleep(left, timers.signal).then(() => false),
      ]);
    } finally {
      timers.abort();
    }
  }

  /**
   * Shutdown: graceful (shutdownRequested, release — or the hand-off — then leaseLost) or after a loss
   * (leaseLost).
   */
  async #finish(): Promise<ShardConsumerOutcome> {
    const deps = this.#deps;
    const processor = this.#processorRun?.processor ?? null;
    const checkpointer = this.#processorRun?.checkpointer ?? null;
    this.#state = 'shutting-down';
    await this.#fetcher?.stop();
    const lost = !deps.held.isHeld();
    // A shutdownRequested still running past its budget: leaseLost follows it once it returns, so the
    // processor's calls never overlap.
    let overrunning: Promise<unknown> | null = null;
    if (!lost && processor !== null && checkpointer !== null && processor.shutdownRequested !== undefined) {
      ({ overrunning } = await requestProcessorShutdown({
        processor,
        checkpointer,
        shardId: this.shardId,
        leaseKey: this.leaseKey,
        budgetMs:
          this.#shutdownDeadline === null
            ? deps.settings.shutdownTimeoutMs
            : Math.max(0, this.#shutdownDeadline - deps.clock.monotonicNow()),
        shutdownTimeoutMs: deps.settings.shutdownTimeoutMs,
        clock: deps.clock,
        logger: deps.logger,
      }));
    }
    if (!lost && overrunning !== null && (await this.#awaitOverrun(overrunning))) overrunning = null;
    if (!lost) await this.#giveUp();
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

function haltedWhileWaiting(): KclError {
  return new KclError('CONSUMER_STOPPED', '@kcl/consumer: the shard consumer halted before it could read');
}
