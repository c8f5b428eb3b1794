import type { Clock, ExtendedSequenceNumber, Logger, RandomSource } from '@kcl/core';
import { childLogger, InvalidCheckpointError, KclError } from '@kcl/core';
import type {
  ProcessorContext,
  ProcessRecordsInput,
  RecordProcessor,
  ShardEndedInput,
  ShutdownRequestedInput,
} from '../processing/record-processor.js';
import { Admission } from './admission.js';
import { BatcherStage } from './batcher-stage.js';
import { CheckpointPolicy } from './checkpoint-policy.js';
import type { TrackedMessage } from './pipeline-message.js';
import type { PipelineContext, ResolvedPipelineOptions } from './pipeline-options.js';
import { pipelineCapacity } from './pipeline-options.js';
import type { PipelineStage } from './pipeline-stage.js';
import { ProcessorStage } from './processor-stage.js';

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

/**
 * The pipeline of one lease incarnation, as a `RecordProcessor`. `processRecords` admits records as
 * messages while there is room (`Admission`) and waits when the pipeline is full, so the shard
 * consumer stops polling (its fetcher holds at most one batch ahead). Messages flow through
 * `handleMessage` (`ProcessorStage`) and `handleBatch` (`BatcherStage`) concurrently; acknowledgements
 * move a watermark that is checkpointed per the `CheckpointPolicy`.
 */
export class PipelineProcessor implements RecordProcessor {
  readonly #options: ResolvedPipelineOptions;
  readonly #clock: Clock;
  readonly #logger: Logger;
  readonly #context: PipelineContext;
  readonly #halt = new AbortController();
  readonly #admission: Admission;
  readonly #processors: ProcessorStage;
  readonly #batchers: BatcherStage;
  readonly #checkpoints: CheckpointPolicy;
  readonly #handlerWaiters = new Set<() => void>();
  #runningHandlers = 0;
  #draining = false;

  /**
   * With the consumer option `exactlyOnce`: a batch transaction whose checkpoint would stop before the
   * batch's last message is refused (its rows would be written again by the lease's next owner).
   */
  readonly #exactlyOnce: boolean;

