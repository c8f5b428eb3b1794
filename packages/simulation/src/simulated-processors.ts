import type {
  KinesisRecord,
  PipelineMessage,
  PipelineOptions,
  ProcessingErrorHandler,
  RecordProcessor,
  RecordProcessorFactory,
} from '@kcl/consumer';
import { createPipelineProcessorFactory } from '@kcl/consumer';
import type { RandomSource } from '@kcl/core';
import { noopLogger } from '@kcl/core';
import { createMultiLangProcessorFactory } from '@kcl/multilang';
import type { MemoryTransaction } from '@kcl/testkit';
import type { ConsumerWatch, ProcessorInstance } from './consumer-watch.js';
import type { Ledger } from './ledger.js';
import { simulatedChildLauncher } from './simulated-multilang-child.js';
import type { FreezableClock } from './simulation-clock.js';

/**
 * How the simulated record processors behave, one kind per run:
 * - `per-batch`: handles every record, then checkpoints the batch.
 * - `per-record`: checkpoints after every record.
 * - `mid-batch-throw`: checkpoints every record, and now and then throws in the middle of a batch.
 * - `abort-early`: handles record by record and returns early when its signal aborts; checkpoints
 *   without arguments (in `processRecords`, `shutdownRequested` and `shardEnded`) as the README shows.
 * - `throw-n`: throws a batch's first attempts (0–2) before it handles it.
 * - `slow`: takes its time over each batch.
 * - `pipeline`: the pipeline API, with failing handlers, retries and skips.
 * - `multilang`: the MultiLangDaemon's processor, with simulated children that speak the protocol as
 *   the official samples do and die in the middle of a batch now and then.
 * - `exactly-once` (only when asked for, never drawn by a seed): writes each batch through
 *   `checkpointer.transaction` (the memory store's simulated transactions); a record counts as handled
 *   when its transaction commits, and a record handled twice is a violation (with one stream: a stream
 *   listed again after its leases were deleted starts over, by design).
 * - `exactly-once-pipeline` (likewise only when asked for): the pipeline API writing each batch through
 *   `batch.transaction`, batches one at a time in shard order, with handlers that throw before the
 *   transaction and after it committed; the same check.
 */
export type ProcessorKind =
  | 'per-batch'
  | 'per-record'
  | 'mid-batch-throw'
  | 'abort-early'
  | 'throw-n'
  | 'slow'
  | 'pipeline'
  | 'multilang'
  | 'exactly-once'
  | 'exactly-once-pipeline';

export const PROCESSOR_KINDS: readonly ProcessorKind[] = [
  'per-batch',
  'per-record',
  'mid-batch-throw',
  'abort-early',
  'throw-n',
  'slow',
  'pipeline',
  'multilang',
];

/** Every kind a run may be asked for: the drawn ones and the exactly-once ones. */
export const ALL_PROCESSOR_KINDS: readonly ProcessorKind[] = [
  ...PROCESSOR_KINDS,
  'exactly-once',
  'exactly-once-pipeline',
];

/** Whether a kind commits through transactions, so that a record committed twice is a violation. */
export function isExactlyOnceKind(kind: ProcessorKind): boolean {
  return kind === 'exactly-once' || kind === 'exactly-once-pipeline';
}

/** What the processors of one simulated worker need. */
export interface ProcessorContext {
  readonly workerId: string;
  readonly clock: FreezableClock;
  readonly random: RandomSource;
  readonly ledger: Ledger;
  readonly watch: ConsumerWatch;
  /** False once the worker crashed: what it does after that never happened. */
  readonly alive: () => boolean;
  /**
   * Pipeline handlers fail single messages of a batch and write the others (a bulk insert with one bad
   * row). The handler itself breaks key order then, so the ledger checks only the final table state.
   */
  readonly partialFailures: boolean;
  /**
   * Pipeline messages that fail for a long stretch (8–15 s) before they succeed — a poison message
   * that a stop at the shard's end must not wait for.
   */
  readonly poisonMessages: boolean;
  /** Whether the chaos is still going on: processors misbehave (poison messages) only then. */
  readonly chaos: () => boolean;
}

