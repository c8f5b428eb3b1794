import type { Clock, KclEvent, LeaseStore, Logger, RandomSource } from '@kcl/core';
import type { ResolvedConsumerOptions } from '../consumer-options.js';
import type { StreamReader } from '../kinesis/kinesis-stream.js';
import type { HeldLease } from '../leases/held-lease.js';
import type { ShardCheckpointer } from './checkpointer.js';
import type { ProcessingErrorHandler, RecordProcessor } from './record-processor.js';

/** The settings every shard consumer of a worker shares. */
export interface ShardConsumerSettings {
  readonly maxRecords: number;
  readonly pollIntervalMs: number;
  readonly parentPollIntervalMs: number;
  readonly initialTimestamp: Date | null;
  readonly callProcessRecordsEvenForEmptyRecordList: boolean;
  readonly processingRetry: { readonly initialMs: number; readonly maxMs: number };
  readonly kinesisRetry: { readonly initialMs: number; readonly maxMs: number };
  readonly onProcessingError: ProcessingErrorHandler | null;
  /** Longest wait for `shutdownRequested` on a graceful stop. */
  readonly shutdownTimeoutMs: number;
  /** Enhanced fan-out, or null for polling. */
  readonly fanout: FanOutSettings | null;
  /**
   * Stops the worker with an error no retry can fix (`checkpointer.transaction` on a store that
   * cannot run it). Absent: such a batch is retried like any failure.
   */
  readonly onFatal?: (error: unknown) => void;
}

/** How a shard consumer subscribes (enhanced fan-out). */
export interface FanOutSettings {
  /** The registered stream consumer's ARN (registered again when it was found gone). */
  readonly consumerArn: () => Promise<string>;
  /** A subscription found the stream consumer gone (deregistered): the next one registers it again. */
  readonly consumerGone: (consumerArn: string) => void;
  readonly subscriptionLifetimeMs: number;
  readonly idleTimeoutMs: number;
  readonly closedShardCheckIntervalMs: number;
}

/** The settings of every shard consumer of a worker, from the consumer's checked options. */
export function shardConsumerSettings(
  options: ResolvedConsumerOptions,
  onProcessingError: ProcessingErrorHandler | null,
  streamConsumer: Pick<FanOutSettings, 'consumerArn' | 'consumerGone'> | null = null,
): ShardConsumerSettings {
  const retrieval = options.retrieval;
  return {
    maxRecords: options.maxRecords,
    pollIntervalMs: options.pollIntervalMs,
    parentPollIntervalMs: options.parentPollIntervalMs,
    initialTimestamp: typeof options.initialPosition === 'object' ? options.initialPosition.timestamp : null,
    callProcessRecordsEvenForEmptyRecordList: options.callProcessRecordsEvenForEmptyRecordList,
    processingRetry: options.processingRetry,
    kinesisRetry: options.kinesisRetry,
    onProcessingError,
    shutdownTimeoutMs: options.shutdownTimeoutMs,
    fanout:
      retrieval.mode === 'fanout' && streamConsumer !== null
        ? {
            ...streamConsumer,
            subscriptionLifetimeMs: retrieval.subscriptionLifetimeMs,
            idleTimeoutMs: retrieval.idleTimeoutMs,
            closedShardCheckIntervalMs: retrieval.closedShardCheckIntervalMs,
          }
        : null,
  };
}

/**
 * What the parts of one shard consumer's run (parent wait, delivery, shard end) share: the lease
 * incarnation, the worker's parts, and whether the consumer is halting.
 */
export interface ShardRun {
  readonly held: HeldLease;
  readonly leaseKey: string;
  readonly shardId: string;
  readonly workerId: string;
  readonly store: LeaseStore;
  readonly stream: StreamReader;
  readonly settings: ShardConsumerSettings;
  readonly clock: Clock;
  readonly random: RandomSource;
  readonly logger: Logger;
  readonly emit: (event: KclEvent) => void;
  /** True once the consumer halts: a stop was asked for, or its lease is gone. */
  readonly halted: () => boolean;
  /** True once a stop was asked for. */
  readonly stopRequested: () => boolean;
  /** Aborts when the consumer halts: one signal for the consumer's life. */
  readonly haltSignal: AbortSignal;
}

/** A run whose processor exists: it was created and initialized. */
export interface ProcessorRun extends ShardRun {
  readonly processor: RecordProcessor;
  readonly checkpointer: ShardCheckpointer;
}
