import type { KinesisRecord, MetricDatum, RecordProcessor } from '@kcl/consumer';
import { createPipelineProcessorFactory } from '@kcl/consumer';
import { ExtendedSequenceNumber, hashKeyRange, MAX_HASH_KEY, noopLogger } from '@kcl/core';
import { describe, expect, it } from 'vitest';
import { SIMULATION_TIMINGS } from '../src/fleet-simulation.js';
import { Scenario } from '../src/scenario.js';

/**
 * Deterministic reproductions of the defects the fleet simulation was built to find: each meets two
 * mechanisms at a chosen moment, on simulated time. Each failed before its fix.
 */

const TIMINGS = { ...SIMULATION_TIMINGS, storeCallTimeoutMs: 1_000 };
const text = (record: Pick<KinesisRecord, 'data'>): string => Buffer.from(record.data).toString();

/** Records handled per payload, and when. */
class Handled {
  readonly counts = new Map<string, number>();
  readonly order: string[] = [];

  add(record: KinesisRecord): void {
    const label = text(record);
    this.counts.set(label, (this.counts.get(label) ?? 0) + 1);
    this.order.push(label);
  }

  has(key: string, count: number): boolean {
    for (let index = 1; index <= count; index++) if (!this.counts.has(`${key}#${index}`)) return false;
    return true;
  }

  get distinct(): number {
    return this.counts.size;
  }
}

describe('a graceful stop during a closed shard’s final batch (defect 1)', () => {
  it('leaves the parent short of SHARD_END and loses nothing, with a processor that returns early on abort', async () => {
    const scenario = new Scenario({ shards: 1 });
    scenario.put('k', 300);
    scenario.stream.split('shardId-000000000000');
    const handled = new Handled();
    let handledAtShardEnd: number | null = null;
    const processor = (): RecordProcessor => ({
      async processRecords({ records, checkpointer, signal }) {
        for (const record of records) {
          if (signal.aborted) return;
          handled.add(record);
          await scenario.clock.sleep(10);
        }
        await checkpointer.checkpoint();
      },
      async shardEnded({ checkpointer }) {
        handledAtShardEnd ??= handled.distinct;
        await checkpointer.checkpoint();
      },
      async shutdownRequested({ checkpointer }) {
        await checkpointer.checkpoint();
      },
    });
    const first = scenario.worker('W1', { ...TIMINGS, processor });
    await scenario.runUntil(() => handled.distinct >= 40, 10_000, 10);
    expect(await scenario.timed(first.consumer.stop(), 10_000)).not.toBeNull();
    expect(handled.distinct).toBeLessThan(300);
    expect(scenario.lease('shardId-000000000000')?.checkpoint.isShardEnd).toBe(false);
    expect(handledAtShardEnd).toBeNull();

    scenario.worker('W2', { ...TIMINGS, processor });
    expect(
      await scenario.runUntil(
        () => scenario.lease('shardId-000000000000')?.checkpoint.isShardEnd === true,
        30_000,
      ),
    ).toBe(true);
    expect(handled.has('k', 300)).toBe(true);
    expect(handledAtShardEnd).toBe(300);
  });

  it('does the same for a pipeline that had admitted only part of the final batch', async () => {
    const scenario = new Scenario({ shards: 1 });
    scenario.put('k', 200);
    scenario.stream.split('shardId-000000000000');
    const handled = new Handled();
    let endedWith: number | null = null;
    const pipeline = () =>
      createPipelineProcessorFactory(
        {
          partitionBy: (message) => message.record.partitionKey,
          processors: { maxDemand: 10, minDemand: 5 },
          handleMessage: async (message) => {
            await scenario.clock.sleep(10);
            handled.add(message.record);
          },
          checkpoint: { intervalMs: 100, everyMessages: 10 },
          drainTimeoutMs: 500,
        },
        { clock: scenario.clock, random: () => 0.5, logger: noopLogger },
      );
    const first = scenario.worker('W1', { ...TIMINGS, processor: pipeline() });
    await scenario.runUntil(() => handled.distinct >= 40, 10_000, 10);
    await scenario.timed(first.consumer.stop(), 10_000);
    expect(handled.distinct).toBeLessThan(200);
    expect(scenario.lease('shardId-000000000000')?.checkpoint.isShardEnd).toBe(false);

    const wrap = pipeline();
    scenario.worker('W2', {
      ...TIMINGS,
      processor: (shardId, context) => {
        const inner = wrap(shardId, context);
        return {
          processRecords: (input) => inner.processRecords(input),
          shutdownRequested: (input) => inner.shutdownRequested(input),
          leaseLost: () => inner.leaseLost(),
          async shardEnded(input) {
            endedWith ??= handled.distinct;
            await inner.shardEnded(input);
          },
        };
      },
    });
    expect(
      await scenario.runUntil(
        () => scenario.lease('shardId-000000000000')?.checkpoint.isShardEnd === true,
        30_000,
      ),
    ).toBe(true);
    expect(handled.has('k', 200)).toBe(true);
    expect(endedWith).not.toBeNull();
  });
});