/** The consumer options a processor kind contributes. */
export interface ProcessorOptions {
  readonly processor: RecordProcessorFactory;
  readonly onProcessingError?: ProcessingErrorHandler;
  readonly exactlyOnce?: boolean;
}

export function simulatedProcessorOptions(kind: ProcessorKind, context: ProcessorContext): ProcessorOptions {
  if (kind === 'multilang') return multilangOptions(context);
  if (kind !== 'pipeline' && kind !== 'exactly-once-pipeline') return recordProcessorOptions(kind, context);
  const instances = new Map<string, ProcessorInstance>();
  const streams = new Map<string, string>();
  const options =
    kind === 'pipeline'
      ? pipelineOptions(context, instances, streams)
      : exactlyOncePipelineOptions(context, instances, streams);
  const pipelines = createPipelineProcessorFactory(options, {
    clock: context.clock,
    random: context.random,
    logger: noopLogger,
  });
  return {
    processor: (shardId, processorContext) => {
      const instance = context.watch.begin(context.workerId, processorContext.leaseKey);
      instances.set(processorContext.leaseKey, instance);
      const told = toldStream(processorContext);
      if (told !== undefined) streams.set(processorContext.leaseKey, told);
      const pipeline = pipelines(shardId, processorContext);
      const end = (): void => context.watch.end(instance);
      return {
        processRecords: (input) => pipeline.processRecords(input),
        shutdownRequested: (input) => pipeline.shutdownRequested(input),
        async shardEnded(input) {
          await pipeline.shardEnded(input);
          if (input.checkpointer.lastCheckpoint.isShardEnd) end();
        },
        async leaseLost() {
          await pipeline.leaseLost();
          end();
        },
      };
    },
    ...(kind === 'exactly-once-pipeline' ? { exactlyOnce: true } : {}),
  };
}

/** The stream a processor was told it reads, when the application reads several (else undefined). */
function toldStream(context: {
  readonly stream: { readonly name: string; readonly identifier: string | null };
}) {
  return context.stream.identifier === null ? undefined : context.stream.name;
}

function recordProcessorOptions(kind: ProcessorKind, context: ProcessorContext): ProcessorOptions {
  const { ledger, watch, clock, random, workerId, alive } = context;
  const failures = new Map<string, number>();
  const processor: RecordProcessorFactory = (_shardId, processorContext) => {
    const { leaseKey } = processorContext;
    const stream = toldStream(processorContext);
    const handle = (record: KinesisRecord): void => {
      if (alive()) ledger.handled(record.sequenceNumber, workerId, true, stream);
    };
    const instance = watch.begin(workerId, leaseKey);
    const who = `${workerId} #${instance.id}`;
    const end = (): void => watch.end(instance);
    const base: RecordProcessor = {
      async processRecords({ records, checkpointer, signal }) {
        watch.delivering(instance);
        const first = records[0];
        switch (kind) {
          case 'per-record':
            for (const record of records) {
              handle(record);
              await checkpointer.checkpointRecord(record);
            }
            return;
          case 'mid-batch-throw': {
            // Checkpoints record by record and fails once in the middle of some batches: the retry
            // must not hand it the records at or below its own checkpoint again.
            const batchKey = `${leaseKey} ${first?.sequenceNumber ?? ''}`;
            const failAt =
              failures.has(batchKey) || records.length < 2 || random() >= 0.3
                ? -1
                : Math.floor(records.length / 2);
            failures.set(batchKey, 0);
            for (const [index, record] of records.entries()) {
              handle(record);
              await checkpointer.checkpointRecord(record);
              if (index === failAt)
                throw new Error(`${who}: failed after checkpointing in the middle of the batch`);
            }
            return;
          }
          case 'abort-early':
            for (const record of records) {
              if (signal.aborted) return;
              handle(record);
              await clock.sleep(10 + Math.floor(random() * 50));
            }
            await checkpointer.checkpoint();
            return;
          case 'throw-n': {
            const batchKey = `${leaseKey} ${first?.sequenceNumber ?? ''}`;
            const allowed = failures.get(batchKey) ?? Math.floor(random() * 3);
            if (allowed > 0) {
              failures.set(batchKey, allowed - 1);
              throw new Error(`${who}: failing this batch ${allowed} more time(s)`);
            }
            failures.set(batchKey, 0);
            for (const record of records) handle(record);
            await checkpointer.checkpoint();
            return;
          }
          case 'exactly-once':
            // What the database holds counts, whether or not the process lived to see the commit.
            await checkpointer.transaction<MemoryTransaction>((transaction) => {
              for (const record of records) {
                transaction.onCommit(() => ledger.handled(record.sequenceNumber, workerId, true, stream));
              }
            });
            return;
          case 'slow':
            await clock.sleep(50 + Math.floor(random() * 400));
            for (const record of records) handle(record);
            await checkpointer.checkpoint();
            return;
          default:
            for (const record of records) handle(record);
            await checkpointer.checkpoint();
        }
      },
      async shardEnded({ checkpointer }) {
        await checkpointer.checkpoint();
        if (checkpointer.lastCheckpoint.isShardEnd) end();
      },
      async shutdownRequested({ checkpointer }) {
        await checkpointer.checkpoint();
      },
      leaseLost() {
        end();
      },
    };
    return base;
  };
  return { processor, ...(kind === 'exactly-once' ? { exactlyOnce: true } : {}) };
}

