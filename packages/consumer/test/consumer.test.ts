import {
  decodeLeaseFigures,
  ExtendedSequenceNumber,
  type KclEvent,
  LEASE_FIGURES_METADATA_KEY,
} from '@kcl/core';
import { createMemoryLeaseStore, MemoryLeaseTable } from '@kcl/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createConsumer, type KinesisRecord, type RecordProcessor } from '../src/index.js';
import { createStream, type LocalKinesis, putRecords, startLocalKinesis, until } from './support/kinesis.js';

let kinesis: LocalKinesis;

beforeAll(async () => {
  kinesis = await startLocalKinesis();
});
afterAll(async () => {
  await kinesis?.stop();
});

const fast = {
  leaseRenewIntervalMs: 200,
  leaseExpiryMs: 700,
  rebalanceIntervalMs: 150,
  pollIntervalMs: 50,
  parentPollIntervalMs: 100,
  shardSyncIntervalMs: 1_000,
  leaseCleanupIntervalMs: 1_000,
} as const;

describe('a single consumer', () => {
  it('reads every record of every shard in order and checkpoints', async () => {
    const streamName = 'single-consumer';
    await createStream(kinesis.client, streamName, 2);
    const written = Array.from({ length: 300 }, (_, index) => ({
      partitionKey: `key-${index % 20}`,
      data: `r${index}`,
    }));
    await putRecords(kinesis.client, streamName, written);

    const table = new MemoryLeaseTable();
    const store = createMemoryLeaseStore({ applicationName: 'app-single', table });
    const seen: KinesisRecord[] = [];
    const events: KclEvent[] = [];
    const consumer = createConsumer({
      streamName,
      applicationName: 'app-single',
      workerId: 'worker-1',
      kinesis: kinesis.newClient(),
      leaseStore: store,
      initialPosition: 'TRIM_HORIZON',
      ...fast,
      onEvent: (event) => events.push(event),
      processor: (): RecordProcessor => ({
        async processRecords({ records, checkpointer }) {
          seen.push(...records);
          await checkpointer.checkpoint();
        },
      }),
    });
    await consumer.start();
    await until(() => seen.length >= 300, 20_000, 'all records');
    await consumer.stop();

    expect(seen.map((record) => Buffer.from(record.data).toString()).sort()).toEqual(
      written.map((record) => record.data).sort(),
    );
    const perKey = new Map<string, number[]>();
    for (const record of seen) {
      const index = Number(Buffer.from(record.data).toString().slice(1));
      perKey.set(record.partitionKey, [...(perKey.get(record.partitionKey) ?? []), index]);
    }
    for (const indexes of perKey.values()) expect(indexes).toEqual([...indexes].sort((a, b) => a - b));
    const leases = await store.leases.list();
    expect(leases).toHaveLength(2);
    for (const lease of leases) {
      expect(lease.owner).toBeNull();
      expect(lease.checkpoint.isSentinel).toBe(false);
    }
    expect(events.filter((event) => event.type === 'lease-taken')).toHaveLength(2);
    expect(events.filter((event) => event.type === 'lease-released')).toHaveLength(2);
    expect(consumer.status().state).toBe('stopped');
    expect(ExtendedSequenceNumber.LATEST.isBefore(leases[0]!.checkpoint)).toBe(true);
  });
});

describe('the heartbeat', () => {
  it("publishes each held lease's figures: lag, last checkpoint time, throughput", async () => {
    const streamName = 'heartbeat-figures';
    await createStream(kinesis.client, streamName, 1);
    const store = createMemoryLeaseStore({ applicationName: 'app-figures', table: new MemoryLeaseTable() });
    let processed = 0;
    const consumer = createConsumer({
      streamName,
      applicationName: 'app-figures',
      workerId: 'worker-1',
      kinesis: kinesis.newClient(),
      leaseStore: store,
      initialPosition: 'TRIM_HORIZON',
      ...fast,
      processor: (): RecordProcessor => ({
        async processRecords({ records, checkpointer }) {
          processed += records.length;
          await checkpointer.checkpoint();
        },
      }),
    });
    await consumer.start();
    try {
      const published = async () => {
        const [worker] = await store.workers.list();
        return decodeLeaseFigures(worker?.metadata[LEASE_FIGURES_METADATA_KEY])?.leases ?? [];
      };
      let busiest = 0;
      for (let round = 0; round < 5; round++) {
        await putRecords(
          kinesis.client,
          streamName,
          Array.from({ length: 50 }, (_, index) => ({
            partitionKey: `k${index}`,
            data: `r${round}-${index}`,
          })),
        );
        await until(() => processed >= (round + 1) * 50, 20_000, `round ${round} processed`);
        busiest = Math.max(busiest, ...(await published()).map((figures) => figures.recordsPerSecond));
      }
      await until(
        async () => {
          const [figures] = await published();
          return figures?.millisBehindLatest !== null && figures?.lastCheckpointAt !== null;
        },
        5_000,
        'the figures of the lease in the worker registry',
      );
      const [figures] = await published();
      expect(figures?.leaseKey).toBe('shardId-000000000000');
      expect(figures?.lastCheckpointAt?.getTime()).toBeGreaterThan(Date.now() - 60_000);
      expect(busiest).toBeGreaterThan(0);
    } finally {
      await consumer.stop();
    }
  });
});
