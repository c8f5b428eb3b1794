import type { KinesisClient } from '@aws-sdk/client-kinesis';
import type { KclEvent, LeaseStore } from '@kcl/core';
import { FLEET_TIMINGS } from '@kcl/testkit';
import {
  type Consumer,
  type ConsumerOptions,
  createConsumer,
  type KinesisRecord,
  type RecordProcessor,
} from '../../src/index.js';

/** One processed record, as a fleet test records it. */
export interface Processed {
  readonly workerId: string;
  /** The stream's name (the processor context's). */
  readonly stream: string;
  readonly shardId: string;
  readonly sequenceNumber: string;
  readonly partitionKey: string;
  readonly data: string;
  readonly at: number;
}

/** One `processRecords` call, from its start to its end (wall-clock ms, `performance.now()`). */
export interface ProcessingInterval {
  readonly workerId: string;
  readonly shardId: string;
  readonly start: number;
  readonly end: number;
}

/** What a fleet test changes in one worker's processor. */
export interface ProcessorBehaviour {
  /**
   * Runs at the start of `shutdownRequested`, before its checkpoint (a test may make it wait); `signal`
   * aborts when it should hurry.
   */
  readonly onShutdownRequested?: (shardId: string, signal: AbortSignal | undefined) => Promise<void>;
  /**
   * Checkpoint only in `shutdownRequested`, never after a batch — at the last record handled (a batch
   * that returned after the stop began counts as cut short for a checkpoint without arguments).
   */
  readonly checkpointOnlyOnShutdown?: boolean;
}

/** Short timings, so hand-overs and expiries happen within a test: the testkit's `fast` preset. */
export const FAST_TIMING = FLEET_TIMINGS.fast;

export interface FleetOptions {
  /** The one stream read; absent when `overrides` name several (`streams` or `streamTracker`). */
  readonly streamName?: string;
  readonly applicationName: string;
  readonly newClient: () => KinesisClient;
  readonly store: (workerId: string) => LeaseStore;
  readonly overrides?: Partial<ConsumerOptions>;
  /** Checkpoint after every batch (default) or never. */
  readonly checkpoint?: boolean;
  /** How long each `processRecords` call takes (default 0), so that two workers on a shard can overlap. */
  readonly processingDelayMs?: number;
}

/** In-process workers sharing a lease store, recording everything they process. */
export class Fleet {
  readonly processed: Processed[] = [];
  readonly events: KclEvent[] = [];
  readonly intervals: ProcessingInterval[] = [];
  readonly workers = new Map<string, Consumer>();
  readonly #options: FleetOptions;

  constructor(options: FleetOptions) {
    this.#options = options;
  }

  async add(
    workerId: string,
    overrides: Partial<ConsumerOptions> = {},
    behaviour: ProcessorBehaviour = {},
  ): Promise<Consumer> {
    const delayMs = this.#options.processingDelayMs ?? 0;
    const consumer = createConsumer({
      ...(this.#options.streamName === undefined ? {} : { streamName: this.#options.streamName }),
      applicationName: this.#options.applicationName,
      workerId,
      kinesis: this.#options.newClient(),
      leaseStore: this.#options.store(workerId),
      initialPosition: 'TRIM_HORIZON',
      ...FAST_TIMING,
      onEvent: (event) => this.events.push(event),
      processor: (shardId, { stream }): RecordProcessor => {
        let lastHandled: KinesisRecord | null = null;
        return {
          processRecords: async ({ records, checkpointer }) => {
            const start = performance.now();
            if (delayMs > 0 && records.length > 0)
              await new Promise((resolve) => setTimeout(resolve, delayMs));
            for (const record of records) {
              this.processed.push({
                workerId,
                stream: stream.name,
                shardId,
                sequenceNumber: record.sequenceNumber,
                partitionKey: record.partitionKey,
                data: Buffer.from(record.data).toString(),
                at: Date.now(),
              });
            }
            lastHandled = records.at(-1) ?? lastHandled;
            if (this.#options.checkpoint !== false && behaviour.checkpointOnlyOnShutdown !== true) {
              await checkpointer.checkpoint();
            }
            if (records.length > 0) this.intervals.push({ workerId, shardId, start, end: performance.now() });
          },
          shardEnded: async ({ checkpointer }) => {
            await checkpointer.checkpoint();
          },
          shutdownRequested: async ({ checkpointer, signal }) => {
            await behaviour.onShutdownRequested?.(shardId, signal);
            if (this.#options.checkpoint === false) return;
            if (behaviour.checkpointOnlyOnShutdown === true && lastHandled !== null) {
              await checkpointer.checkpointRecord(lastHandled);
            } else {
              await checkpointer.checkpoint();
            }
          },
        };
      },
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
      const key = `${record.stream}/${record.partitionKey}`;
      const previous = highest.get(key) ?? -1;
      if (index < previous) violations += 1;
      else highest.set(key, index);
    }
    return violations;
  }

  /**
   * Pairs of `processRecords` calls of different workers on one shard that ran at the same time: a
   * shard processed by two workers at once.
   */
  overlaps(): Array<readonly [ProcessingInterval, ProcessingInterval]> {
    const found: Array<readonly [ProcessingInterval, ProcessingInterval]> = [];
    for (const [index, first] of this.intervals.entries()) {
      for (const second of this.intervals.slice(index + 1)) {
        if (first.shardId !== second.shardId || first.workerId === second.workerId) continue;
        if (first.start < second.end && second.start < first.end) found.push([first, second]);
      }
    }
    return found;
  }

  /** The hand-off steps the fleet's workers reported, as `worker step`. */
  handoffSteps(): string[] {
    return this.events.flatMap((event) =>
      event.type === 'lease-handoff' ? [`${event.workerId} ${event.step}`] : [],
    );
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