function pipelineOptions(
  context: ProcessorContext,
  instances: ReadonlyMap<string, ProcessorInstance>,
  streams: ReadonlyMap<string, string>,
): PipelineOptions {
  const { ledger, watch, clock, random, workerId, alive } = context;
  const { partialFailures, poisonMessages } = context;
  // Poison messages, by sequence number: until when they keep failing.
  const poisoned = new Map<string, number>();
  const isPoisoned = (message: PipelineMessage): boolean => {
    if (!poisonMessages) return false;
    const sequenceNumber = message.record.sequenceNumber;
    let until = poisoned.get(sequenceNumber);
    if (until === undefined) {
      until =
        context.chaos() && random() < 0.02 ? clock.monotonicNow() + 8_000 + Math.floor(random() * 7_000) : 0;
      poisoned.set(sequenceNumber, until);
    }
    return clock.monotonicNow() < until;
  };
  const delivering = (leaseKey: string): void => {
    const instance = instances.get(leaseKey);
    if (instance !== undefined) watch.delivering(instance);
  };
  const concurrency = 1 + Math.floor(random() * 3);
  const maxDemand = 2 + Math.floor(random() * 10);
  return {
    partitionBy: (message) => message.record.partitionKey,
    processors: { concurrency, maxDemand, minDemand: Math.floor(maxDemand / 2) },
    batchers: {
      concurrency: 1 + Math.floor(random() * 2),
      batchSize: 2 + Math.floor(random() * 8),
      batchTimeoutMs: 50 + Math.floor(random() * 300),
    },
    checkpoint: {
      intervalMs: 200 + Math.floor(random() * 800),
      everyMessages: 5 + Math.floor(random() * 30),
    },
    retry: { initialMs: 20, maxMs: 300 },
    drainTimeoutMs: 1_500,
    handleMessage: async (_message, pipeline) => {
      delivering(pipeline.leaseKey);
      if (random() < 0.03) throw new Error('simulated handleMessage failure');
    },
    handleBatch: async (messages, _batch, pipeline) => {
      delivering(pipeline.leaseKey);
      await clock.sleep(5 + Math.floor(random() * 40));
      if (random() < 0.05) throw new Error('simulated handleBatch failure');
      // A poison message fails, and so do the later messages of its key: the handler keeps key order.
      const blocked = new Set<string>();
      for (const message of messages) {
        if (blocked.has(message.record.partitionKey) || isPoisoned(message)) {
          blocked.add(message.record.partitionKey);
          message.fail(new Error('simulated poison message'));
          continue;
        }
        if (partialFailures && random() < 0.05) {
          message.fail(new Error('simulated failure of one message'));
          continue;
        }
        if (alive()) {
          ledger.handled(
            message.record.sequenceNumber,
            `${workerId} pipeline`,
            true,
            streams.get(pipeline.leaseKey),
          );
        }
      }
    },
    handleFailed: (messages: readonly PipelineMessage[], failure) => {
      if (messages.some(isPoisoned)) return 'retry';
      if (failure.attempt >= 3 && random() < 0.5) {
        for (const message of messages) {
          if (alive()) ledger.skipped(message.record.sequenceNumber, `${workerId} pipeline`);
        }
        return 'skip';
      }
      return 'retry';
    },
  };
}

