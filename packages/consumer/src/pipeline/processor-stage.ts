import { Backoff } from '../backoff.js';
import { PartitionedQueue } from './partitioned-queue.js';
import type { TrackedMessage } from './pipeline-message.js';
import { decideOnFailure, type PipelineStage } from './pipeline-stage.js';

export interface ProcessorStageOutlets {
  /** A message `handleMessage` handled: on to the batcher stage (or acknowledged without one). */
  readonly handled: (message: TrackedMessage) => void;
  /** After every message, handled or not: the stage may have become idle. */
  readonly settled: () => void;
  /** Resolves once every earlier message of the partition has left the later stages (acknowledged). */
  readonly predecessorsSettled: (message: TrackedMessage) => Promise<void>;
}

/**
 * The processor stage: `handleMessage` per message, `processors.concurrency` at a time; with
 * `partitionBy`, one message of a partition at a time, in shard order. A failed message is decided on
 * (`handleFailed`): retried after a backoff, or skipped (acknowledged without success). With
 * `partitionBy`, it is decided on only once the earlier messages of its partition have left
 * `handleBatch`, so a key's later message is never skipped before its predecessor is handled.
 */
export class ProcessorStage {
  readonly #stage: PipelineStage;
  readonly #outlets: ProcessorStageOutlets;
  readonly #queue: PartitionedQueue<TrackedMessage>;
  #active = 0;

  constructor(stage: PipelineStage, outlets: ProcessorStageOutlets) {
    this.#stage = stage;
    this.#outlets = outlets;
    this.#queue = new PartitionedQueue<TrackedMessage>(
      stage.options.partitionBy !== null ? (message) => message.partition ?? '' : null,
    );
  }

  /** Nothing queued and no `handleMessage` running. */
  get idle(): boolean {
    return this.#queue.length === 0 && this.#active === 0;
  }

  push(message: TrackedMessage): void {
    this.#queue.push(message);
    this.#pump();
  }

  /** The pipeline stopped: drop what is queued (running calls finish and are ignored). */
  clear(): void {
    this.#queue.clear();
  }

  #pump(): void {
    while (!this.#stage.halt.aborted && this.#active < this.#stage.options.processors.concurrency) {
      const message = this.#queue.take();
      if (message === undefined) return;
      this.#active += 1;
      void this.#run(message);
    }
  }

  async #run(message: TrackedMessage): Promise<void> {
    const stage = this.#stage;
    const { handleMessage } = stage.options;
    let backoff: Backoff | null = null;
    try {
      if (handleMessage === null) return;
      for (;;) {
        message.beginAttempt();
        try {
          await stage.counted(() => handleMessage(message, stage.context));
        } catch (error) {
          message.fail(error);
        }
        if (stage.halt.aborted) return;
        if (!message.failed) break;
        await this.#outlets.predecessorsSettled(message);
        if (stage.halt.aborted) return;
        const action = await decideOnFailure(stage, [message], 'message', message.batchKey, message.attempt);
        if (stage.halt.aborted) return;
        if (action === 'skip') {
          stage.acknowledge(message);
          return;
        }
        backoff ??= new Backoff({ ...stage.options.retry, random: stage.random });
        await stage.clock.sleep(backoff.next(), stage.halt);
        if (stage.halt.aborted) return;
      }
      this.#outlets.handled(message);
    } catch (error) {
      stage.logger.error('pipeline processor stage failed unexpectedly', { error });
    } finally {
      this.#active -= 1;
      this.#queue.release(message);
      this.#pump();
      this.#outlets.settled();
    }
  }
}
