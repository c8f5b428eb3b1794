import { type KinesisClient, PutRecordsCommand } from '@aws-sdk/client-kinesis';
import { type Clock, systemClock } from '@kcl/core';

/** The partition key of the record written `index`-th: keys take turns, so any `keys` consecutive records have distinct keys. */
export function partitionKeyOf(index: number, keys: number): string {
  return `key-${index % keys}`;
}

/**
 * The payload of the record written `index`-th: `r-<index>`, or `<stream>/r-<index>` when the demo
 * writes to several streams (`stream` not null), so every record of every stream is distinct and
 * names the stream it was written to. Verification reads the index back from it.
 */
export function recordDataOf(index: number, stream: string | null = null): string {
  return stream === null ? `r-${index}` : `${stream}/r-${index}`;
}

/** The write index a payload of `stream` carries (see `recordDataOf`), or null for a payload the demo did not write there. */
export function recordIndexOf(data: string, stream: string | null = null): number | null {
  const prefix = stream === null ? '' : `${stream}/`;
  if (!data.startsWith(prefix)) return null;
  const match = /^r-(\d+)$/.exec(data.slice(prefix.length));
  return match === null ? null : Number(match[1]);
}

export interface ProducerOptions {
  readonly client: KinesisClient;
  readonly streamName: string;
  /** Name the stream in each payload (`<stream>/r-<index>`): the demo writes to several. Default false. */
  readonly streamInPayload?: boolean;
  /** Records per second. */
  readonly rate: number;
  readonly keys: number;
  readonly clock?: Clock;
  /** Called when a PutRecords call fails or some of its records are rejected; they are retried. */
  readonly onRetry?: (message: string) => void;
}

/**
 * Writes records at a steady rate. Each PutRecords batch holds every partition key at most once and
 * the next batch is sent only when the whole batch is written, so for each key the write order is the
 * order of the indexes: record `i` has key `key-(i mod keys)` and payload `r-i`.
 */
export class Producer {
  /** Records written (acknowledged by the stream), indexes 0 … written-1. */
  written = 0;
  /** PutRecords calls that failed or came back with rejected records. */
  retries = 0;
  readonly #options: ProducerOptions;
  readonly #clock: Clock;
  readonly #stop = new AbortController();
  #running: Promise<void> | null = null;
  readonly #batchSize: number;

  constructor(options: ProducerOptions) {
    this.#options = options;
    this.#clock = options.clock ?? systemClock;
    this.#batchSize = Math.min(options.keys, 500);
  }

  start(): void {
    this.#running ??= this.#run();
  }

  /** Stops after the batch in flight is written; resolves with the number of records written. */
  async stop(): Promise<number> {
    this.#stop.abort();
    await this.#running;
    return this.written;
  }

  async #run(): Promise<void> {
    const startedAt = this.#clock.monotonicNow();
    const signal = this.#stop.signal;
    while (!signal.aborted) {
      const due = Math.floor(((this.#clock.monotonicNow() - startedAt) / 1000) * this.#options.rate);
      while (this.written < due && !signal.aborted) {
        await this.#writeBatch(Math.min(this.#batchSize, due - this.written));
      }
      await this.#clock.sleep(50, signal);
    }
  }

  async #writeBatch(size: number): Promise<void> {
    const { client, streamName, keys } = this.#options;
    const first = this.written;
    let pending = Array.from({ length: size }, (_, offset) => ({
      PartitionKey: partitionKeyOf(first + offset, keys),
      Data: Buffer.from(
        recordDataOf(first + offset, this.#options.streamInPayload === true ? streamName : null),
      ),
    }));
    // Finish the batch even when asked to stop, so `written` counts whole batches only.
    for (let attempt = 1; pending.length > 0; attempt++) {
      try {
        const output = await client.send(new PutRecordsCommand({ StreamName: streamName, Records: pending }));
        const rejected = pending.filter((_, position) => output.Records?.[position]?.ErrorCode !== undefined);
        if (rejected.length > 0) {
          this.retries += 1;
          this.#options.onRetry?.(`${rejected.length} of ${pending.length} records rejected; retrying them`);
        }
        pending = rejected;
      } catch (error) {
        this.retries += 1;
        this.#options.onRetry?.(`PutRecords failed (${(error as Error).message}); retrying`);
        if (attempt >= 100) throw error;
      }
      if (pending.length > 0) await this.#clock.sleep(Math.min(100 * attempt, 1_000));
    }
    this.written = first + size;
  }
}
