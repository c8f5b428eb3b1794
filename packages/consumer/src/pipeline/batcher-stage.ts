import { Backoff } from '../backoff.js';
import { Deque, hashPartition } from './partitioned-queue.js';
import type { TrackedMessage } from './pipeline-message.js';
import type { BatchTrigger } from './pipeline-options.js';
import { decideOnFailure, type PipelineStage } from './pipeline-stage.js';

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
 * The batcher stage: messages gather per `batchKey` into batches handed to `handleBatch` when full
 * (`batchSize`), when `batchTimeoutMs` has passed since the first one, or at once while draining;
 * `batchers.concurrency` calls at a time. With `partitionBy`, a partition's messages go to one lane
 * (one batcher each), so a key's batches are handled in order, and a key's later message is never
 * acknowledged before its failed predecessor. The stage counts the messages of each partition it holds,
 * so the processor stage can wait for a partition to leave it (`partitionSettled`).
 */
export class BatcherStage {
  readonly #stage: PipelineStage;
  readonly #partitioned: boolean;
  readonly #accumulators = new Map<string, Accumulator>();
  readonly #queues: Deque<PendingBatch>[];
  readonly #active: number[];
  /** With `partitionBy`: per partition, the messages added and not yet acknowledged. */
  readonly #held = new Map<string, number>();
  readonly #settledWaiters = new Map<string, Set<() => void>>();

  constructor(stage: PipelineStage) {
    this.#stage = stage;
    this.#partitioned = stage.options.partitionBy !== null;
    const lanes = this.#partitioned ? stage.options.batchers.concurrency : 1;
    this.#queues = Array.from({ length: lanes }, () => new Deque<PendingBatch>());
    this.#active = Array.from({ length: lanes }, () => 0);
  }

  add(message: TrackedMessage): void {
    message.enterStage();
    if (this.#partitioned) {
      const partition = message.partition ?? '';
      this.#held.set(partition, (this.#held.get(partition) ?? 0) + 1);
    }
    const lane = this.#laneOf(message);
    const key = `${lane}\u0000${message.batchKey}`;
    let accumulator = this.#accumulators.get(key);
    if (accumulator === undefined) {
      accumulator = { lane, batchKey: message.batchKey, messages: [], timer: new AbortController() };
      this.#accumulators.set(key, accumulator);
    }
    accumulator.messages.push(message);
    if (accumulator.messages.length >= this.#stage.options.batchers.batchSize) {
      this.#emit(key, accumulator, 'size');
    } else if (accumulator.messages.length === 1) {
      void this.#batchTimeout(key, accumulator);
    }
  }

