import type { ExtendedSequenceNumber } from '@kcl/core';
import type { KinesisRecord } from '../processing/record-processor.js';
import { AcknowledgementWatermark } from './acknowledgement-watermark.js';
import { TrackedMessage } from './pipeline-message.js';
import type { PipelineStage } from './pipeline-stage.js';

/**
 * What enters a shard's pipeline and what is still in it: records become messages while there is
 * room (at most `capacity` admitted and not yet acknowledged), `processRecords` waits for room when
 * the pipeline is full — so the shard consumer stops polling — and is let in again once the in-flight
 * count has fallen to the resume level. Acknowledgements move the watermark, the position below which
 * every admitted message is acknowledged.
 */
export class Admission {
  readonly capacity: number;
  readonly #stage: PipelineStage;
  /** Admission resumes at or below this many messages in flight. */
  readonly #resumeAt: number;
  readonly #watermark = new AcknowledgementWatermark<TrackedMessage>();
  readonly #roomWaiters = new Set<() => void>();
  readonly #idleWaiters = new Set<(idle: boolean) => void>();
  #inFlight = 0;

  constructor(stage: PipelineStage, capacity: number) {
    this.#stage = stage;
    this.capacity = capacity;
    const { concurrency, maxDemand, minDemand } = stage.options.processors;
    this.#resumeAt = Math.max(0, capacity - concurrency * (maxDemand - minDemand));
  }

  /** Messages admitted and not yet acknowledged. */
  get inFlight(): number {
    return this.#inFlight;
  }

  get full(): boolean {
    return this.#inFlight >= this.capacity;
  }

  /** The position below which every admitted message is acknowledged, or null before the first. */
  get watermark(): ExtendedSequenceNumber | null {
    return this.#watermark.position;
  }

  /** Where the watermark would be once `messages` are acknowledged (it does not move now). */
  watermarkIfAcknowledged(messages: readonly TrackedMessage[]): ExtendedSequenceNumber | null {
    return this.#watermark.positionIfDone(new Set(messages));
  }

  /** How many messages the watermark has passed so far. */
  get covered(): number {
    return this.#watermark.covered;
  }

  /**
   * The record as a message, counted in flight (its partition set with `partitionBy`), or null for a
   * record at or before one already admitted (it is ignored).
   */
  admit(record: KinesisRecord): TrackedMessage | null {
    const { options, logger, context } = this.#stage;
    const message = new TrackedMessage(context.shardId, record, context.stream);
    if (!this.#watermark.add(message)) {
      logger.warn('pipeline ignored a record at or before one it already has', {
        sequenceNumber: record.sequenceNumber,
        subSequenceNumber: record.subSequenceNumber,
      });
      return null;
    }
    if (options.partitionBy !== null) message.partition = this.#partitionOf(message);
    this.#inFlight += 1;
    return message;
  }

  #partitionOf(message: TrackedMessage): string {
    try {
      const key = this.#stage.options.partitionBy?.(message);
      return typeof key === 'string' ? key : String(key);
    } catch (error) {
      this.#stage.logger.warn('partitionBy threw; ordering by the record partition key instead', {
        sequenceNumber: message.record.sequenceNumber,
        error,
      });
      return message.record.partitionKey;
    }
  }

  /** Resolves when there may be room again (or `signal` aborts, or the pipeline stops). */
  waitForRoom(signal: AbortSignal | undefined): Promise<void> {
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
  async waitIdle(timeoutMs: number | null, signal?: AbortSignal): Promise<boolean> {
    if (this.#stage.halt.aborted || signal?.aborted === true) return false;
    if (this.#inFlight === 0) return true;
    const timer = new AbortController();
    let waiter: (idle: boolean) => void = () => {};
    const idle = new Promise<boolean>((resolve) => {
      waiter = resolve;
      this.#idleWaiters.add(waiter);
    });
    const racers = [idle];
    if (timeoutMs !== null) racers.push(this.#stage.clock.sleep(timeoutMs, timer.signal).then(() => false));
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

  /**
   * Counts a message out: moves the watermark, lets `processRecords` in again at the resume level,
   * wakes `waitIdle` at zero. False for a message acknowledged before (nothing changes).
   */
  acknowledge(message: TrackedMessage): boolean {
    if (message.done) return false;
    message.done = true;
    this.#inFlight -= 1;
    this.#watermark.advance();
    if (this.#inFlight <= this.#resumeAt) {
      for (const wake of [...this.#roomWaiters]) wake();
    }
    if (this.#inFlight === 0) {
      for (const wake of [...this.#idleWaiters]) wake(true);
    }
    return true;
  }

  /** The pipeline stopped: forget every message, wake every waiter (`waitIdle` with false). */
  clear(): void {
    this.#watermark.clear();
    this.#inFlight = 0;
    for (const wake of [...this.#roomWaiters]) wake();
    for (const wake of [...this.#idleWaiters]) wake(false);
  }
}
