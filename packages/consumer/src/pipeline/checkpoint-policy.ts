import type { ExtendedSequenceNumber } from '@kcl/core';
import { KclError, LeaseLostError } from '@kcl/core';
import { Mutex } from '../mutex.js';
import type { Checkpointer } from '../processing/record-processor.js';
import type { Admission } from './admission.js';
import type { PipelineStage } from './pipeline-stage.js';

/**
 * When a shard's pipeline checkpoints its watermark: every `checkpoint.intervalMs` while it moves,
 * as soon as it has passed `checkpoint.everyMessages` messages since the last checkpoint, and on a
 * graceful stop. One write at a time; requests made while one waits share it. A failing write is
 * retried at the next interval (not per message); a write refused because the lease is lost stops the
 * pipeline.
 */
export class CheckpointPolicy {
  readonly #stage: PipelineStage;
  readonly #admission: Admission;
  readonly #onLeaseLost: () => void;
  readonly #mutex = new Mutex();
  #checkpointer: Checkpointer | null = null;
  #intervalLoop: Promise<void> | null = null;
  #queued: Promise<void> | null = null;
  #lastCheckpointed: ExtendedSequenceNumber | null = null;
  #coveredAtCheckpoint = 0;
  #failing = false;
  /** SHARD_END is written: nothing is checkpointed after it. */
  #finished = false;

  constructor(stage: PipelineStage, admission: Admission, onLeaseLost: () => void) {
    this.#stage = stage;
    this.#admission = admission;
    this.#onLeaseLost = onLeaseLost;
  }

  /** The last position checkpointed, or null. */
  get lastCheckpointed(): ExtendedSequenceNumber | null {
    return this.#lastCheckpointed;
  }

  /**
   * The checkpoint the checkpointer knows, or null before it is handed over. It may be past
   * `lastCheckpointed`: a transaction whose answer was lost committed after all (the checkpointer
   * learns it from the stored lease when the batch's next transaction starts).
   */
  get checkpointerPosition(): ExtendedSequenceNumber | null {
    return this.#checkpointer?.lastCheckpoint ?? null;
  }

  /** The checkpointer of the latest call from the shard consumer: checkpoints go through it. */
  use(checkpointer: Checkpointer): void {
    this.#checkpointer = checkpointer;
  }

  /** Starts the interval checkpoints (once; they end when the pipeline stops). */
  startInterval(): void {
    this.#intervalLoop ??= this.#runInterval();
  }

  /** A message was acknowledged: checkpoint now if the watermark has passed enough of them. */
  acknowledged(): void {
    if (
      !this.#failing &&
      this.#admission.covered - this.#coveredAtCheckpoint >= this.#stage.options.checkpoint.everyMessages
    ) {
      void this.request();
    }
  }

  /** Checkpoints the watermark as it is when the write starts; requests made meanwhile share one write. */
  request(): Promise<void> {
    if (this.#queued !== null) return this.#queued;
    const run = this.#mutex
      .run(async () => {
        this.#queued = null;
        await this.#writeWatermark();
      })
      .catch((error: unknown) => {
        this.#stage.logger.error('pipeline checkpoint failed unexpectedly', { error });
      });
    this.#queued = run;
    return run;
  }

  /**
   * A batch's transaction (`BatchInfo.transaction`): `work` and the checkpoint at `position` (where
   * the watermark reaches once the batch is acknowledged) commit together, in turn with the watermark
   * writes, so a plain checkpoint of an older watermark never follows it. A position not past the last
   * checkpoint leaves the checkpoint where it is.
   */
  transaction<Transaction, T>(
    position: ExtendedSequenceNumber | null,
    work: (transaction: Transaction) => Promise<T> | T,
  ): Promise<T> {
    return this.#mutex.run(async () => {
      const checkpointer = this.#checkpointer;
      if (checkpointer === null) {
        throw new KclError(
          'PIPELINE_STOPPED',
          `@kcl/consumer: the pipeline of ${this.#stage.context.leaseKey} has no checkpointer yet`,
        );
      }
      const value = await checkpointer.transaction<Transaction, T>(async (transaction, checkpoint) => {
        const last = checkpointer.lastCheckpoint;
        const target = position?.isAfter(last) ? position : last;
        checkpoint.checkpoint(target.sequenceNumber, target.subSequenceNumber);
        return work(transaction);
      });
      const written = checkpointer.lastCheckpoint;
      if (this.#lastCheckpointed === null || written.isAfter(this.#lastCheckpointed)) {
        this.#lastCheckpointed = written;
      }
      return value;
    });
  }

  /** Checkpoints SHARD_END (after the last watermark write), and nothing after it. */
  async writeShardEnd(checkpointer: Checkpointer): Promise<void> {
    await this.#mutex.run(async () => {
      await checkpointer.checkpoint();
      this.#finished = true;
    });
  }

  async #runInterval(): Promise<void> {
    const signal = this.#stage.halt;
    while (!signal.aborted) {
      await this.#stage.clock.sleep(this.#stage.options.checkpoint.intervalMs, signal);
      if (signal.aborted) return;
      await this.request();
    }
  }

  async #writeWatermark(): Promise<void> {
    const checkpointer = this.#checkpointer;
    const target = this.#admission.watermark;
    if (this.#stage.halt.aborted || this.#finished || checkpointer === null || target === null) return;
    if (this.#lastCheckpointed !== null && !target.isAfter(this.#lastCheckpointed)) return;
    const covered = this.#admission.covered;
    try {
      await checkpointer.checkpoint(target.sequenceNumber, target.subSequenceNumber);
      this.#lastCheckpointed = target;
      this.#coveredAtCheckpoint = covered;
      this.#failing = false;
    } catch (error) {
      if (LeaseLostError.is(error)) {
        this.#stage.logger.info('pipeline checkpoint refused: the lease is lost; stopping', { error });
        this.#onLeaseLost();
        return;
      }
      this.#failing = true;
      this.#stage.logger.warn('pipeline checkpoint failed; retrying at the next interval', {
        checkpoint: target.toString(),
        error,
      });
    }
  }
}
