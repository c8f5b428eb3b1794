import type { KinesisClient } from '@aws-sdk/client-kinesis';
import type { KclEvent, LeaseStore } from '@kcl/core';
import { FLEET_TIMINGS } from '@kcl/testkit';
import {
  type Consumer,
  type ConsumerOptions,
  createConsumer,
  type RecordProcessor,
} from '../../src/index.js';

/** One processed record, as a fleet test records it. */
export interface Processed {
  readonly workerId: string;
  readonly shardId: string;
  readonly sequenceNumber: string;
  readonly partitionKey: string;
  readonly data: string;
  readonly at: number;
}

/** Short timings, so hand-overs and expiries happen within a test: the testkit's `fast` preset. */
export const FAST_TIMING = FLEET_TIMINGS.fast;

export interface FleetOptions {
  readonly streamName: string;
  readonly applicationName: string;
  readonly newClient: () => KinesisClient;
  readonly store: (workerId: string) => LeaseStore;
  readonly overrides?: Partial<ConsumerOptions>;
  /** Checkpoint after every batch (default) or never. */
  readonly checkpoint?: boolean;
}

/** In-process workers sharing a lease store, recording everything they process. */
export class Fleet {
  readonly processed: Processed[] = [];
  readonly events: KclEvent[] = [];
  readonly workers = new Map<string, Consumer>();
  readonly #options: FleetOptions;

  constructor(options: FleetOptions) {
    this.#options = options;
  }

  async add(workerId: string, overrides: Partial<ConsumerOptions> = {}): Promise<Consumer> {
    const consumer = createConsumer({
      streamName: this.#options.streamName,
      applicationName: this.#options.applicationName,
      workerId,
      kinesis: this.#options.newClient(),
      leaseStore: this.#options.store(workerId),
      initialPosition: 'TRIM_HORIZON',
      ...FAST_TIMING,
      onEvent: (event) => this.events.push(event),
      processor: (shardId): RecordProcessor => ({
        processRecords: async ({ records, checkpointer }) => {
          for (const record of records) {
            this.processed.push({
              workerId,
              shardId,
              sequenceNumber: record.sequenceNumber,
              partitionKey: record.partitionKey,
              data: Buffer.from(record.data).toString(),
              at: Date.now(),
            });
          }
          if (this.#options.checkpoint !== false) await checkpointer.checkpoint();
        },
        shardEnded: async ({ checkpointer }) => {
          await checkpointer.checkpoint();
        },
        shutdownRequested: async ({ checkpointer }) => {
          if (this.#options.checkpoint !== false) await checkpointer.checkpoint();
        },
      }),
      ...this.#options.overrides,
      ...overrides,
    });
    this.workers.set(workerId, consumer);
    await consumer.start();
    return consumer;
  }

  async stopAll(): Promise<void> {
    await Promise.all([...this.workers.values()].map((worker) => worker.stop()));
  }

  /** Distinct data values processed. */
  distinct(): Set<string> {
    return new Set(this.processed.map((record) => record.data));
  }

  /** Records processed more than once. */
  duplicates(): number {
    return this.processed.length - this.distinct().size;
  }

  /**
   * Order violations per partition key, counting each record's first processing only: a record whose
   * write index is lower than one already processed for its key.
   */
  orderViolations(indexOf: (data: string) => number): number {
    const seen = new Set<string>();
    const highest = new Map<string, number>();
    let violations = 0;
    for (const record of this.processed) {
      if (seen.has(record.data)) continue;
      seen.add(record.data);
      const index = indexOf(record.data);
      const previous = highest.get(record.partitionKey) ?? -1;
      if (index < previous) violations += 1;
      else highest.set(record.partitionKey, index);
    }
    return violations;
  }

  leasesHeldBy(workerId: string): string[] {
    return (
      this.workers
        .get(workerId)
        ?.status()
        .leases.map((lease) => lease.leaseKey) ?? []
    );
  }
}
