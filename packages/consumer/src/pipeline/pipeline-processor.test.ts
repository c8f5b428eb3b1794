import {
  ConfigurationError,
  ExtendedSequenceNumber,
  InvalidCheckpointError,
  interceptLeaseStore,
  LeaseLostError,
  noopLogger,
  OptionProblems,
} from '@kcl/core';
import type { MemoryTransaction } from '@kcl/testkit';
import { createMemoryLeaseStore, ManualClock, settle } from '@kcl/testkit';
import { describe, expect, it } from 'vitest';
import { LeaseKeeper } from '../leases/lease-keeper.js';
import { ShardCheckpointer } from '../processing/checkpointer.js';
import type {
  Checkpointer,
  KinesisRecord,
  PreparedCheckpointer,
  TransactionCheckpoint,
} from '../processing/record-processor.js';
import {
  createPipelineProcessorFactory,
  pipelineProcessorFactory,
} from './create-pipeline-processor-factory.js';
import { hashPartition } from './partitioned-queue.js';
import type { PipelineMessage } from './pipeline-message.js';
import type { BatchInfo, FailureContext, PipelineOptions } from './pipeline-options.js';
import { resolvePipelineOptions, validatePipelineOptions } from './pipeline-options.js';

const SHARD = 'shardId-000000000007';

/** A checkpointer that applies the real rules (never backwards, never past what was delivered) and records writes. */
class RecordingCheckpointer implements Checkpointer {
  readonly written: string[] = [];
  lastCheckpoint: ExtendedSequenceNumber = ExtendedSequenceNumber.TRIM_HORIZON;
  largestPermitted: ExtendedSequenceNumber = ExtendedSequenceNumber.TRIM_HORIZON;
  atShardEnd = false;
  failWith: Error | null = null;

  deliver(records: readonly KinesisRecord[]): void {
    const last = records.at(-1);
    if (last !== undefined) this.largestPermitted = position(last);
  }

  async checkpoint(sequenceNumber?: string, subSequenceNumber?: number): Promise<void> {
    if (this.failWith !== null) throw this.failWith;
    const target =
      sequenceNumber === undefined
        ? this.atShardEnd
          ? ExtendedSequenceNumber.SHARD_END
          : this.largestPermitted
        : ExtendedSequenceNumber.of(sequenceNumber, subSequenceNumber ?? 0);
    if (target.isBefore(this.lastCheckpoint)) throw new InvalidCheckpointError(`${target} goes backwards`);
    if (target.isAfter(this.largestPermitted) && !(target.isShardEnd && this.atShardEnd)) {
      throw new InvalidCheckpointError(`${target} is past the last delivered record`);
    }
    if (target.equals(this.lastCheckpoint)) return;
    this.written.push(target.toString());
    this.lastCheckpoint = target;
  }

  checkpointRecord(record: Pick<KinesisRecord, 'sequenceNumber' | 'subSequenceNumber'>): Promise<void> {
    return this.checkpoint(record.sequenceNumber, record.subSequenceNumber);
  }

  prepareCheckpoint(): Promise<PreparedCheckpointer> {
    throw new Error('not used by the pipeline');
  }

  /** Commits the rows `work` staged in its `string[]` transaction, with the checkpoint it set, or nothing. */
  readonly committed: string[] = [];

  async transaction<Transaction = unknown, T = void>(
    work: (transaction: Transaction, checkpoint: TransactionCheckpoint) => Promise<T> | T,
  ): Promise<T> {
    const staged: string[] = [];
    let target = this.largestPermitted;
    const value = await work(staged as Transaction, {
      checkpoint: (sequenceNumber, subSequenceNumber) => {
        target = ExtendedSequenceNumber.of(sequenceNumber ?? '', subSequenceNumber ?? 0);
      },
      checkpointRecord: (record) => {
        target = position(record as KinesisRecord);
      },
    });
    if (target.isBefore(this.lastCheckpoint)) throw new InvalidCheckpointError(`${target} goes backwards`);
    this.committed.push(...staged);
    this.written.push(`transaction ${target}`);
    this.lastCheckpoint = target;
    return value;
  }
}

function sequenceOf(index: number): string {
  return String(1_000_000 + index);
}

function position(record: KinesisRecord): ExtendedSequenceNumber {
  return ExtendedSequenceNumber.of(record.sequenceNumber, record.subSequenceNumber);
}

function makeRecord(index: number, partitionKey = `key-${index}`, subSequenceNumber = 0): KinesisRecord {
  return {
    sequenceNumber: sequenceOf(index),
    subSequenceNumber,
    partitionKey,
    explicitHashKey: null,
    data: new TextEncoder().encode(String(index)),
    approximateArrivalTimestamp: new Date(0),
    encryptionType: null,
    aggregated: subSequenceNumber > 0,
  };
}

function makeRecords(
  count: number,
  keyOf: (index: number) => string = (index) => `key-${index}`,
): KinesisRecord[] {
  return Array.from({ length: count }, (_, index) => makeRecord(index, keyOf(index)));
}

function indexOf(message: PipelineMessage): number {
  return Number(new TextDecoder().decode(message.data));
}

/** Handler gates the test opens one by one. */
class Gates {
  readonly #open = new Set<number>();
  readonly #waiting = new Map<number, () => void>();