describe('a retry after a mid-batch checkpoint (defect 2)', () => {
  it('gets only the records after the checkpoint, so the shard completes', async () => {
    const scenario = new Scenario({ shards: 1 });
    scenario.put('k', 20);
    scenario.stream.split('shardId-000000000000');
    const handled = new Handled();
    const deliveries: string[][] = [];
    let thrown = false;
    scenario.worker('W1', {
      ...TIMINGS,
      processor: () => ({
        async processRecords({ records, checkpointer }) {
          deliveries.push(records.map(text));
          for (const record of records) {
            handled.add(record);
            await checkpointer.checkpointRecord(record);
            if (!thrown && text(record) === 'k#7') {
              thrown = true;
              throw new Error('downstream hiccup after checkpointing k#7');
            }
          }
        },
      }),
    });
    expect(
      await scenario.runUntil(
        () => scenario.lease('shardId-000000000000')?.checkpoint.isShardEnd === true,
        20_000,
      ),
    ).toBe(true);
    expect(handled.has('k', 20)).toBe(true);
    expect(deliveries[1]?.[0]).toBe('k#8');
  });
});

describe('a renewal that returns after the lease expired locally (defect 3)', () => {
  it('never leaves a held lease without a consumer: the shard goes on being read', async () => {
    const scenario = new Scenario({ shards: 1 });
    const handled = new Handled();
    const worker = scenario.worker('W1', {
      ...TIMINGS,
      storeCallTimeoutMs: 2_800,
      // A pipeline checkpoints on its own schedule (here: rarely), so only renewals keep the lease.
      processor: createPipelineProcessorFactory(
        {
          handleMessage: (message) => handled.add(message.record),
          checkpoint: { intervalMs: 60_000, everyMessages: 100_000 },
        },
        { clock: scenario.clock, random: () => 0.5, logger: noopLogger },
      ),
    });
    scenario.put('before', 5);
    await scenario.runUntil(() => handled.has('before', 5), 5_000);
    // A renewal is sent a renew interval after the last one and answers 2.5 s later: after the lease
    // expired locally (at last renewal + 3 s), yet within 3 s of its own sending.
    worker.storeFaults.setLatency((operation) => (operation === 'leases.renewMany' ? 2_500 : 0));
    // Records keep coming, so the consumer looks at its lease while the late renewal is on its way.
    for (let tick = 0; tick < 30; tick++) {
      scenario.put(`during-${tick}`, 1);
      await scenario.run(100);
    }
    worker.storeFaults.setLatency(0);
    scenario.put('after', 10);
    expect(await scenario.runUntil(() => handled.has('after', 10), 15_000)).toBe(true);
  });
});