  /**
   * Resolves once this stage holds no message of `partition` (every one it was given is acknowledged),
   * or the pipeline stops. Without `partitionBy`, at once.
   */
  partitionSettled(partition: string): Promise<void> {
    if (this.#stage.halt.aborted || (this.#held.get(partition) ?? 0) === 0) return Promise.resolve();
    // The caller holds a processor slot while it waits: a partial batch of the partition would fill
    // only through that stage, so it goes now rather than at its timeout.
    for (const [key, accumulator] of [...this.#accumulators]) {
      if (accumulator.messages.some((message) => (message.partition ?? '') === partition)) {
        this.#emit(key, accumulator, 'ordering');
      }
    }
    return new Promise<void>((resolve) => {
      let waiters = this.#settledWaiters.get(partition);
      if (waiters === undefined) {
        waiters = new Set();
        this.#settledWaiters.set(partition, waiters);
      }
      waiters.add(resolve);
    });
  }

  /** Hands every partial batch over now (draining: nothing is left upstream to fill them). */
  flushPartial(): void {
    for (const [key, accumulator] of [...this.#accumulators]) this.#emit(key, accumulator, 'drain');
  }

  /** The pipeline stopped: drop the partial and queued batches (running calls finish and are ignored). */
  clear(): void {
    for (const accumulator of this.#accumulators.values()) accumulator.timer.abort();
    this.#accumulators.clear();
    for (const queue of this.#queues) queue.clear();
    this.#held.clear();
    const waiters = [...this.#settledWaiters.values()];
    this.#settledWaiters.clear();
    for (const wake of waiters.flatMap((set) => [...set])) wake();
  }

  #laneOf(message: TrackedMessage): number {
    if (!this.#partitioned) return 0;
    return hashPartition(message.partition ?? '') % this.#stage.options.batchers.concurrency;
  }

  async #batchTimeout(key: string, accumulator: Accumulator): Promise<void> {
    await this.#stage.clock.sleep(this.#stage.options.batchers.batchTimeoutMs, accumulator.timer.signal);
    if (accumulator.timer.signal.aborted || this.#stage.halt.aborted) return;
    if (this.#accumulators.get(key) === accumulator) this.#emit(key, accumulator, 'timeout');
  }

  #emit(key: string, accumulator: Accumulator, trigger: BatchTrigger): void {
    this.#accumulators.delete(key);
    accumulator.timer.abort();
    this.#queues[accumulator.lane]?.push({
      batchKey: accumulator.batchKey,
      messages: accumulator.messages,
      trigger,
    });
    this.#pump();
  }

  #pump(): void {
    if (this.#stage.halt.aborted) return;
    // Partitioned: one batcher per lane keeps a key's batches in order. Otherwise: any free batcher.
    const perLane = this.#partitioned ? 1 : this.#stage.options.batchers.concurrency;
    for (let lane = 0; lane < this.#queues.length; lane++) {
      const queue = this.#queues[lane] as Deque<PendingBatch>;
      while ((this.#active[lane] ?? 0) < perLane) {
        const batch = queue.shift();
        if (batch === undefined) break;
        this.#active[lane] = (this.#active[lane] ?? 0) + 1;
        void this.#run(lane, batch);
      }
    }
  }

  async #run(lane: number, batch: PendingBatch): Promise<void> {
    const stage = this.#stage;
    const { handleBatch } = stage.options;
    let messages = batch.messages;
    let trigger = batch.trigger;
    let backoff: Backoff | null = null;
    try {
      if (handleBatch === null) return;
      for (let attempt = 1; ; attempt++) {
        messages = this.#withoutCommitted(messages);
        if (messages.length === 0) return;
        for (const message of messages) message.beginAttempt();
        const attemptMessages = messages;
        try {
          await stage.counted(() =>
            handleBatch(
              messages,
              {
                batchKey: batch.batchKey,
                size: messages.length,
                trigger,
                attempt,
                transaction: (work) => stage.transaction(attemptMessages, work),
              },
              stage.context,
            ),
          );
        } catch (error) {
          for (const message of messages) message.fail(error);
        }
        if (stage.halt.aborted) return;
        const again = new Set(this.#failedInOrder(messages));
        for (const message of messages) if (!again.has(message)) this.#acknowledge(message);
        const failed = this.#withoutCommitted([...again]);
        if (failed.length === 0) return;
        const action = await decideOnFailure(
          stage,
          failed.filter((message) => message.failed),
          'batch',
          batch.batchKey,
          attempt,
        );
        if (stage.halt.aborted) return;
        if (action === 'skip') {
          for (const message of failed) this.#acknowledge(message);
          return;
        }
        backoff ??= new Backoff({ ...stage.options.retry, random: stage.random });
        await stage.clock.sleep(backoff.next(), stage.halt);
        if (stage.halt.aborted) return;
        messages = failed;
        trigger = 'retry';
      }
    } catch (error) {
      stage.logger.error('pipeline batcher stage failed unexpectedly', { error });
    } finally {
      this.#active[lane] = (this.#active[lane] ?? 1) - 1;
      this.#pump();
    }
  }

  /**
   * The messages not yet committed. A message at or before the checkpoint was committed by a
   * transaction (`batch.transaction`) although the attempt failed — its answer was lost, or the handler
   * threw after it — so it is acknowledged here and never handed over again: retrying it would write
   * its rows twice.
   */
  #withoutCommitted(messages: TrackedMessage[]): TrackedMessage[] {
    const checkpoint = this.#stage.lastCheckpoint();
    if (checkpoint === null || !messages.some((message) => !message.position.isAfter(checkpoint))) {
      return messages;
    }
    const left: TrackedMessage[] = [];
    for (const message of messages) {
      if (message.position.isAfter(checkpoint)) left.push(message);
      else this.#acknowledge(message);
    }
    return left;
  }

  /** Acknowledges a message leaving the stage; the last of its partition wakes `partitionSettled`. */
  #acknowledge(message: TrackedMessage): void {
    this.#stage.acknowledge(message);
    if (!this.#partitioned) return;
    const partition = message.partition ?? '';
    const held = (this.#held.get(partition) ?? 0) - 1;
    if (held > 0) {
      this.#held.set(partition, held);
      return;
    }
    this.#held.delete(partition);
    const waiters = this.#settledWaiters.get(partition);
    this.#settledWaiters.delete(partition);
    for (const wake of waiters ?? []) wake();
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
}