  wait(index: number): Promise<void> {
    if (this.#open.has(index)) return Promise.resolve();
    return new Promise((resolve) => this.#waiting.set(index, resolve));
  }

  async open(...indexes: number[]): Promise<void> {
    for (const index of indexes) {
      this.#open.add(index);
      this.#waiting.get(index)?.();
      this.#waiting.delete(index);
    }
    await settle();
  }

  get waiting(): number[] {
    return [...this.#waiting.keys()].sort((a, b) => a - b);
  }
}

function harness(options: PipelineOptions) {
  const clock = new ManualClock();
  const checkpointer = new RecordingCheckpointer();
  const factory = createPipelineProcessorFactory(options, { clock, random: () => 0.5, logger: noopLogger });
  const processor = factory(SHARD, {
    shardId: SHARD,
    leaseKey: SHARD,
    workerId: 'worker-1',
    stream: { name: 'stream', identifier: null },
  });
  const base = { shardId: SHARD, leaseKey: SHARD, checkpointer };
  return {
    clock,
    checkpointer,
    processor,
    deliver(records: readonly KinesisRecord[], signal?: AbortSignal): Promise<void> {
      checkpointer.deliver(records);
      return Promise.resolve(
        processor.processRecords({
          ...base,
          records,
          millisBehindLatest: 0,
          signal: signal ?? new AbortController().signal,
        }),
      );
    },
    shutdownRequested: () => Promise.resolve(processor.shutdownRequested(base)),
    shardEnded: (signal?: AbortSignal) => {
      checkpointer.atShardEnd = true;
      return Promise.resolve(processor.shardEnded(signal === undefined ? base : { ...base, signal }));
    },
  };
}

/** Tracks whether a promise has settled, without awaiting it. */
function track<T>(promise: Promise<T>): { readonly done: boolean; readonly promise: Promise<T> } {
  const state = { done: false, promise };
  promise.then(
    () => {
      state.done = true;
    },
    () => {
      state.done = true;
    },
  );
  return state;
}

describe('pipeline options', () => {
  it('accepts a minimal pipeline and reports every problem of a bad one at once', () => {
    expect(validatePipelineOptions({ handleMessage: () => {} })).toEqual([]);
    const problems = validatePipelineOptions({
      handleFailed: 'nope',
      processors: { concurrency: 0, minDemand: 20, maxDemand: 10 },
      batchers: { batchSize: 0, batch_size: 4 },
      checkpoint: { intervalMs: -1 },
      retry: { initialMs: 500, maxMs: 100 },
      drainTimeoutMs: 1.5,
    });
    expect(problems).toEqual([
      "pipeline.handleFailed must be a function (messages, context) => 'retry' | 'skip'",
      'pipeline needs handleMessage, handleBatch or both: nothing would handle the records',
      'pipeline.processors.concurrency must be an integer from 1 to 10000, got 0',
      'pipeline.processors.minDemand (20) must be below maxDemand (10)',
      'pipeline.batchers.batch_size is not an option: did you mean `batchSize`?',
      'pipeline.batchers is set but handleBatch is not: batches would never be handled',
      'pipeline.batchers.batchSize must be an integer from 1 to ∞, got 0',
      'pipeline.checkpoint.intervalMs must be an integer from 1 to ∞, got -1',
      'pipeline.retry needs 0 < initialMs ≤ maxMs, got {"initialMs":500,"maxMs":100}',
      'pipeline.drainTimeoutMs must be an integer from 0 to ∞, got 1.5',
    ]);
  });

  it('makes the factory throw one ConfigurationError naming each problem, runtime included', () => {
    let caught: unknown;
    try {
      createPipelineProcessorFactory(
        { processors: { maxDemand: 0 } } as PipelineOptions,
        {
          clock: undefined,
          random: Math.random,
          logger: noopLogger,
        } as never,
      );
    } catch (error) {
      caught = error;
    }
    expect(caught).toBeInstanceOf(ConfigurationError);
    expect((caught as ConfigurationError).problems).toEqual([
      'pipeline needs handleMessage, handleBatch or both: nothing would handle the records',
      'pipeline.processors.maxDemand must be an integer from 1 to ∞, got 0',
      'runtime.clock is required: a Clock (systemClock from @kcl/core, or a ManualClock in tests)',
    ]);
  });
});

describe('pipeline ordering', () => {
  it('handles one partition strictly in order while different partitions run concurrently', async () => {
    const starts: Array<{ key: string; index: number }> = [];
    const activeByKey = new Map<string, number>();
    let active = 0;
    let maxActive = 0;
    let maxActivePerKey = 0;
    let handled = 0;
    const keys = ['a', 'b', 'c', 'd', 'e'];
    const { clock, deliver } = harness({
      partitionBy: (message) => message.record.partitionKey,
      processors: { concurrency: 4 },
      handleMessage: async (message) => {
        const key = message.record.partitionKey;
        const index = indexOf(message);
        starts.push({ key, index });
        active += 1;
        activeByKey.set(key, (activeByKey.get(key) ?? 0) + 1);
        maxActive = Math.max(maxActive, active);
        maxActivePerKey = Math.max(maxActivePerKey, activeByKey.get(key) ?? 0);
        // Uneven durations, so later messages of other keys overtake earlier ones.
        await clock.sleep(1 + ((index * 7) % 5));
        active -= 1;
        activeByKey.set(key, (activeByKey.get(key) ?? 1) - 1);
        handled += 1;
      },
    });
    await deliver(makeRecords(40, (index) => keys[index % 5] as string));
    for (let step = 0; step < 500 && handled < 40; step++) await clock.advance(1);

    expect(handled).toBe(40);
    for (const key of keys) {
      const order = starts.filter((start) => start.key === key).map((start) => start.index);
      expect(order).toHaveLength(8);
      expect(order).toEqual([...order].sort((a, b) => a - b));
    }
    expect(maxActivePerKey).toBe(1);
    expect(maxActive).toBe(4);
    // Different keys overtook each other: the global start order is not the shard order.
    const globalOrder = starts.map((start) => start.index);
    expect(globalOrder).not.toEqual([...globalOrder].sort((a, b) => a - b));
  });

  it('keeps a partition blocked behind its failing message while other partitions go on', async () => {
    const started: number[] = [];
    let failures = 0;
    const { clock, deliver, checkpointer } = harness({
      partitionBy: (message) => message.record.partitionKey,
      processors: { concurrency: 2 },
      checkpoint: { everyMessages: 1 },
      retry: { initialMs: 100, maxMs: 100 },
      handleMessage: (message) => {
        const index = indexOf(message);
        started.push(index);
        if (index === 0 && failures < 1) {
          failures += 1;
          throw new Error('downstream unavailable');
        }
      },
    });
    // Records 0, 2, 4 have key "a"; 1, 3, 5 key "b".
    await deliver(makeRecords(6, (index) => (index % 2 === 0 ? 'a' : 'b')));
    await settle();
    expect(started).toEqual([0, 1, 3, 5]);
    expect(checkpointer.written).toEqual([]);

    await clock.advance(100);
    expect(started).toEqual([0, 1, 3, 5, 0, 2, 4]);
    expect(checkpointer.written).toEqual([sequenceOf(1), sequenceOf(5)]);
  });

  it('hands the batches of one partition over in order, with batcher lanes running concurrently', async () => {
    const keys = ['k0', 'k1', 'k2', 'k3', 'k4', 'k5'];
    // Both lanes must be used for the concurrency assertion to mean something.
    expect(new Set(keys.map((key) => hashPartition(key) % 2)).size).toBe(2);
    const batches: Array<{ indexes: number[]; keys: string[] }> = [];
    let active = 0;
    let maxActive = 0;
    let handled = 0;
    const { clock, deliver } = harness({
      partitionBy: (message) => message.record.partitionKey,
      batchers: { concurrency: 2, batchSize: 3, batchTimeoutMs: 50 },
      handleBatch: async (messages) => {
        batches.push({
          indexes: messages.map(indexOf),
          keys: [...new Set(messages.map((message) => message.record.partitionKey))],
        });
        active += 1;
        maxActive = Math.max(maxActive, active);
        await clock.sleep(10);
        active -= 1;
        handled += messages.length;
      },
    });
    await deliver(makeRecords(60, (index) => keys[(index * 5) % 6] as string));
    for (let step = 0; step < 200 && handled < 60; step++) await clock.advance(5);

    expect(handled).toBe(60);
    for (const key of keys) {
      const order = batches.flatMap((batch) =>
        batch.indexes.filter((index) => keys[(index * 5) % 6] === key),
      );
      expect(order).toHaveLength(10);
      expect(order).toEqual([...order].sort((a, b) => a - b));
    }
    // Every batch comes from one lane: its keys all hash to the same lane.
    for (const batch of batches)
      expect(new Set(batch.keys.map((key) => hashPartition(key) % 2)).size).toBe(1);
    expect(maxActive).toBe(2);
  });

  it('runs unpartitioned messages on every processor at once', async () => {
    const gates = new Gates();
    const { deliver } = harness({
      processors: { concurrency: 3 },
      handleMessage: (message) => gates.wait(indexOf(message)),
    });
    await deliver(makeRecords(5));
    await settle();
    expect(gates.waiting).toEqual([0, 1, 2]);
    await gates.open(1);
    expect(gates.waiting).toEqual([0, 2, 3]);
  });
});

describe('pipeline checkpoints', () => {
  it('never checkpoints past a message that is not acknowledged, whatever order acknowledgements come in', async () => {
    const gates = new Gates();
    const acknowledged = new Set<number>();
    const { deliver, checkpointer } = harness({
      processors: { concurrency: 5 },
      checkpoint: { everyMessages: 1 },
      handleMessage: async (message) => {
        await gates.wait(indexOf(message));
        acknowledged.add(indexOf(message));
      },
    });
    await deliver(makeRecords(5));
    const highestContiguous = (): number => {
      let index = -1;
      while (acknowledged.has(index + 1)) index += 1;
      return index;
    };
    const steps: Array<[number, string[]]> = [
      [2, []],
      [4, []],
      [0, [sequenceOf(0)]],
      [3, [sequenceOf(0)]],
      [1, [sequenceOf(0), sequenceOf(4)]],
    ];
    for (const [index, expected] of steps) {
      await gates.open(index);
      expect(checkpointer.written).toEqual(expected);
      const last = checkpointer.written.at(-1);
      if (last !== undefined) expect(Number(last) - 1_000_000).toBeLessThanOrEqual(highestContiguous());
    }
  });

  it('checkpoints the sub-sequence number of KPL records that share a sequence number', async () => {
    const gates = new Gates();
    const { deliver, checkpointer } = harness({
      processors: { concurrency: 3 },
      checkpoint: { everyMessages: 1 },
      handleMessage: (message) => gates.wait(message.record.subSequenceNumber),
    });
    const records = [makeRecord(0, 'a', 0), makeRecord(0, 'b', 1), makeRecord(0, 'c', 2)];
    await deliver(records);
    await gates.open(1, 0);
    expect(checkpointer.written).toEqual([`${sequenceOf(0)}/1`]);
    await gates.open(2);
    expect(checkpointer.written).toEqual([`${sequenceOf(0)}/1`, `${sequenceOf(0)}/2`]);
  });

  it('checkpoints every N messages and every interval, and only when the watermark moved', async () => {
    const { clock, deliver, checkpointer } = harness({
      checkpoint: { everyMessages: 4, intervalMs: 5_000 },
      handleMessage: () => {},
    });
    await deliver(makeRecords(3));
    await settle();
    expect(checkpointer.written).toEqual([]);
    await deliver([makeRecord(3)]);
    await settle();
    expect(checkpointer.written).toEqual([sequenceOf(3)]);

    await deliver([makeRecord(4), makeRecord(5)]);
    await clock.advance(4_999);
    expect(checkpointer.written).toEqual([sequenceOf(3)]);
    await clock.advance(1);
    expect(checkpointer.written).toEqual([sequenceOf(3), sequenceOf(5)]);
    await clock.advance(20_000);
    expect(checkpointer.written).toEqual([sequenceOf(3), sequenceOf(5)]);
  });

  it('keeps trying after a failed checkpoint, at the next interval', async () => {
    const { clock, deliver, checkpointer } = harness({
      checkpoint: { everyMessages: 1, intervalMs: 1_000 },
      handleMessage: () => {},
    });
    checkpointer.failWith = new Error('store unavailable');
    await deliver(makeRecords(2));
    await settle();
    expect(checkpointer.written).toEqual([]);
    checkpointer.failWith = null;
    await clock.advance(1_000);
    expect(checkpointer.written).toEqual([sequenceOf(1)]);
  });
});

describe('pipeline failures', () => {
  it('holds the checkpoint back while a failed message is retried with backoff, then moves on', async () => {
    const failedCalls: Array<{ indexes: number[]; context: FailureContext; failure: unknown }> = [];
    let attempts = 0;
    const { clock, deliver, checkpointer } = harness({
      processors: { concurrency: 5 },
      checkpoint: { everyMessages: 1 },
      retry: { initialMs: 100, maxMs: 1_000 },
      handleMessage: (message) => {
        if (indexOf(message) !== 2) return;
        attempts += 1;
        if (message.attempt <= 2) throw new Error(`attempt ${message.attempt} failed`);
      },
      handleFailed: (messages, context) => {
        failedCalls.push({ indexes: messages.map(indexOf), context, failure: messages[0]?.failure });
        return 'retry';
      },
    });
    await deliver(makeRecords(5));
    await settle();
    expect(checkpointer.written).toEqual([sequenceOf(1)]);
    expect(failedCalls).toHaveLength(1);
    expect(failedCalls[0]?.indexes).toEqual([2]);
    expect(failedCalls[0]?.context).toMatchObject({
      stage: 'message',
      attempt: 1,
      shardId: SHARD,
      batchKey: 'default',
    });
    expect(failedCalls[0]?.failure).toEqual(new Error('attempt 1 failed'));

    // Backoff with random 0.5: 75 ms, then 150 ms.
    await clock.advance(74);
    expect(attempts).toBe(1);
    await clock.advance(1);
    expect(attempts).toBe(2);
    expect(failedCalls.map((call) => call.context.attempt)).toEqual([1, 2]);
    expect(checkpointer.written).toEqual([sequenceOf(1)]);
    await clock.advance(150);
    expect(attempts).toBe(3);
    expect(checkpointer.written).toEqual([sequenceOf(1), sequenceOf(4)]);
  });

  it('lets handleFailed skip a message, which then no longer holds the checkpoint', async () => {
    const handled: number[] = [];
    const { deliver, checkpointer } = harness({
      checkpoint: { everyMessages: 1 },
      handleMessage: (message) => {
        if (indexOf(message) === 1) message.fail('poison record');
        else handled.push(indexOf(message));
      },
      handleFailed: (messages) => (messages[0]?.failure === 'poison record' ? 'skip' : 'retry'),
    });
    await deliver(makeRecords(3));
    await settle();
    expect(handled).toEqual([0, 2]);
    expect(checkpointer.written.at(-1)).toBe(sequenceOf(2));
  });

  it('retries when there is no handleFailed or when it throws: a failure is never skipped silently', async () => {
    for (const handleFailed of [undefined, () => Promise.reject(new Error('handler bug'))]) {
      let attempts = 0;
      const { clock, deliver, checkpointer } = harness({
        checkpoint: { everyMessages: 1 },
        retry: { initialMs: 10, maxMs: 10 },
        handleMessage: () => {
          attempts += 1;
          if (attempts <= 3) throw new Error('not yet');
        },
        ...(handleFailed === undefined ? {} : { handleFailed }),
      });
      await deliver(makeRecords(1));
      await settle();
      expect(checkpointer.written).toEqual([]);
      await clock.advance(100);
      expect(attempts).toBe(4);
      expect(checkpointer.written).toEqual([sequenceOf(0)]);
    }
  });

  it('sends only the failed messages of a batch to handleFailed and retries them as a batch', async () => {
    const batches: Array<{ indexes: number[]; info: BatchInfo }> = [];
    const failed: Array<{ indexes: number[]; context: FailureContext }> = [];
    const { clock, deliver, checkpointer } = harness({
      checkpoint: { everyMessages: 1 },
      retry: { initialMs: 100, maxMs: 100 },
      batchers: { batchSize: 3 },
      handleBatch: (messages, info) => {
        batches.push({ indexes: messages.map(indexOf), info });
        for (const message of messages) {
          if (indexOf(message) === 1 && info.attempt === 1) message.fail('constraint violation');
        }
      },
      handleFailed: (messages, context) => {
        failed.push({ indexes: messages.map(indexOf), context });
        return 'retry';
      },
    });
    await deliver(makeRecords(3));
    await settle();
    expect(failed).toEqual([
      { indexes: [1], context: expect.objectContaining({ stage: 'batch', attempt: 1 }) },
    ]);
    expect(checkpointer.written).toEqual([sequenceOf(0)]);
    await clock.advance(100);
    expect(batches.map((batch) => [batch.indexes, batch.info.trigger, batch.info.attempt])).toEqual([
      [[0, 1, 2], 'size', 1],
      [[1], 'retry', 2],
    ]);
    expect(checkpointer.written).toEqual([sequenceOf(0), sequenceOf(2)]);
  });
});

describe('pipeline batch transactions', () => {
  it('commits each batch with the checkpoint at its last message when batches go one at a time in shard order', async () => {
    const { clock, checkpointer, deliver } = harness({
      batchers: { batchSize: 2, batchTimeoutMs: 100 },
      checkpoint: { everyMessages: 1_000, intervalMs: 60_000 },
      handleBatch: (messages, info) =>
        info.transaction<string[]>((rows) => {
          rows.push(...messages.map((message) => String(indexOf(message))));
        }),
    });
    await deliver(makeRecords(5));
    await settle();
    await clock.advance(100);
    expect(checkpointer.committed).toEqual(['0', '1', '2', '3', '4']);
    expect(checkpointer.written).toEqual([
      `transaction ${sequenceOf(1)}`,
      `transaction ${sequenceOf(3)}`,
      `transaction ${sequenceOf(4)}`,
    ]);
  });

  it('stops the checkpoint before a message still in flight: a batch that overtakes an earlier one does not move it', async () => {
    const gates = new Gates();
    const { checkpointer, deliver } = harness({
      batchers: { concurrency: 2, batchSize: 2 },
      checkpoint: { everyMessages: 1_000, intervalMs: 60_000 },
      handleBatch: async (messages, info) => {
        await gates.wait(indexOf(messages[0] as PipelineMessage));
        await info.transaction<string[]>((rows) => {
          rows.push(...messages.map((message) => String(indexOf(message))));
        });
      },
    });
    await deliver(makeRecords(4));
    await settle();
    await gates.open(2);
    expect(checkpointer.committed).toEqual(['2', '3']);
    expect(checkpointer.written).toEqual(['transaction TRIM_HORIZON']);
    await gates.open(0);
    expect(checkpointer.committed).toEqual(['2', '3', '0', '1']);
    expect(checkpointer.written).toEqual(['transaction TRIM_HORIZON', `transaction ${sequenceOf(3)}`]);
  });

  it('fails the whole batch when the transaction fails: nothing committed, the batch retried', async () => {
    let attempts = 0;
    const { clock, checkpointer, deliver } = harness({
      batchers: { batchSize: 2 },
      checkpoint: { everyMessages: 1_000, intervalMs: 60_000 },
      retry: { initialMs: 10, maxMs: 10 },
      handleBatch: (messages, info) =>
        info.transaction<string[]>((rows) => {
          attempts += 1;
          rows.push(...messages.map((message) => String(indexOf(message))));
          if (attempts === 1) throw new Error('deadlock detected');
        }),
    });
    await deliver(makeRecords(2));
    await settle();
    expect(checkpointer.committed).toEqual([]);
    await clock.advance(20);
    expect(checkpointer.committed).toEqual(['0', '1']);
    expect(checkpointer.written).toEqual([`transaction ${sequenceOf(1)}`]);
  });
});

/**
 * A pipeline on the real checkpointer and a memory store with transactions; `loseAnswers` commits and
 * then loses the answer of that many transactions (a connection reset after COMMIT).
 */
async function transactionalPipeline(options: PipelineOptions, exactlyOnce = false) {
  const clock = new ManualClock();
  const memory = createMemoryLeaseStore({ applicationName: 'pipeline', transactions: true });
  const faults = { loseAnswers: 0 };
  const store = interceptLeaseStore(memory, async (operation, callOptions, call) => {
    const result = await call(callOptions);
    if (operation === 'leases.checkpointInTransaction' && faults.loseAnswers > 0) {
      faults.loseAnswers -= 1;
      throw new Error('connection reset after COMMIT');
    }
    return result;
  });
  const keeper = new LeaseKeeper({
    store,
    workerId: 'worker-1',
    leaseExpiryMs: 10_000,
    clock,
    logger: noopLogger,
    emit: () => {},
    onLost: () => {},
  });
  await memory.leases.create({ leaseKey: SHARD, checkpoint: ExtendedSequenceNumber.TRIM_HORIZON });
  const taken = await memory.leases.take(SHARD, 0, 'worker-1');
  if (!taken.ok) throw new Error('take');
  const held = keeper.adopt(taken.lease, clock.monotonicNow());
  const checkpointer = new ShardCheckpointer({ held, keeper, store, workerId: 'worker-1', emit: () => {} });
  const runtime = { clock, random: () => 0.5, logger: noopLogger };
  const problems = new OptionProblems('test');
  const resolved = resolvePipelineOptions(options, problems);
  problems.throwIfAny();
  const processor = pipelineProcessorFactory(resolved, runtime, { exactlyOnce })(SHARD, context);
  return {
    clock,
    memory,
    faults,
    checkpointer,
    async deliver(records: readonly KinesisRecord[]): Promise<void> {
      const last = records.at(-1);
      if (last !== undefined) checkpointer.beginDelivery(position(last));
      await processor.processRecords({
        shardId: SHARD,
        leaseKey: SHARD,
        checkpointer,
        records,
        millisBehindLatest: 0,
        signal: new AbortController().signal,
      });
      checkpointer.endDelivery(true);
    },
  };
}

const context = {
  shardId: SHARD,
  leaseKey: SHARD,
  workerId: 'worker-1',
  stream: { name: 'stream', identifier: null },
};

describe('pipeline batch transactions on the checkpointer', () => {
  it('never hands a batch over again once its transaction committed, even when the answer was lost', async () => {
    const output: string[] = [];
    const { clock, memory, faults, deliver } = await transactionalPipeline({
      batchers: { batchSize: 2 },
      checkpoint: { everyMessages: 1_000, intervalMs: 60_000 },
      retry: { initialMs: 10, maxMs: 10 },
      handleBatch: (messages, info) =>
        info.transaction<MemoryTransaction>((transaction) => {
          for (const message of messages) transaction.onCommit(() => output.push(String(indexOf(message))));
        }),
    });
    faults.loseAnswers = 1;
    await deliver(makeRecords(4));
    await settle();
    for (let step = 0; step < 5; step++) await clock.advance(10);
    expect(output).toEqual(['0', '1', '2', '3']);
    expect((await memory.leases.get(SHARD))?.checkpoint.toString()).toBe(sequenceOf(3));
  });

  it('never hands a batch over again when the handler throws after its transaction committed', async () => {
    const output: string[] = [];
    let calls = 0;
    const { clock, memory, deliver } = await transactionalPipeline({
      batchers: { batchSize: 2 },
      checkpoint: { everyMessages: 1_000, intervalMs: 60_000 },
      retry: { initialMs: 10, maxMs: 10 },
      handleBatch: async (messages, info) => {
        calls += 1;
        await info.transaction<MemoryTransaction>((transaction) => {
          for (const message of messages) transaction.onCommit(() => output.push(String(indexOf(message))));
        });
        if (calls === 1) throw new Error('the metrics call after the commit failed');
      },
    });
    await deliver(makeRecords(2));
    await settle();
    for (let step = 0; step < 5; step++) await clock.advance(10);
    expect(output).toEqual(['0', '1']);
    expect(calls).toBe(1);
    expect((await memory.leases.get(SHARD))?.checkpoint.toString()).toBe(sequenceOf(1));
  });
});

describe('pipeline exactlyOnce', () => {
  it("refuses a batch transaction whose checkpoint could not cover the batch's last message (a later batchKey's batch filled first)", async () => {
    const output: string[] = [];
    const failures: unknown[] = [];
    const { clock, memory, deliver } = await transactionalPipeline(
      {
        batchers: { batchSize: 2, batchTimeoutMs: 1_000 },
        checkpoint: { everyMessages: 1_000, intervalMs: 60_000 },
        retry: { initialMs: 10, maxMs: 10 },
        handleMessage: (message) => {
          message.batchKey = indexOf(message) === 0 ? 'first' : 'later';
        },
        handleBatch: (messages, info) =>
          info.transaction<MemoryTransaction>((transaction) => {
            for (const message of messages) transaction.onCommit(() => output.push(String(indexOf(message))));
          }),
        handleFailed: (messages) => {
          failures.push(...messages.map((message) => message.failure));
          return 'skip';
        },
      },
      true,
    );
    await deliver(makeRecords(3));
    await settle();
    // The batch of 1 and 2 filled first: committing it would leave the checkpoint before 0, and the
    // lease's next owner would write 1 and 2 again.
    expect(output).toEqual([]);
    expect(failures).toHaveLength(2);
    expect(failures[0]).toBeInstanceOf(InvalidCheckpointError);
    expect(String(failures[0])).toMatch(/exactlyOnce refused the transaction/);
    expect((await memory.leases.get(SHARD))?.checkpoint.sentinel).toBe('TRIM_HORIZON');
    await clock.advance(1_000);
    expect(output).toEqual(['0']);
  });
});

describe('pipeline batching', () => {
  it('hands batches over when full and when the timeout since their first message passes', async () => {
    const batches: Array<[number[], string]> = [];
    const { clock, deliver } = harness({
      batchers: { batchSize: 3, batchTimeoutMs: 1_000 },
      handleBatch: (messages, info) => {
        batches.push([messages.map(indexOf), info.trigger]);
      },
    });
    await deliver(makeRecords(7));
    await settle();
    expect(batches).toEqual([
      [[0, 1, 2], 'size'],
      [[3, 4, 5], 'size'],
    ]);
    await clock.advance(999);
    expect(batches).toHaveLength(2);
    await clock.advance(1);
    expect(batches).toEqual([
      [[0, 1, 2], 'size'],
      [[3, 4, 5], 'size'],
      [[6], 'timeout'],
    ]);
  });

  it('batches messages by the batchKey handleMessage chose', async () => {
    const batches: Array<[string, number[]]> = [];
    const { deliver } = harness({
      handleMessage: (message) => {
        message.batchKey = indexOf(message) % 2 === 0 ? 'even' : 'odd';
      },
      batchers: { batchSize: 2 },
      handleBatch: (messages, info) => {
        batches.push([info.batchKey, messages.map(indexOf)]);
      },
    });
    await deliver(makeRecords(8));
    await settle();
    expect(batches).toEqual([
      ['even', [0, 2]],
      ['odd', [1, 3]],
      ['even', [4, 6]],
      ['odd', [5, 7]],
    ]);
  });
});

describe('pipeline back-pressure', () => {
  it('makes processRecords wait while the pipeline is full, so in-flight messages stay bounded', async () => {
    const gates = new Gates();
    let maxInFlight = 0;
    const harnessed = harness({
      processors: { concurrency: 2, maxDemand: 3, minDemand: 1 },
      handleMessage: async (message) => {
        maxInFlight = Math.max(maxInFlight, harnessed.processor.inFlight);
        await gates.wait(indexOf(message));
      },
    });
    const { processor, deliver } = harnessed;
    expect(processor.capacity).toBe(6);
    const delivery = track(deliver(makeRecords(20)));
    await settle();
    expect(processor.inFlight).toBe(6);
    expect(gates.waiting).toEqual([0, 1]);
    expect(delivery.done).toBe(false);

    // Room comes back only once in-flight falls by concurrency × (maxDemand − minDemand) = 4.
    await gates.open(0, 1, 2);
    expect(processor.inFlight).toBe(3);
    await gates.open(3);
    expect(processor.inFlight).toBe(6);
    expect(delivery.done).toBe(false);

    for (let index = 4; index < 20 && !delivery.done; index++) await gates.open(index);
    expect(delivery.done).toBe(true);
    expect(maxInFlight).toBeLessThanOrEqual(6);
    expect(processor.inFlight).toBeLessThanOrEqual(6);
    await gates.open(...Array.from({ length: 20 }, (_, index) => index));
    expect(processor.inFlight).toBe(0);
  });

  it('counts the batchers in the capacity', () => {
    const { processor } = harness({
      processors: { concurrency: 2, maxDemand: 3 },
      batchers: { concurrency: 2, batchSize: 4 },
      handleBatch: () => {},
    });
    expect(processor.capacity).toBe(2 * 3 + 2 * 4);
  });

  it('stops waiting for room when the host signal aborts, without admitting the rest', async () => {
    const gates = new Gates();
    const { processor, deliver } = harness({
      processors: { concurrency: 1, maxDemand: 2, minDemand: 0 },
      handleMessage: (message) => gates.wait(indexOf(message)),
    });
    const halt = new AbortController();
    const delivery = track(deliver(makeRecords(10), halt.signal));
    await settle();
    expect(delivery.done).toBe(false);
    halt.abort();
    await settle();
    expect(delivery.done).toBe(true);
    expect(processor.inFlight).toBe(2);
  });
});

describe('pipeline lifecycle', () => {
  it('drains on shutdownRequested: partial batches go at once, then the watermark is checkpointed', async () => {
    const gates = new Gates();
    const batches: Array<[number[], string]> = [];
    const { clock, deliver, checkpointer, shutdownRequested, processor } = harness({
      processors: { concurrency: 2 },
      handleMessage: (message) => (indexOf(message) === 3 ? gates.wait(3) : undefined),
      batchers: { batchSize: 10, batchTimeoutMs: 60_000 },
      handleBatch: (messages, info) => {
        batches.push([messages.map(indexOf), info.trigger]);
      },
    });
    await deliver(makeRecords(5));
    await settle();
    expect(batches).toEqual([]);
    const shutdown = track(shutdownRequested());
    await settle();
    // Message 3 is still in handleMessage, so the partial batch waits for it.
    expect(shutdown.done).toBe(false);
    expect(batches).toEqual([]);
    await gates.open(3);
    expect(shutdown.done).toBe(true);
    expect(batches).toEqual([[[0, 1, 2, 4, 3], 'drain']]);
    expect(checkpointer.written).toEqual([sequenceOf(4)]);
    expect(processor.stopped).toBe(true);
    expect(clock.pendingSleeps).toBe(0);
  });

  it('bounds the drain by drainTimeoutMs and checkpoints only what is acknowledged', async () => {
    const gates = new Gates();
    let calls = 0;
    const { clock, deliver, checkpointer, shutdownRequested } = harness({
      processors: { concurrency: 4 },
      drainTimeoutMs: 2_000,
      handleMessage: async (message) => {
        calls += 1;
        if (indexOf(message) === 2) await gates.wait(2);
      },
    });
    await deliver(makeRecords(4));
    const shutdown = track(shutdownRequested());
    await clock.advance(1_999);
    expect(shutdown.done).toBe(false);
    await clock.advance(1);
    expect(shutdown.done).toBe(true);
    expect(checkpointer.written).toEqual([sequenceOf(1)]);
    await gates.open(2);
    await clock.advance(60_000);
    expect(checkpointer.written).toEqual([sequenceOf(1)]);
    expect(calls).toBe(4);
  });

  it('checkpoints SHARD_END only after every message is acknowledged, failures included', async () => {
    const gates = new Gates();
    let failuresLeft = 1;
    const { clock, deliver, checkpointer, shardEnded } = harness({
      processors: { concurrency: 3 },
      retry: { initialMs: 100, maxMs: 100 },
      handleMessage: async (message) => {
        const index = indexOf(message);
        if (index === 0) await gates.wait(0);
        if (index === 2 && failuresLeft > 0) {
          failuresLeft -= 1;
          throw new Error('transient');
        }
      },
    });
    await deliver(makeRecords(3));
    const ended = track(shardEnded());
    await settle();
    expect(ended.done).toBe(false);
    expect(checkpointer.written).toEqual([]);
    await gates.open(0);
    expect(ended.done).toBe(false);
    expect(checkpointer.written.includes('SHARD_END')).toBe(false);
    await clock.advance(100);
    expect(ended.done).toBe(true);
    expect(checkpointer.written.at(-1)).toBe('SHARD_END');
  });

  it('stops at once on leaseLost: no more handler calls, late acknowledgements ignored, no checkpoint', async () => {
    const gates = new Gates();
    const started: number[] = [];
    const { clock, deliver, checkpointer, processor } = harness({
      checkpoint: { everyMessages: 1, intervalMs: 1_000 },
      handleMessage: async (message) => {
        started.push(indexOf(message));
        await gates.wait(indexOf(message));
      },
    });
    await deliver(makeRecords(5));
    await settle();
    expect(started).toEqual([0]);
    processor.leaseLost();
    await gates.open(0, 1, 2, 3, 4);
    await clock.advance(10_000);
    expect(started).toEqual([0]);
    expect(checkpointer.written).toEqual([]);
    expect(processor.stopped).toBe(true);
    expect(processor.inFlight).toBe(0);
    // No timer is left behind (checkpoint interval, batch timeouts, retries).
    expect(clock.pendingSleeps).toBe(0);
    // A batch delivered after the loss is ignored.
    await deliver([makeRecord(5)]);
    await settle();
    expect(started).toEqual([0]);
  });

  it('stops when a checkpoint is refused because the lease is lost, releasing a waiting processRecords', async () => {
    const gates = new Gates();
    const started: number[] = [];
    const { deliver, checkpointer, processor } = harness({
      processors: { concurrency: 1, maxDemand: 2, minDemand: 1 },
      checkpoint: { everyMessages: 1 },
      handleMessage: async (message) => {
        started.push(indexOf(message));
        await gates.wait(indexOf(message));
      },
    });
    checkpointer.failWith = new LeaseLostError(SHARD, 'another worker holds it now');
    const delivery = track(deliver(makeRecords(10)));
    await settle();
    expect(delivery.done).toBe(false);
    await gates.open(0);
    expect(delivery.done).toBe(true);
    expect(processor.stopped).toBe(true);
    await gates.open(1, 2, 3);
    expect(started).toEqual([0, 1]);
  });

  it('gives up waiting at the shard end when its signal aborts (a stop), so a poison message cannot hold a stop', async () => {
    const { deliver, checkpointer, shardEnded, shutdownRequested } = harness({
      handleMessage: (message) => {
        if (indexOf(message) === 1) throw new Error('poison');
      },
      retry: { initialMs: 10, maxMs: 10 },
      drainTimeoutMs: 50,
    });
    await deliver(makeRecords(3));
    const stop = new AbortController();
    const ended = track(shardEnded(stop.signal));
    await settle();
    expect(ended.done).toBe(false);
    stop.abort();
    await expect(ended.promise).rejects.toThrow(/stopped before it drained/);
    // Nothing at or past the poison message is checkpointed, SHARD_END least of all.
    expect(checkpointer.written).not.toContain('SHARD_END');
    const stopping = track(shutdownRequested());
    await settle();
    expect(stopping.done).toBe(false);
  });
});

describe('pipeline key order on partial failures', () => {
  it('retries the later messages of a key together with its failed one, never acknowledging them first', async () => {
    const attempts: string[][] = [];
    let failFirst = true;
    const { clock, deliver, checkpointer, shutdownRequested } = harness({
      partitionBy: (message) => message.record.partitionKey,
      batchers: { batchSize: 4, batchTimeoutMs: 1_000 },
      retry: { initialMs: 10, maxMs: 10 },
      checkpoint: { intervalMs: 100_000, everyMessages: 1 },
      handleBatch: (messages) => {
        attempts.push(messages.map((message) => `${message.record.partitionKey}${indexOf(message)}`));
        for (const message of messages) {
          if (failFirst && indexOf(message) === 0) message.fail(new Error('one bad row'));
        }
        failFirst = false;
      },
    });
    // a0 (fails), b1, a2, b3: a2 must be tried again after a0, not acknowledged while a0 waits.
    await deliver(makeRecords(4, (index) => (index % 2 === 0 ? 'a' : 'b')));
    await clock.advance(50);
    expect(attempts).toEqual([
      ['a0', 'b1', 'a2', 'b3'],
      ['a0', 'a2'],
    ]);
    await shutdownRequested();
    expect(checkpointer.lastCheckpoint.toString()).toBe(sequenceOf(3));
  });

  it('decides on a message that failed in handleMessage only after the earlier messages of its key left handleBatch', async () => {
    const events: string[] = [];
    let batchFails = true;
    const { clock, deliver, checkpointer, shutdownRequested } = harness({
      partitionBy: (message) => message.record.partitionKey,
      batchers: { batchSize: 10, batchTimeoutMs: 100 },
      retry: { initialMs: 10, maxMs: 10 },
      handleMessage: (message) => {
        if (indexOf(message) === 1) message.fail(new Error('bad row'));
      },
      handleBatch: (messages) => {
        const indexes = messages.map(indexOf).join(',');
        if (batchFails) {
          batchFails = false;
          events.push(`batch ${indexes} fails`);
          throw new Error('batch failed');
        }
        events.push(`batch ${indexes}`);
      },
      handleFailed: (messages, context) => {
        events.push(`${context.stage} ${messages.map(indexOf).join(',')} failed`);
        return context.stage === 'message' ? 'skip' : 'retry';
      },
    });
    // a0 waits in a batch while a1 fails in handleMessage: a1 is skipped only after a0 is handled
    // (a0's batch failing first), and a2 follows.
    await deliver(makeRecords(3, () => 'a'));
    await clock.advance(500);
    expect(events).toEqual(['batch 0 fails', 'batch 0 failed', 'batch 0', 'message 1 failed', 'batch 2']);
    await shutdownRequested();
    expect(checkpointer.lastCheckpoint.toString()).toBe(sequenceOf(2));
  });

  it('hands a partial batch over early when a later message of its key failed, rather than holding the stage until it times out', async () => {
    const events: string[] = [];
    const { clock, deliver, checkpointer, shutdownRequested } = harness({
      partitionBy: (message) => message.record.partitionKey,
      batchers: { batchSize: 10, batchTimeoutMs: 60_000 },
      handleMessage: (message) => {
        if (indexOf(message) === 1) message.fail(new Error('bad row'));
      },
      handleBatch: (messages, info) => {
        events.push(`batch ${messages.map(indexOf).join(',')} (${info.trigger})`);
      },
      handleFailed: (messages, context) => {
        events.push(`${context.stage} ${messages.map(indexOf).join(',')} failed`);
        return 'skip';
      },
    });
    // a0 waits in a partial batch (with b2 and c3: one batch key) when a1 fails: the batch goes at
    // once, not in 60 s, and a1 is decided after it.
    await deliver(makeRecords(4, (index) => (index < 2 ? 'a' : String.fromCharCode(97 + index))));
    await clock.advance(50);
    expect(events).toEqual(['batch 0,2,3 (ordering)', 'message 1 failed']);
    await shutdownRequested();
    expect(events).toEqual(['batch 0,2,3 (ordering)', 'message 1 failed']);
    expect(checkpointer.lastCheckpoint.toString()).toBe(sequenceOf(3));
  });
});