describe('a lease taken again by the same worker (defect 4)', () => {
  it('starts no second consumer while the previous one is still inside processRecords', async () => {
    const scenario = new Scenario({ shards: 1 });
    scenario.put('k', 5);
    let live = 0;
    let most = 0;
    let calls = 0;
    const worker = scenario.worker('W1', {
      ...TIMINGS,
      processor: () => {
        live += 1;
        most = Math.max(most, live);
        return {
          async processRecords({ checkpointer }) {
            calls += 1;
            // The first delivery takes long (ignoring that the lease is lost meanwhile), though less
            // than shutdownTimeoutMs past the loss, after which a stuck consumer would be abandoned.
            if (calls === 1) await scenario.clock.sleep(5_000);
            await checkpointer.checkpoint().catch(() => undefined);
          },
          leaseLost() {
            live -= 1;
          },
          shardEnded: async ({ checkpointer }) => {
            await checkpointer.checkpoint();
            live -= 1;
          },
        };
      },
    });
    await scenario.run(500);
    // Renewals fail until the lease expires; the worker then finds its own stale lease and takes it back.
    worker.storeFaults.failNext(6, { operations: ['leases.renewMany'] });
    await scenario.run(12_000);
    expect(worker.events.some((event) => event.type === 'lease-lost')).toBe(true);
    expect(most).toBe(1);
    expect(calls).toBeGreaterThan(1);
  });
});

describe('a consumer stuck after losing its lease', () => {
  it('is abandoned after shutdownTimeoutMs: the lease is read again, and the stuck one’s checkpoint is refused', async () => {
    const scenario = new Scenario({ shards: 1 });
    scenario.put('k', 5);
    const checkpoints: string[] = [];
    let calls = 0;
    const worker = scenario.worker('W1', {
      ...TIMINGS,
      processor: () => ({
        async processRecords({ checkpointer }) {
          calls += 1;
          const call = calls;
          if (call === 1) await scenario.clock.sleep(20_000);
          await checkpointer.checkpoint().then(
            () => checkpoints.push(`call ${call}: written`),
            (error: Error) => checkpoints.push(`call ${call}: ${error.name}`),
          );
        },
      }),
    });
    await scenario.run(500);
    worker.storeFaults.failNext(6, { operations: ['leases.renewMany'] });
    await scenario.run(25_000);
    expect(calls).toBeGreaterThan(1);
    expect(checkpoints).toContain('call 2: written');
    expect(checkpoints).toContain('call 1: LeaseLostError');
  });
});

describe('calls that never answer (defect 5)', () => {
  it('aborts a hung GetRecords after kinesisCallTimeoutMs and reads on', async () => {
    const scenario = new Scenario({ shards: 1 });
    const handled = new Handled();
    const worker = scenario.worker('W1', {
      ...TIMINGS,
      processor: () => ({
        async processRecords({ records, checkpointer }) {
          for (const record of records) handled.add(record);
          await checkpointer.checkpoint();
        },
      }),
    });
    await scenario.run(1_000);
    worker.kinesis.faults = { ...worker.kinesis.faults, hang: 1 };
    await scenario.run(1_000);
    worker.kinesis.faults = { ...worker.kinesis.faults, hang: 0 };
    scenario.put('k', 10);
    expect(await scenario.runUntil(() => handled.has('k', 10), 10_000)).toBe(true);
  });

  it('gives a lease up at its expiry while the renewal hangs, and stops delivering to the pipeline', async () => {
    const scenario = new Scenario({ shards: 1 });
    const delivered: number[] = [];
    const worker = scenario.worker('W1', {
      ...TIMINGS,
      storeCallTimeoutMs: 2_500,
      processor: createPipelineProcessorFactory(
        {
          handleMessage: async () => {
            delivered.push(scenario.clock.monotonicNow());
            await scenario.clock.sleep(50);
          },
          checkpoint: { intervalMs: 100_000, everyMessages: 100_000 },
        },
        { clock: scenario.clock, random: () => 0.5, logger: noopLogger },
      ),
    });
    await scenario.run(500);
    worker.storeFaults.hangNext(100, Number.POSITIVE_INFINITY);
    const hungAt = scenario.clock.monotonicNow();
    scenario.put('k', 400);
    await scenario.run(15_000);
    expect(worker.events).toContainEqual(expect.objectContaining({ type: 'lease-lost', reason: 'expired' }));
    // Nothing was delivered later than the lease's expiry after the store stopped answering.
    expect(Math.max(...delivered)).toBeLessThanOrEqual(hungAt + TIMINGS.leaseExpiryMs + 100);
  });
});