  constructor(
    options: ResolvedPipelineOptions,
    runtime: PipelineRuntime,
    context: ProcessorContext,
    exactlyOnce = false,
  ) {
    this.#exactlyOnce = exactlyOnce;
    this.#options = options;
    this.#clock = runtime.clock;
    this.#context = {
      shardId: context.shardId,
      leaseKey: context.leaseKey,
      workerId: context.workerId,
      stream: context.stream,
    };
    this.#logger = childLogger(runtime.logger, { leaseKey: context.leaseKey });
    const stage: PipelineStage = {
      options,
      clock: runtime.clock,
      random: runtime.random,
      logger: this.#logger,
      context: this.#context,
      halt: this.#halt.signal,
      counted: (call) => this.#counted(call),
      acknowledge: (message) => this.#acknowledge(message),
      transaction: (messages, work) => this.#transaction(messages, work),
      lastCheckpoint: () => this.#checkpoints.checkpointerPosition,
    };
    this.#admission = new Admission(stage, pipelineCapacity(options));
    this.#batchers = new BatcherStage(stage);
    this.#processors = new ProcessorStage(stage, {
      handled: (message) => {
        if (options.handleBatch === null) this.#acknowledge(message);
        else this.#batchers.add(message);
      },
      settled: () => this.#flushIfDrained(),
      predecessorsSettled: (message) => this.#batchers.partitionSettled(message.partition ?? ''),
    });
    this.#checkpoints = new CheckpointPolicy(stage, this.#admission, () =>
      this.#stop('lease lost at checkpoint'),
    );
  }

  /** Messages admitted and not yet acknowledged. */
  get inFlight(): number {
    return this.#admission.inFlight;
  }

  /** The most messages admitted and not yet acknowledged at any time. */
  get capacity(): number {
    return this.#admission.capacity;
  }

  /** The position below which every admitted message is acknowledged, or null before the first. */
  get watermark(): ExtendedSequenceNumber | null {
    return this.#admission.watermark;
  }

  /** The last position this pipeline checkpointed, or null. */
  get lastCheckpointed(): ExtendedSequenceNumber | null {
    return this.#checkpoints.lastCheckpointed;
  }

  /** True once the pipeline stopped (lease lost, shutdown or shard end): it handles nothing more. */
  get stopped(): boolean {
    return this.#halt.signal.aborted;
  }

  async processRecords(input: ProcessRecordsInput): Promise<void> {
    if (this.stopped) return;
    this.#checkpoints.use(input.checkpointer);
    this.#checkpoints.startInterval();
    const signal = (input as ProcessRecordsInput & HaltableInput).signal;
    for (const record of input.records) {
      while (this.#admission.full && !this.stopped && signal?.aborted !== true) {
        await this.#admission.waitForRoom(signal);
      }
      if (this.stopped || signal?.aborted === true) return;
      const message = this.#admission.admit(record);
      if (message === null) continue;
      if (this.#options.handleMessage !== null) this.#processors.push(message);
      else this.#batchers.add(message);
    }
  }

  /**
   * Graceful stop: drain (bounded by `drainTimeoutMs`, and by the input's signal, which aborts when the
   * worker's shutdown budget runs short), checkpoint what is acknowledged, stop.
   */
  async shutdownRequested(input: ShutdownRequestedInput): Promise<void> {
    if (this.stopped) return;
    this.#checkpoints.use(input.checkpointer);
    this.#startDrain();
    const idle = await this.#admission.waitIdle(this.#options.drainTimeoutMs, input.signal);
    if (!idle && !this.stopped) {
      this.#logger.warn('pipeline drain timed out; checkpointing what is acknowledged', {
        inFlight: this.#admission.inFlight,
        drainTimeoutMs: this.#options.drainTimeoutMs,
      });
    }
    try {
      await this.#checkpoints.request();
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
    this.#checkpoints.use(input.checkpointer);
    this.#startDrain();
    await this.#admission.waitIdle(null, input.signal);
    if (this.stopped) throw this.#stoppedError();
    if (input.signal?.aborted === true) {
      throw new KclError(
        'PIPELINE_STOPPED',
        `@kcl/consumer: the pipeline of ${this.#context.leaseKey} was stopped before it drained at the shard end; the next owner finishes the shard`,
      );
    }
    await this.#checkpoints.writeShardEnd(input.checkpointer);
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

  /**
   * `BatchInfo.transaction`: the checkpoint goes where the watermark reaches once `messages` are
   * acknowledged. With `exactlyOnce`, that must be the batch's last message: otherwise the rows of the
   * messages past it would commit without the checkpoint covering them (a batch of a later `batchKey`
   * that filled first, say), and the lease's next owner would write them again.
   */
  #transaction<Transaction, T>(
    messages: readonly TrackedMessage[],
    work: (transaction: Transaction) => Promise<T> | T,
  ): Promise<T> {
    const position = this.#admission.watermarkIfAcknowledged(messages);
    if (this.#exactlyOnce) {
      let last: ExtendedSequenceNumber | null = null;
      for (const message of messages)
        if (last === null || message.position.isAfter(last)) last = message.position;
      if (last !== null && (position === null || position.isBefore(last))) {
        return Promise.reject(
          new InvalidCheckpointError(
            `@kcl/consumer: lease ${this.#context.leaseKey}: exactlyOnce refused the transaction of batch ${JSON.stringify(
              messages[0]?.batchKey,
            )}: an earlier message (before ${position ?? 'the first'}) is not acknowledged yet, so the checkpoint cannot cover the batch's last message ${last} and its rows would be written again by the lease's next owner; give every message the same batchKey (batches must commit in shard order), and the batch is retried`,
          ),
        );
      }
    }
    return this.#checkpoints.transaction(position, work);
  }

  #acknowledge(message: TrackedMessage): void {
    if (this.stopped) return;
    if (this.#admission.acknowledge(message)) this.#checkpoints.acknowledged();
  }

  /** Draining: hand partial batches over once nothing is left in the processor stage to fill them. */
  #startDrain(): void {
    this.#draining = true;
    this.#flushIfDrained();
  }

  #flushIfDrained(): void {
    if (!this.#draining || this.stopped || !this.#processors.idle) return;
    this.#batchers.flushPartial();
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

  #stoppedError(): KclError {
    return new KclError(
      'PIPELINE_STOPPED',
      `@kcl/consumer: the pipeline of ${this.#context.leaseKey} stopped because its lease was lost; the next owner finishes the shard`,
    );
  }

  #stop(reason: string): void {
    if (this.stopped) return;
    this.#halt.abort();
    this.#logger.debug('pipeline stopped', { reason, inFlight: this.#admission.inFlight });
    this.#processors.clear();
    this.#batchers.clear();
    this.#admission.clear();
  }
}
