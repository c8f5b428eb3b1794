import type { ChildShard, _Record as KinesisSdkRecord } from '@aws-sdk/client-kinesis';
import type { Clock, RandomSource } from '@kcl/core';
import { Backoff } from '../backoff.js';
import { classifyKinesisError, type KinesisErrorKind } from './kinesis-errors.js';
import type { IteratorPosition, StreamReader } from './kinesis-stream.js';

/** One GetRecords result, or the end of the shard. */
export interface FetchedBatch {
  readonly records: readonly KinesisSdkRecord[];
  readonly millisBehindLatest: number;
  /**
   * Set when the shard has ended: no next iterator. The children come from GetRecords' ChildShards;
   * an empty list means Kinesis gave none (the shard or stream was deleted, or the children must be
   * looked up with ListShards).
   */
  readonly shardEnd: { readonly childShards: readonly ChildShard[]; readonly gone: boolean } | null;
  /**
   * Where the read got to when it brought no records (a fan-out event's continuation sequence
   * number): a checkpoint may name it.
   */
  readonly position?: string;
}

/** Where a shard consumer's batches come from: GetRecords polling, or a fan-out subscription. */
export interface BatchSource {
  /** Starts reading in the background. */
  start(): void;
  /**
   * The next batch, waiting for it if needed. Resolves to null when stopped; rejects with a fatal
   * Kinesis error (permissions, say).
   */
  next(signal?: AbortSignal): Promise<FetchedBatch | null>;
  /** Stops reading; an in-flight call is aborted. Idempotent. */
  stop(): Promise<void>;
}

export interface RecordFetcherOptions {
  readonly stream: StreamReader;
  readonly shardId: string;
  readonly start: IteratorPosition;
  readonly maxRecords: number;
  /** Wait between polls when caught up (no records, or at the tip of the shard). */
  readonly pollIntervalMs: number;
  /** Minimum spacing of GetRecords calls for the shard: 200 ms keeps within 5 calls per second. */
  readonly minCallSpacingMs: number;
  readonly clock: Clock;
  readonly random: RandomSource;
  readonly backoff: { readonly initialMs: number; readonly maxMs: number };
  /** Reports throttling, expired iterators and transient errors (for events, logs and metrics). */
  readonly onIssue?: (issue: FetchIssue) => void;
  /** Called with the latency of each successful GetRecords call. */
  readonly onCall?: (durationMs: number, recordCount: number) => void;
}

export interface FetchIssue {
  readonly kind: KinesisErrorKind | 'shard-end-without-children';
  readonly error: unknown;
  readonly backoffMs: number;
}

/**
 * Reads one shard with GetRecords, one batch ahead of the consumer: while the processor works on a
 * batch the next one is fetched, and fetching pauses while a batch waits. Calls are spaced to stay
 * within the per-shard limit; throttling and transient failures back off exponentially with jitter;
 * an expired iterator is renewed after the last record read.
 */
export class RecordFetcher implements BatchSource {
  readonly #options: RecordFetcherOptions;
  readonly #controller = new AbortController();
  readonly #buffered: FetchedBatch[] = [];
  #failure: unknown = null;
  #ended = false;
  #wakeConsumer: (() => void) | null = null;
  #wakeProducer: (() => void) | null = null;
  #lastSequenceNumber: string | null = null;
  #loop: Promise<void> | null = null;

  constructor(options: RecordFetcherOptions) {
    this.#options = options;
  }