describe('a graceful stop at a shard’s end (defect 6)', () => {
  it('ends within shutdownTimeoutMs while a poison message keeps the pipeline from draining', async () => {
    const scenario = new Scenario({ shards: 1 });
    scenario.put('k', 10);
    scenario.stream.split('shardId-000000000000');
    const worker = scenario.worker('W1', {
      ...TIMINGS,
      processor: createPipelineProcessorFactory(
        {
          handleMessage: (message) => {
            if (text(message.record) === 'k#5') throw new Error('poison');
          },
          retry: { initialMs: 50, maxMs: 200 },
          drainTimeoutMs: 1_000,
        },
        { clock: scenario.clock, random: () => 0.5, logger: noopLogger },
      ),
    });
    await scenario.run(2_000);
    const took = await scenario.timed(worker.consumer.stop(), 20_000);
    expect(took).not.toBeNull();
    expect(took).toBeLessThanOrEqual(TIMINGS.shutdownTimeoutMs);
    expect(scenario.lease('shardId-000000000000')?.checkpoint.isShardEnd).toBe(false);
    expect(scenario.lease('shardId-000000000000')?.owner).toBeNull();
  });

  it('runs shardEnded once when the release after SHARD_END fails', async () => {
    const scenario = new Scenario({ shards: 1 });
    scenario.put('k', 10);
    scenario.stream.split('shardId-000000000000');
    let shardEnded = 0;
    const worker = scenario.worker('W1', {
      ...TIMINGS,
      processor: () => ({
        async processRecords({ checkpointer }) {
          await checkpointer.checkpoint();
        },
        async shardEnded({ checkpointer }) {
          shardEnded += 1;
          await checkpointer.checkpoint();
        },
      }),
    });
    worker.storeFaults.failNext(1, { operations: ['leases.release'] });
    await scenario.run(5_000);
    expect(scenario.lease('shardId-000000000000')?.checkpoint.isShardEnd).toBe(true);
    expect(shardEnded).toBe(1);
    expect(await scenario.timed(worker.consumer.stop(), 10_000)).toBeLessThanOrEqual(
      TIMINGS.shutdownTimeoutMs,
    );
  });
});

describe('the hash-range audit (defect 7)', () => {
  it('fills a lease’s missing hash range from the listing and then repairs the hole', async () => {
    const scenario = new Scenario({ shards: 2 });
    // An imported table: shard 0's lease has no hash range, shard 1 has no lease at all.
    await scenario.store.leases.create({
      leaseKey: 'shardId-000000000000',
      checkpoint: ExtendedSequenceNumber.TRIM_HORIZON,
    });
    scenario.worker('W1', {
      ...TIMINGS,
      processor: () => ({ processRecords: async () => {} }),
    });
    expect(await scenario.runUntil(() => scenario.lease('shardId-000000000001') !== undefined, 30_000)).toBe(
      true,
    );
    const half = (MAX_HASH_KEY + 1n) / 2n;
    expect(scenario.lease('shardId-000000000000')?.hashKeyRange).toEqual(hashKeyRange(0n, half - 1n));
  });
});

describe('a deleted stream', () => {
  it('finishes its leases and deletes them, and says so in a metric', async () => {
    const scenario = new Scenario({ shards: 2 });
    scenario.put('k', 10);
    const metrics: MetricDatum[] = [];
    scenario.worker('W1', {
      ...TIMINGS,
      metrics: { record: (datum) => metrics.push(datum) },
      processor: () => ({
        async processRecords({ checkpointer }) {
          await checkpointer.checkpoint();
        },
      }),
    });
    await scenario.run(2_000);
    scenario.stream.delete();
    expect(
      await scenario.runUntil(() => scenario.table.rawLeases(scenario.applicationName).length === 0, 30_000),
    ).toBe(true);
    expect(
      metrics.filter((datum) => datum.name === 'GarbageLeasesDeleted').reduce((sum, d) => sum + d.value, 0),
    ).toBe(2);
  });
});
