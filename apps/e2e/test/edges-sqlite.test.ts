import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  type Consumer,
  createConsumer,
  createPipelineProcessorFactory,
  type RecordProcessor,
} from '@kcl/consumer';
import { type Lease, noopLogger, systemClock, systemRandom } from '@kcl/core';
import { createFaultyLeaseStore, FLEET_TIMINGS, waitUntil } from '@kcl/testkit';
import { localKinesisClient, openShards, putRecords, splitShard } from '@kcl/testkit/kinesis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type OpenedStore, openStore } from '../src/store-config.js';
import { startTestStream, type TestStream } from './support/stream.js';

/**
 * The reliability defects at the edges, reproduced through the public API on the real emulator and a
 * SQLite lease store: a graceful stop during a closed shard's final batch, a retry after a mid-batch
 * checkpoint, and a graceful stop at a shard's end.
 */

const TIMING = {
  ...FLEET_TIMINGS.processes,
  // The cases read a finished parent's lease at SHARD_END: the cleanup must not delete it meanwhile.
  leaseCleanupIntervalMs: 60_000,
  shutdownTimeoutMs: 5_000,
} as const;

let stream: TestStream;
let dir: string;
const opened: OpenedStore[] = [];
const consumers: Consumer[] = [];

beforeAll(async () => {
  stream = await startTestStream();
  dir = mkdtempSync(join(tmpdir(), 'kcl-edges-'));
});

afterAll(async () => {
  await Promise.all(consumers.map((consumer) => consumer.stop({ graceful: false })));
  await Promise.all(opened.map((store) => store.close()));
  await stream?.stop();
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
});

async function sqliteStore(name: string): Promise<OpenedStore> {
  const store = await openStore({ kind: 'sqlite', file: join(dir, `${name}.db`) }, name);
  opened.push(store);
  return store;
}

/** A stream with one shard holding `count` records (`k<i % 10>` keys, payload `r<i>`), then split. */
async function closedParent(name: string, count: number): Promise<{ parent: string }> {
  await stream.create(name, 1);
  const records = Array.from({ length: count }, (_, index) => ({
    partitionKey: `k${index % 10}`,
    data: `r${index}`,
  }));
  await putRecords(stream.client, name, records);
  const [parent] = await openShards(stream.client, name);
  const parentId = parent?.ShardId as string;
  await splitShard(stream.client, name, parentId);
  return { parent: parentId };
}

function consumer(name: string, store: OpenedStore['store'], workerId: string, options: object): Consumer {
  const created = createConsumer({
    streamName: name,
    applicationName: name,
    workerId,
    kinesis: localKinesisClient(stream.emulator),
    leaseStore: store,
    initialPosition: 'TRIM_HORIZON',
    ...TIMING,
    ...options,
  } as Parameters<typeof createConsumer>[0]);
  consumers.push(created);
  return created;
}

async function leaseOf(store: OpenedStore['store'], leaseKey: string): Promise<Lease | null> {
  return store.leases.get(leaseKey);
}

