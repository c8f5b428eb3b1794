import type { KinesisClient } from '@aws-sdk/client-kinesis';
import type { Consumer, ConsumerOptions, RecordProcessor } from '@kcl/consumer';
import { createConsumer } from '@kcl/consumer';
import type { KclEvent, LeaseStore } from '@kcl/core';
import { FLEET_TIMINGS } from '@kcl/testkit';

/** One processRecords call: who processed which records of which shard, and when (ms since the test began). */
export interface ProcessedBatch {
  readonly workerId: string;
  readonly shardId: string;
  readonly data: readonly string[];
  readonly startedAt: number;
  readonly endedAt: number;
}

/** Short timings, so hand-overs and expiries happen within a test: the testkit's `fast` preset. */
export const FAST_TIMING = FLEET_TIMINGS.fast;

export interface FleetOptions {
  readonly streamName: string;
  readonly applicationName: string;
  readonly newClient: () => KinesisClient;
  readonly overrides?: Partial<ConsumerOptions>;
}

/** In-process workers of one application, each with its own store, recording every batch. */
export class Fleet {
  readonly batches: ProcessedBatch[] = [];
  readonly events: KclEvent[] = [];
  readonly workers = new Map<string, Consumer>();
  readonly #origin = performance.now();
  readonly #options: FleetOptions;

  constructor(options: FleetOptions) {
    this.#options = options;
  }

  now(): number {
    return performance.now() - this.#origin;
  }

  async add(workerId: string, leaseStore: LeaseStore): Promise<Consumer> {
    const consumer = createConsumer({
      streamName: this.#options.streamName,
      applicationName: this.#options.applicationName,
      workerId,
      kinesis: this.#options.newClient(),
      leaseStore,
      initialPosition: 'TRIM_HORIZON',
      ...FAST_TIMING,
      onEvent: (event) => this.events.push(event),
      processor: (shardId): RecordProcessor => ({
        processRecords: async ({ records, checkpointer }) => {
          // Processed, then checkpointed, as a real processor does: a checkpoint that fails after the
          // store applied it (a timeout under load) must not make the records look unprocessed.
          const startedAt = this.now();
          const data = records.map((record) => Buffer.from(record.data).toString());
          this.batches.push({ workerId, shardId, data, startedAt, endedAt: this.now() });
          await checkpointer.checkpoint();
        },
        shardEnded: async ({ checkpointer }) => {
          await checkpointer.checkpoint();
        },
        shutdownRequested: async ({ checkpointer }) => {
          await checkpointer.checkpoint();
        },
      }),
      ...this.#options.overrides,
    });
    this.workers.set(workerId, consumer);
    await consumer.start();
    return consumer;
  }

  async stop(workerId: string): Promise<void> {
    await this.workers.get(workerId)?.stop();
    this.workers.delete(workerId);
  }

  async stopAll(): Promise<void> {
    await Promise.all([...this.workers.keys()].map((workerId) => this.stop(workerId)));
  }

  processed(): string[] {
    return this.batches.flatMap((batch) => batch.data);
  }

  distinct(): Set<string> {
    return new Set(this.processed());
  }

  /**
   * Times two workers processed one shard at once: per shard, the batches in time order are grouped
   * into runs by worker, and each run must end before the next one starts.
   */
  overlaps(): string[] {
    const problems: string[] = [];
    const byShard = new Map<string, ProcessedBatch[]>();
    for (const batch of this.batches)
      byShard.set(batch.shardId, [...(byShard.get(batch.shardId) ?? []), batch]);
    for (const [shardId, batches] of byShard) {
      batches.sort((a, b) => a.startedAt - b.startedAt);
      const runs: Array<{ workerId: string; start: number; end: number }> = [];
      for (const batch of batches) {
        const last = runs.at(-1);
        if (last !== undefined && last.workerId === batch.workerId)
          last.end = Math.max(last.end, batch.endedAt);
        else runs.push({ workerId: batch.workerId, start: batch.startedAt, end: batch.endedAt });
      }
      for (let index = 1; index < runs.length; index++) {
        const before = runs[index - 1] as (typeof runs)[number];
        const after = runs[index] as (typeof runs)[number];
        if (before.end > after.start) {
          problems.push(
            `${shardId}: ${before.workerId} until ${before.end.toFixed(0)} ms, ${after.workerId} from ${after.start.toFixed(0)} ms`,
          );
        }
      }
    }
    return problems;
  }
}
