import { ExtendedSequenceNumber } from '@kcl/core';
import type { KinesisRecord } from '../processing/record-processor.js';
import type { ConsumedStream } from '../streams/stream-options.js';

/** The batch key of a message whose `handleMessage` did not choose one. */
export const DEFAULT_BATCH_KEY = 'default';

/** One record travelling through a pipeline. */
export interface PipelineMessage {
  readonly shardId: string;
  /** The shard's stream: its name, and its identifier when the application reads several streams. */
  readonly stream: ConsumedStream;
  /** The record, after KPL de-aggregation (its sequence and sub-sequence number place it in the shard). */
  readonly record: KinesisRecord;
  /** The record's payload (`record.data`). */
  readonly data: Uint8Array;
  /** The ordering key `partitionBy` gave it, or null without `partitionBy`. */
  readonly partition: string | null;
  /** The batch it joins: messages are batched with others of the same key. `handleMessage` may set it. */
  batchKey: string;
  /** Attempts in the current stage, 1 on the first. A retry after a failure counts up. */
  readonly attempt: number;
  /** True once the current attempt failed (the handler threw or called `fail`). */
  readonly failed: boolean;
  /** Why it failed: what the handler threw or the reason given to `fail`; undefined while not failed. */
  readonly failure: unknown;
  /** Marks the message failed in the current attempt; it goes to `handleFailed` instead of on. */
  fail(reason?: unknown): void;
}

/** The pipeline's own view of a message: its place in the shard and whether it is done. */
export class TrackedMessage implements PipelineMessage {
  readonly shardId: string;
  readonly stream: ConsumedStream;
  readonly record: KinesisRecord;
  readonly position: ExtendedSequenceNumber;
  partition: string | null = null;
  batchKey: string = DEFAULT_BATCH_KEY;
  /** Acknowledged (handled or skipped): the watermark may pass it. */
  done = false;
  #attempt = 0;
  #failed = false;
  #failure: unknown;

  constructor(shardId: string, record: KinesisRecord, stream: ConsumedStream) {
    this.shardId = shardId;
    this.stream = stream;
    this.record = record;
    this.position = ExtendedSequenceNumber.of(record.sequenceNumber, record.subSequenceNumber);
  }

  get data(): Uint8Array {
    return this.record.data;
  }

  get attempt(): number {
    return this.#attempt;
  }

  get failed(): boolean {
    return this.#failed;
  }

  get failure(): unknown {
    return this.#failure;
  }

  fail(reason?: unknown): void {
    if (this.done) return;
    this.#failed = true;
    this.#failure = reason;
  }

  /** Starts an attempt: clears the previous failure. */
  beginAttempt(): void {
    this.#attempt += 1;
    this.#failed = false;
    this.#failure = undefined;
  }

  /** Moves to the next stage: attempts count from 1 again. */
  enterStage(): void {
    this.#attempt = 0;
    this.#failed = false;
    this.#failure = undefined;
  }
}