describe('edges on kinesis-local and SQLite', () => {
  it('a graceful stop during a closed parent’s final batch leaves it short of SHARD_END; the next owner processes every record', async () => {
    const name = 'edge-stop-final-batch';
    const { parent } = await closedParent(name, 3_000);
    const { store } = await sqliteStore(name);
    const handled = new Set<string>();
    let handledWhenShardEnded: number | null = null;
    const processor = (): RecordProcessor => ({
      async processRecords({ records, checkpointer, signal }) {
        for (const record of records) {
          if (signal.aborted) return; // a KCL-style processor that honours the stop
          handled.add(Buffer.from(record.data).toString());
          if (handled.size % 50 === 0) await new Promise((resolve) => setTimeout(resolve, 5));
        }
        await checkpointer.checkpoint();
      },
      async shardEnded({ checkpointer }) {
        handledWhenShardEnded ??= handled.size;
        await checkpointer.checkpoint();
      },
      async shutdownRequested({ checkpointer }) {
        await checkpointer.checkpoint();
      },
    });
    const first = consumer(name, store, 'first', { processor, maxRecords: 10_000 });
    await first.start();
    await waitUntil(() => handled.size >= 400, 20_000, 'the first 400 records');
    await first.stop();
    expect(handled.size).toBeLessThan(3_000);
    expect((await leaseOf(store, parent))?.checkpoint.isShardEnd).toBe(false);
    expect(handledWhenShardEnded).toBeNull();

    const second = consumer(name, store, 'second', { processor });
    await second.start();
    await waitUntil(
      async () => (await leaseOf(store, parent))?.checkpoint.isShardEnd === true,
      30_000,
      'the parent at SHARD_END',
    );
    await second.stop();
    expect(handled.size).toBe(3_000);
    expect(handledWhenShardEnded).toBe(3_000);
  });

  it('a pipeline stopped while admitting the final batch leaves the parent short of SHARD_END; nothing is lost', async () => {
    const name = 'edge-stop-final-batch-pipeline';
    const { parent } = await closedParent(name, 2_000);
    const { store } = await sqliteStore(name);
    const handled = new Set<string>();
    const pipeline = () =>
      createPipelineProcessorFactory(
        {
          partitionBy: (message) => message.record.partitionKey,
          processors: { concurrency: 2, maxDemand: 20, minDemand: 10 },
          handleMessage: async (message) => {
            await new Promise((resolve) => setTimeout(resolve, 1));
            handled.add(Buffer.from(message.data).toString());
          },
          checkpoint: { intervalMs: 200, everyMessages: 100 },
          drainTimeoutMs: 1_000,
        },
        { clock: systemClock, random: systemRandom, logger: noopLogger },
      );
    const first = consumer(name, store, 'first', { processor: pipeline(), maxRecords: 10_000 });
    await first.start();
    await waitUntil(() => handled.size >= 200, 20_000, 'the first 200 records');
    await first.stop();
    expect(handled.size).toBeLessThan(2_000);
    expect((await leaseOf(store, parent))?.checkpoint.isShardEnd).toBe(false);

    const second = consumer(name, store, 'second', { processor: pipeline() });
    await second.start();
    await waitUntil(
      async () => (await leaseOf(store, parent))?.checkpoint.isShardEnd === true,
      40_000,
      'the parent at SHARD_END',
    );
    await second.stop();
    expect(handled.size).toBe(2_000);
  });

  it('a processor that checkpoints in the middle of a batch and then throws completes the shard', async () => {
    const name = 'edge-mid-batch-throw';
    const { parent } = await closedParent(name, 100);
    const { store } = await sqliteStore(name);
    const handled = new Set<string>();
    let thrown = false;
    const worker = consumer(name, store, 'only', {
      processor: (): RecordProcessor => ({
        async processRecords({ records, checkpointer }) {
          for (const record of records) {
            handled.add(Buffer.from(record.data).toString());
            await checkpointer.checkpointRecord(record);
            if (!thrown && Buffer.from(record.data).toString() === 'r40') {
              thrown = true;
              throw new Error('failed after checkpointing r40');
            }
          }
        },
      }),
    });
    await worker.start();
    await waitUntil(
      async () => (await leaseOf(store, parent))?.checkpoint.isShardEnd === true,
      20_000,
      'the parent at SHARD_END',
    );
    await worker.stop();
    expect(thrown).toBe(true);
    expect(handled.size).toBe(100);
  });

  it('a graceful stop at a shard’s end ends within shutdownTimeoutMs behind a poison message', async () => {
    const name = 'edge-stop-poison';
    const { parent } = await closedParent(name, 50);
    const { store } = await sqliteStore(name);
    const worker = consumer(name, store, 'only', {
      processor: createPipelineProcessorFactory(
        {
          handleMessage: (message) => {
            if (Buffer.from(message.data).toString() === 'r25') throw new Error('poison');
          },
          retry: { initialMs: 50, maxMs: 200 },
          drainTimeoutMs: 1_000,
        },
        { clock: systemClock, random: systemRandom, logger: noopLogger },
      ),
    });
    await worker.start();
    await waitUntil(
      () => worker.status().leases.some((lease) => lease.state === 'shard-ending'),
      20_000,
      'the shard end',
    );
    const started = performance.now();
    await worker.stop();
    expect(performance.now() - started).toBeLessThan(TIMING.shutdownTimeoutMs + 1_000);
    const lease = await leaseOf(store, parent);
    expect(lease?.checkpoint.isShardEnd).toBe(false);
    expect(lease?.owner).toBeNull();
  });

  it('a release that fails after SHARD_END does not run shardEnded again, and the stop ends', async () => {
    const name = 'edge-release-fails';
    const { parent } = await closedParent(name, 20);
    const { store } = await sqliteStore(name);
    const faulty = createFaultyLeaseStore(store);
    faulty.faults.failNext(1, { operations: ['leases.release'] });
    let shardEnded = 0;
    const worker = consumer(name, faulty, 'only', {
      processor: (): RecordProcessor => ({
        async processRecords({ checkpointer }) {
          await checkpointer.checkpoint();
        },
        async shardEnded({ checkpointer }) {
          shardEnded += 1;
          await checkpointer.checkpoint();
        },
      }),
    });
    await worker.start();
    await waitUntil(
      async () => (await leaseOf(store, parent))?.checkpoint.isShardEnd === true,
      20_000,
      'the parent at SHARD_END',
    );
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    const started = performance.now();
    await worker.stop();
    expect(performance.now() - started).toBeLessThan(TIMING.shutdownTimeoutMs);
    expect(shardEnded).toBe(1);
    expect(faulty.faults.calls('leases.release')).toBeGreaterThanOrEqual(1);
  });
});
