import type { KinesisClient } from '@aws-sdk/client-kinesis';
import type { Consumer, ConsumerOptions, RecordProcessor } from '@kcl/consumer';
import { createConsumer } from '@kcl/consumer';
import type { KclEvent, LeaseStore } from '@kcl/core';
import { concurrentOwners, FLEET_TIMINGS, type ProcessingSpan } from '@kcl/testkit';

/** One processRecords call: who processed which records of which shard, and when (ms since the test began). */
export interface ProcessedBatch extends ProcessingSpan {
  readonly data: readonly string[];
  /** Its checkpoint succeeded: a batch whose checkpoint failed is delivered again (at least once). */
  checkpointed: boolean;
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
          const batch: ProcessedBatch = {
            workerId,
            shardId,
            data,
            startedAt,
            endedAt: this.now(),
            checkpointed: false,
          };
          this.batches.push(batch);
          await checkpointer.checkpoint();
          batch.checkpointed = true;
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

  /** The records of the batches whose checkpoint succeeded: each once, unless a lease moved uncheckpointed. */
  checkpointedProcessed(): string[] {
    return this.batches.filter((batch) => batch.checkpointed).flatMap((batch) => batch.data);
  }

  distinct(): Set<string> {
    return new Set(this.processed());
  }

  /** Times two workers processed one shard at once (see `concurrentOwners`). */
  overlaps(): string[] {
    return concurrentOwners(this.batches);
  }
}
