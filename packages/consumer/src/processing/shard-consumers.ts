import type { LeaseHandoff } from '@kcl/core';
import { streamIdentifierOfLeaseKey } from '@kcl/shard-graph';
import type { StreamReader } from '../kinesis/kinesis-stream.js';
import type { HeldLease } from '../leases/held-lease.js';
import type { LeaseFigureTracker } from '../metrics/lease-figure-tracker.js';
import type { WorkerMetrics } from '../metrics/worker-metrics.js';
import type { ConsumedStream } from '../streams/stream-options.js';
import { ShardConsumer, type ShardConsumerContext, type ShardConsumerState } from './shard-consumer.js';
import type { ShardConsumerSettings } from './shard-run.js';

/** One held lease as `Consumer.status()` reports it. */
export interface LeaseStatus {
  readonly leaseKey: string;
  readonly shardId: string;
  /** The stream's identifier in a multi-stream application; null when the consumer reads one stream. */
  readonly streamIdentifier: string | null;
  readonly state: ShardConsumerState;
  readonly checkpoint: string;
  readonly millisBehindLatest: number | null;
  readonly recordsProcessed: number;
}

/** How the shards of one stream are read: its reader, and the consumer settings for that stream. */
export interface StreamBinding {
  readonly stream: StreamReader;
  readonly consumedStream: ConsumedStream;
  readonly settings: ShardConsumerSettings;
}

export interface ShardConsumersOptions extends Omit<ShardConsumerContext, 'stream' | 'consumedStream'> {
  readonly metrics: WorkerMetrics;
  /** Per-lease figures for the heartbeat, fed by the same batch reports as the metrics. */
  readonly figures?: LeaseFigureTracker;
  /** The stream of a lease; null for a lease this worker cannot read (it is released). */
  readonly streamOf: (leaseKey: string) => StreamBinding | null;
}

/** A running shard consumer and the promise that settles when it has ended. */
export interface RunningConsumer {
  readonly consumer: ShardConsumer;
  readonly done: Promise<void>;
}

/**
 * The shard consumers of a worker: exactly one per held lease (ARCHITECTURE §3). A consumer leaves
 * the set when it ends; a lease is not consumed again while its previous consumer still runs, unless
 * that one has been halted for longer than the shutdown timeout (it is then abandoned).
 */
export class ShardConsumers {
  readonly #options: ShardConsumersOptions;
  readonly #running = new Map<string, RunningConsumer>();

  constructor(options: ShardConsumersOptions) {
    this.#options = options;
  }

  has(leaseKey: string): boolean {
    return this.#running.has(leaseKey);
  }

  /** The consumers running now. */
  running(): RunningConsumer[] {
    return [...this.#running.values()];
  }

  /**
   * Whether a new incarnation of the lease may get a consumer: no previous consumer runs, or the
   * previous one is stuck — halted (its lease gone, its writes refused) for `shutdownTimeoutMs` or
   * more, so it starts no more deliveries — and is abandoned now.
   */
  mayStart(leaseKey: string): boolean {
    const previous = this.#running.get(leaseKey);
    if (previous === undefined) return true;
    const { clock, settings, logger } = this.#options;
    const haltedAt = previous.consumer.haltedAt;
    if (haltedAt === null || clock.monotonicNow() - haltedAt < settings.shutdownTimeoutMs) return false;
    logger.warn('abandoning a shard consumer that did not finish after losing its lease', {
      leaseKey,
      haltedForMs: clock.monotonicNow() - haltedAt,
    });
    this.#running.delete(leaseKey);
    return true;
  }

  /**
   * Every held lease has exactly one running consumer. A held lease whose consumer ended without
   * giving it up (a late write revived it, a release failed) gets a new consumer: it resumes from the
   * checkpoint, or just releases the lease if the shard is finished.
   */
  reconcile(held: readonly HeldLease[]): void {
    for (const lease of held) {
      if (this.#running.has(lease.leaseKey)) continue;
      this.#options.logger.warn('a held lease had no shard consumer; starting one', {
        leaseKey: lease.leaseKey,
      });
      this.start(lease);
    }
  }

  /** Starts the consumer of a lease this worker now holds. */
  start(held: HeldLease): void {
    const options = this.#options;
    const { metrics, logger } = options;
    const leaseKey = held.leaseKey;
    const binding = options.streamOf(leaseKey);
    if (binding === null) {
      logger.error('a lease of no stream this consumer reads; releasing it', { leaseKey });
      void options.keeper.release(held).catch(() => undefined);
      return;
    }
    const consumer = new ShardConsumer({
      held,
      keeper: options.keeper,
      store: options.store,
      stream: binding.stream,
      consumedStream: binding.consumedStream,
      processorFactory: options.processorFactory,
      settings: binding.settings,
      workerId: options.workerId,
      clock: options.clock,
      random: options.random,
      logger,
      emit: options.emit,
      onBatch: (report) => {
        metrics.batch(report);
        options.figures?.batch(report);
      },
      onGetRecords: (durationMs, records) => metrics.getRecords(durationMs, records),
      onSubscribed: (durationMs) => metrics.subscribed(leaseKey, durationMs),
      onSubscriptionEvent: () => metrics.subscriptionEvent(leaseKey),
      onSubscriptionIssue: (kind) => metrics.subscriptionIssue(leaseKey, kind),
    });
    const done = consumer
      .run()
      .then((outcome) => {
        logger.debug('shard consumer ended', { leaseKey: held.leaseKey, outcome });
      })
      .finally(() => {
        if (this.#running.get(held.leaseKey)?.consumer === consumer) this.#running.delete(held.leaseKey);
      });
    this.#running.set(held.leaseKey, { consumer, done });
    const handoff = options.keeper.handoffOf(held);
    if (handoff !== null) consumer.handOver(handoff);
  }

  /**
   * Another worker asked for a held lease: its consumer finishes its batch, checkpoints and hands the
   * lease over. A consumer started later for the same incarnation sees the request at its start.
   */
  handOver(held: HeldLease, handoff: LeaseHandoff): void {
    const running = this.#running.get(held.leaseKey);
    if (running !== undefined && running.consumer.held === held) running.consumer.handOver(handoff);
  }

  status(): LeaseStatus[] {
    return this.running().map(({ consumer }) => ({
      leaseKey: consumer.leaseKey,
      shardId: consumer.shardId,
      streamIdentifier: streamIdentifierOfLeaseKey(consumer.leaseKey) ?? null,
      state: consumer.state,
      checkpoint: consumer.checkpoint.toString(),
      millisBehindLatest: consumer.millisBehindLatest,
      recordsProcessed: consumer.recordsProcessed,
    }));
  }
}
