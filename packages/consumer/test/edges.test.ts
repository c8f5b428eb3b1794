import { noopLogger } from '@kcl/core';
import { ManualClock, MemoryLeaseTable } from '@kcl/testkit';
import { describe, expect, it } from 'vitest';
import { createPipelineProcessorFactory } from '../src/index.js';
import type { StreamReader } from '../src/kinesis/kinesis-stream.js';
import {
  endingStream,
  ONE_SHARD,
  record,
  shardConsumer,
  tickingStream,
  unitWorker,
} from './support/units.js';

/**
 * Where two mechanisms meet, on a ManualClock with the memory store and a fake stream: each case was a
 * way to break a promise of the runtime.
 */

describe('a stop while shardEnded waits', () => {
  it('does not let shutdownRequested checkpoint SHARD_END: only shardEnded finishes a shard', async () => {
    let inShardEnded = false;
    const calls: string[] = [];
    const unit = await shardConsumer({
      stream: endingStream([record('10'), record('20')]),
      processor: {
        processRecords() {
          calls.push('processRecords');
        },
        async shardEnded({ signal }) {
          calls.push('shardEnded');
          inShardEnded = true;
          // Waits for work in flight; gives up when the stop aborts its signal.
          await new Promise<void>((resolve) =>
            signal?.addEventListener('abort', () => resolve(), { once: true }),
          );
          throw new Error('stopped before the work in flight drained');
        },
        async shutdownRequested({ checkpointer }) {
          calls.push('shutdownRequested');
          await checkpointer.checkpoint();
        },
        leaseLost() {
          calls.push('leaseLost');
        },
      },
    });
    const run = unit.consumer.run();
    for (let step = 0; step < 50 && !inShardEnded; step++) await unit.clock.advance(100);
    expect(inShardEnded).toBe(true);
    unit.consumer.requestShutdown();
    await unit.clock.advance(1_000);
    expect(await run).toBe('shutdown');
    const lease = await unit.stored();
    expect(lease?.checkpoint.toString()).toBe('20');
    expect(lease?.owner).toBeNull();
    expect(calls).toEqual(['processRecords', 'shardEnded', 'shutdownRequested', 'leaseLost']);
  });
});

describe('a shutdownRequested that outlives its budget', () => {
  it('is not overlapped by leaseLost: leaseLost follows once it returns', async () => {
    const calls: string[] = [];
    let inside = 0;
    let overlapped = false;
    const enter = (name: string): void => {
      calls.push(`${name}+`);
      inside += 1;
      if (inside > 1) overlapped = true;
    };
    const exit = (name: string): void => {
      calls.push(`${name}-`);
      inside -= 1;
    };
    const clock: { current: ManualClock | null } = { current: null };
    const unit = await shardConsumer({
      shutdownTimeoutMs: 1_000,
      stream: {
        name: 'endless',
        listShards: async () => [],
        getShardIterator: async () => 'it',
        getRecords: async () => ({ Records: [record('10')], NextShardIterator: 'it', MillisBehindLatest: 0 }),
      },
      processor: {
        processRecords() {},
        async shutdownRequested() {
          enter('shutdownRequested');
          await clock.current?.sleep(5_000);
          exit('shutdownRequested');
        },
        async leaseLost() {
          enter('leaseLost');
          exit('leaseLost');
        },
      },
    });
    clock.current = unit.clock;
    const run = unit.consumer.run();
    await unit.clock.advance(500);
    unit.consumer.requestShutdown();
    await unit.clock.advance(10_000);
    await run;
    expect(overlapped).toBe(false);
    expect(calls).toEqual(['shutdownRequested+', 'shutdownRequested-', 'leaseLost+', 'leaseLost-']);
  });
});

describe('a checkpoint in flight at the renewal tick', () => {
  it('does not cost the lease when it fails (default timings): the renewal is tried again soon', async () => {
    const clock = new ManualClock();
    let checkpointNext = false;
    const { worker, faulty, events } = unitWorker({
      workerId: 'w1',
      clock,
      table: new MemoryLeaseTable(),
      stream: tickingStream(),
      processor: () => ({
        async processRecords({ checkpointer }) {
          if (checkpointNext) {
            checkpointNext = false;
            await checkpointer.checkpoint();
          }
        },
      }),
    });
    const starting = worker.start();
    await clock.advance(0);
    await starting;
    await clock.advance(25_000);
    // One updateCheckpoint hangs (cut at storeCallTimeoutMs, 10 s) across the renewal at 30 s.
    faulty.faults.hangNext(1, Number.POSITIVE_INFINITY, ['leases.checkpoint']);
    checkpointNext = true;
    await clock.advance(25_000);
    expect(events.filter((event) => event.type === 'lease-lost')).toEqual([]);
    const stopping = worker.stop(true);
    await clock.advance(60_000);
    await stopping;
  });
});

