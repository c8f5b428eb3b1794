import type { Clock, ExtendedSequenceNumber, Logger, RandomSource } from '@kcl/core';
import { childLogger, LeaseLostError } from '@kcl/core';
import { Backoff } from '../backoff.js';
import { Mutex } from '../mutex.js';
import type {
  Checkpointer,
  KinesisRecord,
  ProcessorContext,
  ProcessRecordsInput,
  RecordProcessor,
  ShardEndedInput,
  ShutdownRequestedInput,
} from '../record-processor.js';
import { AcknowledgementWatermark } from './acknowledgement-watermark.js';
import { Deque, hashPartition, PartitionedQueue } from './partitioned-queue.js';
import { TrackedMessage } from './pipeline-message.js';
import type {
  BatchTrigger,
  FailureAction,
  PipelineContext,
  ResolvedPipelineOptions,
} from './pipeline-options.js';
import { pipelineCapacity } from './pipeline-options.js';

/** What a pipeline needs from its host: time, randomness for jitter, and a logger. */
export interface PipelineRuntime {
  readonly clock: Clock;
  readonly random: RandomSource;
  readonly logger: Logger;
}

/**
 * `processRecords` input as a host may extend it: a signal that aborts when the shard consumer halts,
 * so a `processRecords` waiting for room in a full pipeline returns at once.
 */
type HaltableInput = { readonly signal?: AbortSignal };

interface PendingBatch {
  readonly batchKey: string;
  readonly messages: TrackedMessage[];
  readonly trigger: BatchTrigger;
}

interface Accumulator {
  readonly lane: number;
  readonly batchKey: string;
  readonly messages: TrackedMessage[];
  readonly timer: AbortController;
}

/**
 * The pipeline of one lease incarnation, as a `RecordProcessor`. `processRecords` admits records as
 * messages while there is room and waits when the pipeline is full, so the shard consumer stops
 * polling (its fetcher holds at most one batch ahead). Messages flow through `handleMessage`
 * (processor stage) and `handleBatch` (batcher stage) concurrently; acknowledgements move a watermark
 * that is checkpointed per the checkpoint policy.
 */
export class PipelineProcessor implements RecordProcessor {
  readonly #options: ResolvedPipelineOptions;
  readonly #clock: Clock;
  readonly #random: RandomSource;
  readonly #logger: Logger;
  readonly #context: PipelineContext;
  readonly #capacity: number;
  readonly #resumeAt: number;
  readonly #partitioned: boolean;
  readonly #halt = new AbortController();
  readonly #watermark = new AcknowledgementWatermark<TrackedMessage>();
  readonly #queue: PartitionedQueue<TrackedMessage>;
  readonly #accumulators = new Map<string, Accumulator>();
  readonly #batchQueues: Deque<PendingBatch>[];
  readonly #activeBatchers: number[];
  readonly #roomWaiters = new Set<() => void>();
  readonly #idleWaiters = new Set<(idle: boolean) => void>();
  readonly #checkpointMutex = new Mutex();
  readonly #handlerWaiters = new Set<() => void>();
  #runningHandlers = 0;
  #activeProcessors = 0;
  #inFlight = 0;
  #draining = false;
  #finished = false;
  #checkpointer: Checkpointer | null = null;
  #intervalLoop: Promise<void> | null = null;
  #queuedCheckpoint: Promise<void> | null = null;
  #lastCheckpointed: ExtendedSequenceNumber | null = null;
  #coveredAtCheckpoint = 0;
  #checkpointFailing = false;

