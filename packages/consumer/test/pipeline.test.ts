import { ExtendedSequenceNumber, noopLogger, systemClock, systemRandom } from '@kcl/core';
import { createMemoryLeaseStore, MemoryLeaseTable } from '@kcl/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createConsumer } from '../src/index.js';
import { createPipelineProcessorFactory } from '../src/pipeline/create-pipeline-processor-factory.js';
import type { PipelineMessage } from '../src/pipeline/pipeline-message.js';
import { FAST_TIMING } from './support/fleet.js';
import { createStream, type LocalKinesis, putRecords, startLocalKinesis, until } from './support/kinesis.js';

let kinesis: LocalKinesis;

beforeAll(async () => {
  kinesis = await startLocalKinesis();
});
afterAll(async () => {
  await kinesis?.stop();
});

function indexOf(message: PipelineMessage): number {
  return Number(Buffer.from(message.data).toString().slice(1));
}

describe('a consumer running a pipeline', () => {
  it('handles every record, keeps per-key order under concurrency 4 and checkpoints the last record', async () => {
    const streamName = 'pipeline-stream';
    const applicationName = 'app-pipeline';
    await createStream(kinesis.client, streamName, 2);
    const written = Array.from({ length: 400 }, (_, index) => ({
      partitionKey: `key-${index % 12}`,
      data: `r${index}`,
    }));
    await putRecords(kinesis.client, streamName, written);

    const messageOrder = new Map<string, number[]>();
    const batchOrder = new Map<string, number[]>();
    const lastSequenceByShard = new Map<string, ExtendedSequenceNumber>();
    // Concurrency is per shard: each lease runs its own pipeline.
    const activeByShard = new Map<string, number>();
    let maxActive = 0;
    let batched = 0;

    const processor = createPipelineProcessorFactory(
      {
        partitionBy: (message) => message.record.partitionKey,
        processors: { concurrency: 4, minDemand: 10, maxDemand: 20 },
        batchers: { concurrency: 2, batchSize: 25, batchTimeoutMs: 100 },
        checkpoint: { intervalMs: 200, everyMessages: 50 },
        handleMessage: async (message) => {
          const active = (activeByShard.get(message.shardId) ?? 0) + 1;
          activeByShard.set(message.shardId, active);
          maxActive = Math.max(maxActive, active);
          const key = message.record.partitionKey;
          messageOrder.set(key, [...(messageOrder.get(key) ?? []), indexOf(message)]);
          await new Promise((resolve) => setTimeout(resolve, indexOf(message) % 3));
          activeByShard.set(message.shardId, (activeByShard.get(message.shardId) ?? 1) - 1);
        },
        handleBatch: async (messages) => {
          for (const message of messages) {
            const key = message.record.partitionKey;
            batchOrder.set(key, [...(batchOrder.get(key) ?? []), indexOf(message)]);
            const position = ExtendedSequenceNumber.of(
              message.record.sequenceNumber,
              message.record.subSequenceNumber,
            );
            const last = lastSequenceByShard.get(message.shardId);
            if (last === undefined || position.isAfter(last))
              lastSequenceByShard.set(message.shardId, position);
          }
          batched += messages.length;
        },
      },
      { clock: systemClock, random: systemRandom, logger: noopLogger },
    );

    const store = createMemoryLeaseStore({ applicationName, table: new MemoryLeaseTable() });
    const consumer = createConsumer({
      streamName,
      applicationName,
      workerId: 'worker-1',
      kinesis: kinesis.newClient(),
      leaseStore: store,
      initialPosition: 'TRIM_HORIZON',
      ...FAST_TIMING,
      processor,
    });
    await consumer.start();
    try {
      await until(() => batched >= 400, 30_000, 'every record through handleBatch');
      // The interval checkpoint catches up with the last acknowledged record while the consumer runs.
      const deadline = Date.now() + 10_000;
      for (;;) {
        const leases = await store.leases.list();
        const caughtUp = leases.every((lease) => {
          const last = lastSequenceByShard.get(lease.leaseKey);
          return last !== undefined && lease.checkpoint.equals(last);
        });
        if (caughtUp || Date.now() > deadline) break;
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    } finally {
      await consumer.stop();
    }

    expect(batched).toBe(400);
    const expectedPerKey = new Map<string, number[]>();
    for (const [index, record] of written.entries()) {
      expectedPerKey.set(record.partitionKey, [...(expectedPerKey.get(record.partitionKey) ?? []), index]);
    }
    expect(messageOrder).toEqual(expectedPerKey);
    expect(batchOrder).toEqual(expectedPerKey);
    expect(maxActive).toBeGreaterThan(1);
    expect(maxActive).toBeLessThanOrEqual(4);

    const leases = await store.leases.list();
    expect(leases).toHaveLength(2);
    for (const lease of leases) {
      expect(lease.owner).toBeNull();
      expect(lease.checkpoint.toString()).toBe(lastSequenceByShard.get(lease.leaseKey)?.toString());
    }
  });
});
