import type { Shard } from '@aws-sdk/client-kinesis';
import type { KclEvent, Lease } from '@kcl/core';
import { ExtendedSequenceNumber, FULL_HASH_KEY_RANGE, noopLogger } from '@kcl/core';
import {
  createFaultyLeaseStore,
  createMemoryLeaseStore,
  ManualClock,
  type MemoryLeaseTable,
} from '@kcl/testkit';
import { type ConsumerOptions, resolveConsumerOptions } from '../../src/consumer-options.js';
import type { StreamReader } from '../../src/kinesis/kinesis-stream.js';
import { LeaseKeeper } from '../../src/leases/lease-keeper.js';
import { createLeasePlanner } from '../../src/leases/lease-planner.js';
import { withStoreDeadlines } from '../../src/leases/store-deadlines.js';
import { WorkerMetrics } from '../../src/metrics/worker-metrics.js';
import type { RecordProcessor, RecordProcessorFactory } from '../../src/processing/record-processor.js';
import { ShardConsumer } from '../../src/processing/shard-consumer.js';
import { Worker } from '../../src/worker.js';

/** Unit-test parts: one shard consumer or one worker on a ManualClock, a fake stream and the memory store. */

export const PARENT = 'shardId-000000000000';
const HALF = (1n << 127n) - 1n;

export const ONE_SHARD: Shard[] = [
  {
    ShardId: PARENT,
    HashKeyRange: { StartingHashKey: '0', EndingHashKey: ((1n << 128n) - 1n).toString() },
    SequenceNumberRange: { StartingSequenceNumber: '1' },
  },
];

export function record(sequenceNumber: string, partitionKey = 'k') {
  return {
    SequenceNumber: sequenceNumber,
    PartitionKey: partitionKey,
    Data: new TextEncoder().encode(sequenceNumber),
    ApproximateArrivalTimestamp: new Date(0),
  };
}

/** A shard with the given records in one batch, then its end (split into two children). */
export function endingStream(records: ReturnType<typeof record>[]): StreamReader {
  return {
    name: 'ending',
    listShards: async () => [],
    getShardIterator: async () => 'first',
    getRecords: async (iterator) =>
      iterator === 'first'
        ? { Records: records, NextShardIterator: 'end', MillisBehindLatest: 0 }
        : {
            Records: [],
            MillisBehindLatest: 0,
            ChildShards: [
              {
                ShardId: 'shardId-000000000001',
                ParentShards: [PARENT],
                HashKeyRange: { StartingHashKey: '0', EndingHashKey: HALF.toString() },
              },
              {
                ShardId: 'shardId-000000000002',
                ParentShards: [PARENT],
                HashKeyRange: {
                  StartingHashKey: (HALF + 1n).toString(),
                  EndingHashKey: ((1n << 128n) - 1n).toString(),
                },
              },
            ],
          },
  };
}

/** One open shard that yields one new record on every GetRecords call. */
export function tickingStream(): StreamReader {
  let sequenceNumber = 100;
  return {
    name: 'ticking',
    listShards: async () => ONE_SHARD,
    getShardIterator: async () => 'ticking',
    getRecords: async () => {
      sequenceNumber += 1;
      return {
        Records: [record(String(sequenceNumber))],
        NextShardIterator: 'ticking',
        MillisBehindLatest: 0,
      };
    },
  };
}

/** One shard consumer of the parent shard's lease, taken by `me`. */
export async function shardConsumer(options: {
  readonly stream: StreamReader;
  readonly processor: RecordProcessor;
  readonly shutdownTimeoutMs?: number;
  /** Read with a fan-out subscription (the stream's `subscribeToShard`) instead of polling. */
  readonly fanout?: boolean;
}) {
  const clock = new ManualClock({ monotonic: 1_000 });
  const memory = createMemoryLeaseStore({ applicationName: 'unit', now: () => clock.now() });
  const store = createFaultyLeaseStore(memory, { clock });
  const events: KclEvent[] = [];
  const keeper = new LeaseKeeper({
    store,
    workerId: 'me',
    leaseExpiryMs: 60_000,
    clock,
    logger: noopLogger,
    emit: (event) => events.push(event),
    onLost: () => {},
  });
  await store.leases.create({
    leaseKey: PARENT,
    checkpoint: ExtendedSequenceNumber.TRIM_HORIZON,
    hashKeyRange: FULL_HASH_KEY_RANGE,
  });
  const taken = await store.leases.take(PARENT, 0, 'me');
  if (!taken.ok) throw new Error('take');
  const held = keeper.adopt(taken.lease, clock.monotonicNow());
  const consumer = new ShardConsumer({
    held,
    keeper,
    store,
    stream: options.stream,
    consumedStream: { name: 'stream', identifier: null },
    processorFactory: () => options.processor,
    settings: {
      maxRecords: 100,
      pollIntervalMs: 100,
      parentPollIntervalMs: 100,
      initialTimestamp: null,
      callProcessRecordsEvenForEmptyRecordList: false,
      processingRetry: { initialMs: 100, maxMs: 100 },
      kinesisRetry: { initialMs: 100, maxMs: 100 },
      onProcessingError: null,
      shutdownTimeoutMs: options.shutdownTimeoutMs ?? 5_000,
      fanout:
        options.fanout === true
          ? {
              consumerArn: async () => 'arn:consumer',
              consumerGone: () => {},
              subscriptionLifetimeMs: 60_000,
              idleTimeoutMs: 30_000,
              closedShardCheckIntervalMs: 60_000,
            }
          : null,
    },
    workerId: 'me',
    clock,
    random: () => 0.5,
    logger: noopLogger,
    emit: (event) => events.push(event),
  });
  return { clock, store, events, consumer, stored: (): Promise<Lease | null> => memory.leases.get(PARENT) };
}

/** A worker (with the store deadlines, as `createConsumer` builds it) on a ManualClock. */
export function unitWorker(options: {
  readonly workerId: string;
  readonly clock: ManualClock;
  readonly table: MemoryLeaseTable;
  readonly stream: StreamReader;
  readonly processor: RecordProcessorFactory;
  readonly overrides?: Partial<ConsumerOptions>;
}) {
  const { workerId, clock, table } = options;
  const events: KclEvent[] = [];
  const faulty = createFaultyLeaseStore(
    createMemoryLeaseStore({ applicationName: 'unit', table, now: () => clock.now() }),
    { clock },
  );
  const random = () => 0.5;
  const resolved = resolveConsumerOptions(
    {
      streamName: options.stream.name,
      applicationName: 'unit',
      workerId,
      kinesis: { region: 'us-east-1' },
      leaseStore: faulty,
      initialPosition: 'TRIM_HORIZON',
      processor: options.processor,
      shardSyncIntervalMs: 600_000,
      leaseCleanupIntervalMs: 600_000,
      ...options.overrides,
    },
    random,
  );
  const worker = new Worker({
    registerStreamConsumer: null,
    options: resolved,
    store: withStoreDeadlines(faulty, clock, resolved.storeCallTimeoutMs),
    stream: options.stream,
    processorFactory: options.processor,
    onProcessingError: null,
    planner: createLeasePlanner({
      workerId,
      leaseExpiryMs: resolved.leaseExpiryMs,
      maxLeasesToSteal: 1,
      maxLeasesForWorker: Number.POSITIVE_INFINITY,
      random,
    }),
    metrics: new WorkerMetrics(null, workerId),
    clock,
    random,
    logger: noopLogger,
    emit: (event) => events.push(event),
    onFatal: () => {},
  });
  return { worker, faulty, events, options: resolved };
}