describe('a stop during a slow start', () => {
  it('leaves no registry entry and takes nothing afterwards', async () => {
    const clock = new ManualClock();
    const { worker, faulty } = unitWorker({
      workerId: 'w1',
      clock,
      table: new MemoryLeaseTable(),
      stream: tickingStream(),
      processor: () => ({ processRecords() {} }),
    });
    faulty.faults.hangNext(1, 3_000, ['admin.ensureSchema']);
    const starting = worker.start().then(
      () => 'started',
      (error: Error) => error.message,
    );
    await clock.advance(1_000);
    worker.cancelStart();
    const stopping = worker.stop(true);
    await clock.advance(5_000);
    await stopping;
    expect(await starting).toMatch(/stopped while it was starting/);
    const takes = faulty.faults.calls('leases.take');
    await clock.advance(10_000);
    expect(await faulty.inner.workers.list()).toEqual([]);
    expect(faulty.faults.calls('leases.take')).toBe(takes);
    expect((await faulty.inner.leases.list()).every((lease) => lease.owner === null)).toBe(true);
  });
});

describe('a pipeline whose lease is lost and taken back by the same worker', () => {
  it('never runs two handlers for one key at once: the old handler finishes first', async () => {
    const clock = new ManualClock();
    let active = 0;
    let mostActive = 0;
    let slowOnce = true;
    const stream: StreamReader = {
      name: 'fixed',
      listShards: async () => ONE_SHARD,
      getShardIterator: async () => 'first',
      getRecords: async (iterator) =>
        iterator === 'first'
          ? {
              Records: ['101', '102', '103'].map((sequenceNumber) => record(sequenceNumber)),
              NextShardIterator: 'rest',
              MillisBehindLatest: 0,
            }
          : { Records: [], NextShardIterator: 'rest', MillisBehindLatest: 0 },
    };
    const processor = createPipelineProcessorFactory(
      {
        partitionBy: (message) => message.record.partitionKey,
        handleMessage: async (message) => {
          active += 1;
          mostActive = Math.max(mostActive, active);
          if (message.record.sequenceNumber === '101' && slowOnce) {
            slowOnce = false;
            // Longer than the lease lasts, shorter than drainTimeoutMs.
            await clock.sleep(7_500);
          }
          active -= 1;
        },
        drainTimeoutMs: 8_000,
      },
      { clock, random: () => 0.5, logger: noopLogger },
    );
    const { worker, faulty, events } = unitWorker({
      workerId: 'w1',
      clock,
      table: new MemoryLeaseTable(),
      stream,
      processor,
      overrides: {
        leaseRenewIntervalMs: 1_000,
        leaseExpiryMs: 3_000,
        rebalanceIntervalMs: 2_000,
        shutdownTimeoutMs: 5_000,
      },
    });
    const starting = worker.start();
    await clock.advance(0);
    await starting;
    await clock.advance(500);
    faulty.faults.setUnavailable();
    await clock.advance(4_000);
    faulty.faults.restore();
    await clock.advance(12_000);
    expect(events.filter((event) => event.type === 'lease-lost')).not.toEqual([]);
    expect(events.filter((event) => event.type === 'lease-taken').length).toBeGreaterThan(1);
    expect(mostActive).toBe(1);
    const stopping = worker.stop(true);
    await clock.advance(30_000);
    await stopping;
  });
});

describe('an idle fan-out shard', () => {
  it('lets shutdownRequested checkpoint the continuation of an empty event, past the last record', async () => {
    const stream: StreamReader = {
      ...tickingStream(),
      subscribeToShard: async (_arn, _shardId, _position, signal) =>
        (async function* events() {
          yield {
            records: [record('10'), record('20')],
            continuationSequenceNumber: '20',
            millisBehindLatest: 0,
            childShards: [],
          };
          // Nothing new on the shard: Kinesis says where the subscription got to.
          yield { records: [], continuationSequenceNumber: '35', millisBehindLatest: 0, childShards: [] };
          await new Promise<void>((resolve) =>
            signal.addEventListener('abort', () => resolve(), { once: true }),
          );
        })(),
    };
    let batches = 0;
    const unit = await shardConsumer({
      stream,
      fanout: true,
      processor: {
        processRecords() {
          batches += 1;
        },
        async shutdownRequested({ checkpointer }) {
          await checkpointer.checkpoint();
        },
      },
    });
    const run = unit.consumer.run();
    for (let step = 0; step < 20; step++) await unit.clock.advance(100);
    expect(batches).toBe(1);
    unit.consumer.requestShutdown();
    await unit.clock.advance(1_000);
    expect(await run).toBe('shutdown');
    expect((await unit.stored())?.checkpoint.toString()).toBe('35');
  });
});