  constructor(options: ResolvedPipelineOptions, runtime: PipelineRuntime, context: ProcessorContext) {
    this.#options = options;
    this.#clock = runtime.clock;
    this.#random = runtime.random;
    this.#context = { shardId: context.shardId, leaseKey: context.leaseKey, workerId: context.workerId };
    this.#logger = childLogger(runtime.logger, { leaseKey: context.leaseKey });
    this.#capacity = pipelineCapacity(options);
    const { concurrency, maxDemand, minDemand } = options.processors;
    this.#resumeAt = Math.max(0, this.#capacity - concurrency * (maxDemand - minDemand));
    this.#partitioned = options.partitionBy !== null;
    this.#queue = new PartitionedQueue<TrackedMessage>(
      this.#partitioned ? (message) => message.partition ?? '' : null,
    );
    const lanes = this.#partitioned ? options.batchers.concurrency : 1;
    this.#batchQueues = Array.from({ length: lanes }, () => new Deque<PendingBatch>());
    this.#activeBatchers = Array.from({ length: lanes }, () => 0);
  }

  /** Messages admitted and not yet acknowledged. */
  get inFlight(): number {
    return this.#inFlight;
  }

  /** The most messages admitted and not yet acknowledged at any time. */
  get capacity(): number {
    return this.#capacity;
  }

  /** The position below which every admitted message is acknowledged, or null before the first. */
  get watermark(): ExtendedSequenceNumber | null {
    return this.#watermark.position;
  }

  /** The last position this pipeline checkpointed, or null. */
  get lastCheckpointed(): ExtendedSequenceNumber | null {
    return this.#lastCheckpointed;
  }

  /** True once the pipeline stopped (lease lost, shutdown or shard end): it handles nothing more. */
  get stopped(): boolean {
    return this.#halt.signal.aborted;
  }

  async processRecords(input: ProcessRecordsInput): Promise<void> {
    if (this.stopped) return;
    this.#checkpointer = input.checkpointer;
    this.#intervalLoop ??= this.#checkpointLoop();
    const signal = (input as ProcessRecordsInput & HaltableInput).signal;
    for (const record of input.records) {
      while (this.#inFlight >= this.#capacity && !this.stopped && signal?.aborted !== true) {
        await this.#waitForRoom(signal);
      }
      if (this.stopped || signal?.aborted === true) return;
      this.#admit(record);
    }
  }

  /**
   * Graceful stop: drain (bounded by `drainTimeoutMs`, and by the input's signal, which aborts when the
   * worker's shutdown budget runs short), checkpoint what is acknowledged, stop.
   */
  async shutdownRequested(input: ShutdownRequestedInput): Promise<void> {
    if (this.stopped) return;
    this.#checkpointer = input.checkpointer;
    this.#startDrain();
    const idle = await this.#waitIdle(this.#options.drainTimeoutMs, input.signal);
    if (!idle && !this.stopped) {
      this.#logger.warn('pipeline drain timed out; checkpointing what is acknowledged', {
        inFlight: this.#inFlight,
        drainTimeoutMs: this.#options.drainTimeoutMs,
      });
    }
    try {
      await this.#requestCheckpoint();
    } finally {
      this.#stop('shutdown requested');
    }
  }

  /**
   * The shard ended: drain completely, then checkpoint SHARD_END (only valid once everything is
   * acknowledged). A stop meanwhile (the input's signal) ends the wait with an error: the pipeline is
   * then drained by `shutdownRequested` as on any stop, and the next owner finishes the shard.
   */
  async shardEnded(input: ShardEndedInput): Promise<void> {
    if (this.stopped) throw this.#stoppedError();
    this.#checkpointer = input.checkpointer;
    this.#startDrain();
    await this.#waitIdle(null, input.signal);
    if (this.stopped) throw this.#stoppedError();
    if (input.signal?.aborted === true) {
      throw new Error(
        `@kcl/consumer: the pipeline of ${this.#context.leaseKey} was stopped before it drained at the shard end; the next owner finishes the shard`,
      );
    }
    await this.#checkpointMutex.run(async () => {
      await input.checkpointer.checkpoint();
      this.#finished = true;
    });
    this.#stop('shard ended');
  }

  /**
   * The lease is gone: stop at once — queued messages are dropped, late acknowledgements ignored,
   * nothing is checkpointed — and return once the handlers already running have returned (bounded by
   * `drainTimeoutMs`), so a consumer started for the lease later never runs beside them.
   */
  async leaseLost(): Promise<void> {
    this.#stop('lease lost');
    await this.#handlersDone(this.#options.drainTimeoutMs);
  }

  /** Resolves once no handler call is running, or after `timeoutMs`. */
  async #handlersDone(timeoutMs: number): Promise<void> {
    if (this.#runningHandlers === 0) return;
    const timer = new AbortController();
    let waiter: () => void = () => {};
    const done = new Promise<void>((resolve) => {
      waiter = resolve;
      this.#handlerWaiters.add(waiter);
    });
    try {
      await Promise.race([done, this.#clock.sleep(timeoutMs, timer.signal)]);
    } finally {
      timer.abort();
      this.#handlerWaiters.delete(waiter);
    }
  }

  /** Runs one handler call, counted, so `leaseLost` can wait for the calls in flight. */
  async #counted<T>(call: () => Promise<T> | T): Promise<T> {
    this.#runningHandlers += 1;
    try {
      return await call();
    } finally {
      this.#runningHandlers -= 1;
      if (this.#runningHandlers === 0) for (const wake of [...this.#handlerWaiters]) wake();
    }
  }

  #stoppedError(): Error {
    return new Error(
      `@kcl/consumer: the pipeline of ${this.#context.leaseKey} stopped because its lease was lost; the next owner finishes the shard`,
    );
  }

  // ── admission and back-pressure ──────────────────────────────────────────────────────────────

  #admit(record: KinesisRecord): void {
    const message = new TrackedMessage(this.#context.shardId, record);
    if (!this.#watermark.add(message)) {
      this.#logger.warn('pipeline ignored a record at or before one it already has', {
        sequenceNumber: record.sequenceNumber,
        subSequenceNumber: record.subSequenceNumber,
      });
      return;
    }
    if (this.#options.partitionBy !== null) message.partition = this.#partitionOf(message);
    this.#inFlight += 1;
    if (this.#options.handleMessage !== null) {
      this.#queue.push(message);
      this.#pumpProcessors();
    } else {
      this.#toBatcher(message);
    }
  }

  #partitionOf(message: TrackedMessage): string {
    try {
      const key = this.#options.partitionBy?.(message);
      return typeof key === 'string' ? key : String(key);
    } catch (error) {
      this.#logger.warn('partitionBy threw; ordering by the record partition key instead', {
        sequenceNumber: message.record.sequenceNumber,
        error,
      });
      return message.record.partitionKey;
    }
  }

  #waitForRoom(signal: AbortSignal | undefined): Promise<void> {
    return new Promise<void>((resolve) => {
      const wake = (): void => {
        this.#roomWaiters.delete(wake);
        signal?.removeEventListener('abort', wake);
        resolve();
      };
      this.#roomWaiters.add(wake);
      signal?.addEventListener('abort', wake, { once: true });
    });
  }

  /** Resolves true once nothing is in flight; false on timeout, on `signal`, or when the pipeline stops. */
  async #waitIdle(timeoutMs: number | null, signal?: AbortSignal): Promise<boolean> {
    if (this.stopped || signal?.aborted === true) return false;
    if (this.#inFlight === 0) return true;
    const timer = new AbortController();
    let waiter: (idle: boolean) => void = () => {};
    const idle = new Promise<boolean>((resolve) => {
      waiter = resolve;
      this.#idleWaiters.add(waiter);
    });
    const racers = [idle];
    if (timeoutMs !== null) racers.push(this.#clock.sleep(timeoutMs, timer.signal).then(() => false));
    let onAbort: (() => void) | null = null;
    if (signal !== undefined) {
      racers.push(
        new Promise<boolean>((resolve) => {
          onAbort = () => resolve(false);
          signal.addEventListener('abort', onAbort, { once: true });
        }),
      );
    }
    try {
      return await Promise.race(racers);
    } finally {
      timer.abort();
      this.#idleWaiters.delete(waiter);
      if (onAbort !== null) signal?.removeEventListener('abort', onAbort);
    }
  }

  #acknowledge(message: TrackedMessage): void {
    if (this.stopped || message.done) return;
    message.done = true;
    this.#inFlight -= 1;
    this.#watermark.advance();
    if (this.#inFlight <= this.#resumeAt) {
      for (const wake of [...this.#roomWaiters]) wake();
    }
    if (this.#inFlight === 0) {
      for (const wake of [...this.#idleWaiters]) wake(true);
    }
    if (
      !this.#checkpointFailing &&
      this.#watermark.covered - this.#coveredAtCheckpoint >= this.#options.checkpoint.everyMessages
    ) {
      void this.#requestCheckpoint();
    }
  }

  // ── processor stage ─────────────────────────────────────────────────────────────────────────

  #pumpProcessors(): void {
    while (!this.stopped && this.#activeProcessors < this.#options.processors.concurrency) {
      const message = this.#queue.take();
      if (message === undefined) return;
      this.#activeProcessors += 1;
      void this.#runMessage(message);
    }
  }

  async #runMessage(message: TrackedMessage): Promise<void> {
    const handleMessage = this.#options.handleMessage;
    let backoff: Backoff | null = null;
    try {
      if (handleMessage === null) return;
      for (;;) {
        message.beginAttempt();
        try {
          await this.#counted(() => handleMessage(message, this.#context));
        } catch (error) {
          message.fail(error);
        }
        if (this.stopped) return;
        if (!message.failed) break;
        const action = await this.#decide([message], 'message', message.batchKey, message.attempt);
        if (this.stopped) return;
        if (action === 'skip') {
          this.#acknowledge(message);
          return;
        }
        backoff ??= new Backoff({ ...this.#options.retry, random: this.#random });
        await this.#clock.sleep(backoff.next(), this.#halt.signal);
        if (this.stopped) return;
      }
      if (this.#options.handleBatch === null) this.#acknowledge(message);
      else this.#toBatcher(message);
    } catch (error) {
      this.#logger.error('pipeline processor stage failed unexpectedly', { error });
    } finally {
      this.#activeProcessors -= 1;
      this.#queue.release(message);
      this.#pumpProcessors();
      this.#flushIfDrained();
    }
  }

  // ── batcher stage ───────────────────────────────────────────────────────────────────────────

  #laneOf(message: TrackedMessage): number {
    if (!this.#partitioned) return 0;
    return hashPartition(message.partition ?? '') % this.#options.batchers.concurrency;
  }

  #toBatcher(message: TrackedMessage): void {
    message.enterStage();
    const lane = this.#laneOf(message);
    const key = `${lane}\u0000${message.batchKey}`;
    let accumulator = this.#accumulators.get(key);
    if (accumulator === undefined) {
      accumulator = { lane, batchKey: message.batchKey, messages: [], timer: new AbortController() };
      this.#accumulators.set(key, accumulator);
    }
    accumulator.messages.push(message);
    if (accumulator.messages.length >= this.#options.batchers.batchSize) {
      this.#emit(key, accumulator, 'size');
    } else if (accumulator.messages.length === 1) {
      void this.#batchTimeout(key, accumulator);
    }
  }

  async #batchTimeout(key: string, accumulator: Accumulator): Promise<void> {
    await this.#clock.sleep(this.#options.batchers.batchTimeoutMs, accumulator.timer.signal);
    if (accumulator.timer.signal.aborted || this.stopped) return;
    if (this.#accumulators.get(key) === accumulator) this.#emit(key, accumulator, 'timeout');
  }

  #emit(key: string, accumulator: Accumulator, trigger: BatchTrigger): void {
    this.#accumulators.delete(key);
    accumulator.timer.abort();
    this.#batchQueues[accumulator.lane]?.push({
      batchKey: accumulator.batchKey,
      messages: accumulator.messages,
      trigger,
    });
    this.#pumpBatchers();
  }

  #pumpBatchers(): void {
    if (this.stopped) return;
    // Partitioned: one batcher per lane keeps a key's batches in order. Otherwise: any free batcher.
    const perLane = this.#partitioned ? 1 : this.#options.batchers.concurrency;
    for (let lane = 0; lane < this.#batchQueues.length; lane++) {
      const queue = this.#batchQueues[lane] as Deque<PendingBatch>;
      while ((this.#activeBatchers[lane] ?? 0) < perLane) {
        const batch = queue.shift();
        if (batch === undefined) break;
        this.#activeBatchers[lane] = (this.#activeBatchers[lane] ?? 0) + 1;
        void this.#runBatch(lane, batch);
      }
    }
  }

  async #runBatch(lane: number, batch: PendingBatch): Promise<void> {
    const handleBatch = this.#options.handleBatch;
    let messages = batch.messages;
    let trigger = batch.trigger;
    let backoff: Backoff | null = null;
    try {
      if (handleBatch === null) return;
      for (let attempt = 1; ; attempt++) {
        for (const message of messages) message.beginAttempt();
        try {
          await this.#counted(() =>
            handleBatch(
              messages,
              { batchKey: batch.batchKey, size: messages.length, trigger, attempt },
              this.#context,
            ),
          );
        } catch (error) {
          for (const message of messages) message.fail(error);
        }
        if (this.stopped) return;
        const failed = this.#failedInOrder(messages);
        const again = new Set(failed);
        for (const message of messages) if (!again.has(message)) this.#acknowledge(message);
        if (failed.length === 0) return;
        const action = await this.#decide(
          failed.filter((message) => message.failed),
          'batch',
          batch.batchKey,
          attempt,
        );
        if (this.stopped) return;
        if (action === 'skip') {
          for (const message of failed) this.#acknowledge(message);
          return;
        }
        backoff ??= new Backoff({ ...this.#options.retry, random: this.#random });
        await this.#clock.sleep(backoff.next(), this.#halt.signal);
        if (this.stopped) return;
        messages = failed;
        trigger = 'retry';
      }
    } catch (error) {
      this.#logger.error('pipeline batcher stage failed unexpectedly', { error });
    } finally {
      this.#activeBatchers[lane] = (this.#activeBatchers[lane] ?? 1) - 1;
      this.#pumpBatchers();
    }
  }

  /**
   * The messages of a batch attempt that must be tried again: the failed ones and, with `partitionBy`,
   * every later message of a partition that has a failed one — a key's later message is never
   * acknowledged before its failed predecessor succeeds (it is handed over again after it, in order).
   */
  #failedInOrder(messages: readonly TrackedMessage[]): TrackedMessage[] {
    const blocked = new Set<string>();
    const again: TrackedMessage[] = [];
    for (const message of messages) {
      const partition = message.partition ?? '';
      if (message.failed) {
        again.push(message);
        if (this.#partitioned) blocked.add(partition);
      } else if (blocked.has(partition)) {
        again.push(message);
      }
    }
    return again;
  }

  /** Draining: hand partial batches over once nothing is left in the processor stage to fill them. */
  #startDrain(): void {
    this.#draining = true;
    this.#flushIfDrained();
  }

  #flushIfDrained(): void {
    if (!this.#draining || this.stopped) return;
    if (this.#queue.length > 0 || this.#activeProcessors > 0) return;
    for (const [key, accumulator] of [...this.#accumulators]) this.#emit(key, accumulator, 'drain');
  }

  // ── failures ────────────────────────────────────────────────────────────────────────────────

  async #decide(
    messages: readonly TrackedMessage[],
    stage: 'message' | 'batch',
    batchKey: string,
    attempt: number,
  ): Promise<FailureAction> {
    const fields = {
      stage,
      batchKey,
      attempt,
      messages: messages.length,
      firstSequenceNumber: messages[0]?.record.sequenceNumber,
      failure: messages[0]?.failure,
    };
    const handleFailed = this.#options.handleFailed;
    let action: FailureAction = 'retry';
    if (handleFailed === null) {
      this.#logger.warn('pipeline messages failed; retrying them (no handleFailed)', fields);
    } else {
      try {
        const decided = await handleFailed(messages, { ...this.#context, stage, batchKey, attempt });
        if (decided === 'skip' || decided === 'retry') action = decided;
        else
          this.#logger.warn('handleFailed returned neither "retry" nor "skip"; retrying', {
            ...fields,
            decided,
          });
      } catch (error) {
        this.#logger.warn('handleFailed threw; retrying the messages', { ...fields, error });
      }
    }
    if (action === 'skip') this.#logger.warn('pipeline skipped failed messages', fields);
    return action;
  }

  // ── checkpoints ─────────────────────────────────────────────────────────────────────────────

  async #checkpointLoop(): Promise<void> {
    const signal = this.#halt.signal;
    while (!signal.aborted) {
      await this.#clock.sleep(this.#options.checkpoint.intervalMs, signal);
      if (signal.aborted) return;
      await this.#requestCheckpoint();
    }
  }

  /** Checkpoints the watermark as it is when the write starts; requests made meanwhile share one write. */
  #requestCheckpoint(): Promise<void> {
    if (this.#queuedCheckpoint !== null) return this.#queuedCheckpoint;
    const run = this.#checkpointMutex
      .run(async () => {
        this.#queuedCheckpoint = null;
        await this.#writeWatermark();
      })
      .catch((error: unknown) => {
        this.#logger.error('pipeline checkpoint failed unexpectedly', { error });
      });
    this.#queuedCheckpoint = run;
    return run;
  }

  async #writeWatermark(): Promise<void> {
    const checkpointer = this.#checkpointer;
    const target = this.#watermark.position;
    if (this.stopped || this.#finished || checkpointer === null || target === null) return;
    if (this.#lastCheckpointed !== null && !target.isAfter(this.#lastCheckpointed)) return;
    const covered = this.#watermark.covered;
    try {
      await checkpointer.checkpoint(target.sequenceNumber, target.subSequenceNumber);
      this.#lastCheckpointed = target;
      this.#coveredAtCheckpoint = covered;
      this.#checkpointFailing = false;
    } catch (error) {
      if (error instanceof LeaseLostError) {
        this.#logger.info('pipeline checkpoint refused: the lease is lost; stopping', { error });
        this.#stop('lease lost at checkpoint');
        return;
      }
      this.#checkpointFailing = true;
      this.#logger.warn('pipeline checkpoint failed; retrying at the next interval', {
        checkpoint: target.toString(),
        error,
      });
    }
  }

  // ── stopping ────────────────────────────────────────────────────────────────────────────────

  #stop(reason: string): void {
    if (this.stopped) return;
    this.#halt.abort();
    this.#logger.debug('pipeline stopped', { reason, inFlight: this.#inFlight });
    this.#queue.clear();
    for (const accumulator of this.#accumulators.values()) accumulator.timer.abort();
    this.#accumulators.clear();
    for (const queue of this.#batchQueues) queue.clear();
    this.#watermark.clear();
    this.#inFlight = 0;
    for (const wake of [...this.#roomWaiters]) wake();
    for (const wake of [...this.#idleWaiters]) wake(false);
  }
}