  /** Starts fetching in the background. */
  start(): void {
    this.#loop ??= this.#run().catch((error: unknown) => {
      this.#failure = error;
      this.#wakeConsumer?.();
    });
  }

  /**
   * The next batch, waiting for it if needed. Resolves to null when the fetcher was stopped; rejects
   * with a fatal Kinesis error (permissions, say).
   */
  async next(signal?: AbortSignal): Promise<FetchedBatch | null> {
    for (;;) {
      const batch = this.#buffered.shift();
      if (batch !== undefined) {
        this.#wakeProducer?.();
        return batch;
      }
      if (this.#failure !== null) throw this.#failure;
      if (this.#controller.signal.aborted || signal?.aborted || this.#ended) return null;
      await new Promise<void>((resolve) => {
        const onAbort = (): void => resolve();
        signal?.addEventListener('abort', onAbort, { once: true });
        this.#wakeConsumer = () => {
          signal?.removeEventListener('abort', onAbort);
          resolve();
        };
      });
      this.#wakeConsumer = null;
    }
  }

  /** Stops fetching; an in-flight call is aborted. Idempotent. */
  async stop(): Promise<void> {
    this.#controller.abort();
    this.#wakeProducer?.();
    this.#wakeConsumer?.();
    await this.#loop;
  }

  async #run(): Promise<void> {
    const options = this.#options;
    const signal = this.#controller.signal;
    const backoff = new Backoff({ ...options.backoff, random: options.random });
    let iterator: string | null = null;
    let lastCallStartedAt = Number.NEGATIVE_INFINITY;
    let nextSpacing = 0;
    let emptyEnds = 0;

    while (!signal.aborted) {
      if (this.#buffered.length > 0) {
        await new Promise<void>((resolve) => {
          this.#wakeProducer = resolve;
        });
        this.#wakeProducer = null;
        continue;
      }
      const wait = lastCallStartedAt + nextSpacing - options.clock.monotonicNow();
      if (wait > 0) await options.clock.sleep(wait, signal);
      if (signal.aborted) break;

      try {
        iterator ??= await options.stream.getShardIterator(options.shardId, this.#restartPosition(), signal);
        lastCallStartedAt = options.clock.monotonicNow();
        const output = await options.stream.getRecords(iterator, options.maxRecords, signal);
        options.onCall?.(options.clock.monotonicNow() - lastCallStartedAt, output.Records?.length ?? 0);
        backoff.reset();
        const records = output.Records ?? [];
        const last = records.at(-1);
        if (last?.SequenceNumber !== undefined) this.#lastSequenceNumber = last.SequenceNumber;
        const millisBehindLatest = output.MillisBehindLatest ?? 0;
        if (output.NextShardIterator === undefined || output.NextShardIterator === null) {
          const childShards = output.ChildShards ?? [];
          if (childShards.length === 0 && emptyEnds < 2) {
            // Not a valid end (the Java KCL retries these too): read again from the last record.
            emptyEnds += 1;
            if (records.length > 0) this.#push({ records, millisBehindLatest, shardEnd: null });
            iterator = null;
            const delay = backoff.next();
            options.onIssue?.({ kind: 'shard-end-without-children', error: null, backoffMs: delay });
            nextSpacing = delay;
            continue;
          }
          this.#push({ records, millisBehindLatest, shardEnd: { childShards, gone: false } });
          this.#ended = true;
          this.#wakeConsumer?.();
          return;
        }
        emptyEnds = 0;
        iterator = output.NextShardIterator;
        this.#push({ records, millisBehindLatest, shardEnd: null });
        const behind = records.length >= options.maxRecords || (records.length > 0 && millisBehindLatest > 0);
        nextSpacing = behind
          ? options.minCallSpacingMs
          : Math.max(options.pollIntervalMs, options.minCallSpacingMs);
      } catch (error) {
        if (signal.aborted) break;
        const kind = classifyKinesisError(error);
        if (kind === 'not-found') {
          this.#push({ records: [], millisBehindLatest: 0, shardEnd: { childShards: [], gone: true } });
          this.#ended = true;
          this.#wakeConsumer?.();
          return;
        }
        if (kind === 'fatal') throw error;
        if (kind === 'expired-iterator' || kind === 'invalid-argument') {
          iterator = null;
          options.onIssue?.({ kind, error, backoffMs: 0 });
          nextSpacing = options.minCallSpacingMs;
          continue;
        }
        const delay = backoff.next();
        options.onIssue?.({ kind, error, backoffMs: delay });
        lastCallStartedAt = options.clock.monotonicNow();
        nextSpacing = delay;
      }
    }
  }

  #restartPosition(): IteratorPosition {
    return this.#lastSequenceNumber === null
      ? this.#options.start
      : { type: 'AFTER_SEQUENCE_NUMBER', sequenceNumber: this.#lastSequenceNumber };
  }

  #push(batch: FetchedBatch): void {
    this.#buffered.push(batch);
    this.#wakeConsumer?.();
  }
}