/**
 * A pipeline as `exactlyOnce` allows it (batches one at a time in shard order, one batch key): each
 * batch commits through `batch.transaction`; a record counts as handled when its transaction commits.
 * Handlers throw now and then before the transaction (rolled back, retried) and after it committed
 * (never handed over again).
 */
function exactlyOncePipelineOptions(
  context: ProcessorContext,
  instances: ReadonlyMap<string, ProcessorInstance>,
  streams: ReadonlyMap<string, string>,
): PipelineOptions {
  const { ledger, watch, clock, random, workerId } = context;
  const delivering = (leaseKey: string): void => {
    const instance = instances.get(leaseKey);
    if (instance !== undefined) watch.delivering(instance);
  };
  const maxDemand = 2 + Math.floor(random() * 10);
  return {
    processors: { concurrency: 1, maxDemand, minDemand: Math.floor(maxDemand / 2) },
    batchers: {
      concurrency: 1,
      batchSize: 2 + Math.floor(random() * 8),
      batchTimeoutMs: 50 + Math.floor(random() * 300),
    },
    checkpoint: {
      intervalMs: 200 + Math.floor(random() * 800),
      everyMessages: 5 + Math.floor(random() * 30),
    },
    retry: { initialMs: 20, maxMs: 300 },
    drainTimeoutMs: 1_500,
    handleMessage: async (_message, pipeline) => {
      delivering(pipeline.leaseKey);
    },
    handleBatch: async (messages, batch, pipeline) => {
      delivering(pipeline.leaseKey);
      await clock.sleep(5 + Math.floor(random() * 40));
      if (random() < 0.05) throw new Error('simulated handleBatch failure before the transaction');
      // What the database holds counts, whether or not the process lived to see the commit.
      await batch.transaction<MemoryTransaction>((transaction) => {
        for (const message of messages) {
          transaction.onCommit(() =>
            ledger.handled(message.record.sequenceNumber, workerId, true, streams.get(pipeline.leaseKey)),
          );
        }
      });
      if (random() < 0.05) throw new Error('simulated handleBatch failure after the commit');
    },
  };
}

function multilangOptions(context: ProcessorContext): ProcessorOptions {
  const { ledger, watch, clock, random, workerId, alive } = context;
  const children = createMultiLangProcessorFactory({
    command: { executable: 'simulated-child', args: [], text: 'simulated-child' },
    workingDirectory: '.',
    environment: {},
    logger: noopLogger,
    clock,
    messageTimeoutMs: null,
    exitTimeoutMs: 500,
    killTimeoutMs: 500,
    replayBufferMaxBytes: 64 * 1024 * 1024,
    launcher: simulatedChildLauncher({
      clock,
      random,
      handle: (sequenceNumber) => {
        if (alive()) ledger.handled(sequenceNumber, `${workerId} child`);
      },
      crashProbability: 0.15,
    }),
    signalChild: (child, signal) => {
      child.kill(signal);
    },
  });
  return {
    processor: (shardId, processorContext) => {
      const instance = watch.begin(workerId, processorContext.leaseKey);
      const inner = children(shardId, processorContext);
      const end = (): void => watch.end(instance);
      return {
        initialize: (input) => inner.initialize?.(input),
        processRecords(input) {
          watch.delivering(instance);
          return inner.processRecords(input);
        },
        shutdownRequested: (input) => inner.shutdownRequested?.(input),
        async shardEnded(input) {
          await inner.shardEnded?.(input);
          if (input.checkpointer.lastCheckpoint.isShardEnd) end();
        },
        async leaseLost(input) {
          try {
            await inner.leaseLost?.(input);
          } finally {
            end();
          }
        },
      };
    },
  };
}
