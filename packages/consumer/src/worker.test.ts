import type { Shard } from '@aws-sdk/client-kinesis';
import type { KclEvent } from '@kcl/core';
import { ExtendedSequenceNumber, noopLogger } from '@kcl/core';
import { createFaultyLeaseStore, createMemoryLeaseStore, ManualClock, MemoryLeaseTable } from '@kcl/testkit';
import { describe, expect, it, vi } from 'vitest';
import { type ConsumerOptions, resolveConsumerOptions } from './consumer-options.js';
import type { StreamReader } from './kinesis/kinesis-stream.js';
import { createLeasePlanner } from './leases/lease-planner.js';
import { LeaseFigureTracker } from './metrics/lease-figure-tracker.js';
import { WorkerMetrics } from './metrics/worker-metrics.js';
import { Worker } from './worker.js';

const HALF = '170141183460469231731687303715884105727';
const shards: Shard[] = [
  {
    ShardId: 'shardId-000000000000',
    HashKeyRange: { StartingHashKey: '0', EndingHashKey: HALF },
    SequenceNumberRange: { StartingSequenceNumber: '1' },
  },
  {
    ShardId: 'shardId-000000000001',
    HashKeyRange: {
      StartingHashKey: (BigInt(HALF) + 1n).toString(),
      EndingHashKey: ((1n << 128n) - 1n).toString(),
    },
    SequenceNumberRange: { StartingSequenceNumber: '2' },
  },
];

/** A stream of two empty shards: timing tests need leases, not records. */
const emptyStream: StreamReader = {
  name: 'empty',
  listShards: async () => shards,
  getShardIterator: async (shardId) => `iterator-${shardId}`,
  getRecords: async (iterator) => ({ Records: [], NextShardIterator: iterator, MillisBehindLatest: 0 }),
};

const timing = {
  leaseRenewIntervalMs: 1_000,
  leaseExpiryMs: 3_000,
  rebalanceIntervalMs: 2_000,
  shardSyncIntervalMs: 600_000,
  leaseCleanupIntervalMs: 600_000,
  pollIntervalMs: 500,
};

function buildWorker(
  workerId: string,
  clock: ManualClock,
  table: MemoryLeaseTable,
  events: KclEvent[] = [],
  overrides: Partial<ConsumerOptions> = {},
) {
  const store = createFaultyLeaseStore(
    createMemoryLeaseStore({ applicationName: 'timing', table, now: () => clock.now() }),
    {
      clock,
    },
  );
  const random = () => 0.5; // no jitter: intervals are exact
  const options = resolveConsumerOptions(
    {
      streamName: 'empty',
      applicationName: 'timing',
      workerId,
      kinesis: { region: 'us-east-1' },
      leaseStore: store,
      initialPosition: 'TRIM_HORIZON',
      processor: () => ({ processRecords() {} }),
      ...timing,
      ...overrides,
    },
    random,
  );
  const worker = new Worker({
    registerStreamConsumer: null,
    options,
    store,
    stream: emptyStream,
    processorFactory: () => ({ processRecords() {} }),
    onProcessingError: null,
    planner: createLeasePlanner({
      workerId,
      leaseExpiryMs: options.leaseExpiryMs,
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
  return { worker, store };
}

/** Two leases owned by a worker that never renews (and never answers a hand-off). */
async function seedDeadOwner(table: MemoryLeaseTable): Promise<void> {
  const seed = createMemoryLeaseStore({ applicationName: 'timing', table });
  for (const shard of shards) {
    await seed.leases.create({
      leaseKey: shard.ShardId ?? '',
      checkpoint: ExtendedSequenceNumber.TRIM_HORIZON,
      owner: 'dead',
    });
  }
}

async function start(worker: Worker, clock: ManualClock): Promise<void> {
  const starting = worker.start();
  await clock.advance(0);
  await starting;
}

describe('worker timing (manual clock)', () => {
  it('renews its leases every renew interval and heartbeats with them', async () => {
    const clock = new ManualClock();
    const { worker, store } = buildWorker('w1', clock, new MemoryLeaseTable());
    await start(worker, clock);
    await clock.advance(100);
    expect(worker.status()).toHaveLength(2);
    const renewalsAtStart = store.faults.calls('leases.renewMany');
    await clock.advance(4_950);
    expect(store.faults.calls('leases.renewMany') - renewalsAtStart).toBe(5);
    expect(store.faults.calls('workers.heartbeat')).toBe(1 + 5);
    const stopping = worker.stop(true);
    await clock.advance(0);
    await stopping;
  });

  it('rebalances every rebalance interval', async () => {
    const clock = new ManualClock();
    const { worker, store } = buildWorker('w1', clock, new MemoryLeaseTable());
    await start(worker, clock);
    const listings = store.faults.calls('workers.list');
    await clock.advance(10_000);
    expect(store.faults.calls('workers.list') - listings).toBe(5);
    const stopping = worker.stop(true);
    await clock.advance(0);
    await stopping;
  });

  it('publishes its renew interval in its heartbeat metadata (tools judge its liveness by it)', async () => {
    const clock = new ManualClock();
    const { worker, store } = buildWorker('w1', clock, new MemoryLeaseTable());
    await start(worker, clock);
    await clock.advance(1_000);
    const [record] = await store.workers.list();
    expect(record?.metadata.leaseRenewIntervalMs).toBe('1000');
    const stopping = worker.stop(true);
    await clock.advance(0);
    await stopping;
  });

  it('heartbeats without figures when they cannot be computed', async () => {
    const failing = vi.spyOn(LeaseFigureTracker.prototype, 'publish').mockImplementation(() => {
      throw new Error('figures failed');
    });
    try {
      const clock = new ManualClock();
      const { worker, store } = buildWorker('w1', clock, new MemoryLeaseTable());
      await start(worker, clock);
      const beats = store.faults.calls('workers.heartbeat');
      await clock.advance(3_000);
      expect(store.faults.calls('workers.heartbeat') - beats).toBe(3);
      const [record] = await store.workers.list();
      expect(record?.metadata.leaseFigures).toBe('{"v":1,"l":[],"o":0}');
      const stopping = worker.stop(true);
      await clock.advance(0);
      await stopping;
    } finally {
      failing.mockRestore();
    }
  });

  it('lists the workers without their metadata to rebalance (their lease figures are kilobytes each)', async () => {
    const clock = new ManualClock();
    const { worker, store } = buildWorker('w1', clock, new MemoryLeaseTable());
    const registry = store.workers as { list: typeof store.workers.list };
    const list = registry.list.bind(store.workers);
    const asked: unknown[] = [];
    registry.list = (options) => {
      asked.push(options?.metadata);
      return list(options);
    };
    await start(worker, clock);
    await clock.advance(4_000);
    expect(asked.length).toBeGreaterThan(0);
    expect(asked.every((metadata) => metadata === false)).toBe(true);
    const stopping = worker.stop(true);
    await clock.advance(0);
    await stopping;
  });

  it('takes a dead worker’s lease only after the lease expiry, at the next rebalance (direct steals)', async () => {
    const clock = new ManualClock();
    const table = new MemoryLeaseTable();
    const events: KclEvent[] = [];
    await seedDeadOwner(table);
    const { worker } = buildWorker('w1', clock, table, events, { handoff: false });
    await start(worker, clock);
    const taken = () =>
      events.flatMap((event) =>
        event.type === 'lease-taken' ? [{ stolen: event.stolen, owner: event.previousOwner }] : [],
      );
    // The dead worker still looks alive (first sight of an owned lease is fresh): w1 evens out by stealing one.
    expect(taken()).toEqual([{ stolen: true, owner: 'dead' }]);
    expect(events.some((event) => event.type === 'lease-handoff')).toBe(false);
    await clock.advance(2_999);
    expect(taken()).toHaveLength(1);
    // Rebalances run at 2 000 and 4 000: the one at 4 000 sees the other lease unchanged for 3 s, expired.
    await clock.advance(1_001);
    expect(taken()).toEqual([
      { stolen: true, owner: 'dead' },
      { stolen: false, owner: 'dead' },
    ]);
    const stopping = worker.stop(true);
    await clock.advance(0);
    await stopping;
  });

  it('asks a live-looking owner for a lease, and steals it when the hand-off times out', async () => {
    const clock = new ManualClock();
    const table = new MemoryLeaseTable();
    const events: KclEvent[] = [];
    await seedDeadOwner(table);
    // handoffTimeoutMs: 1 500 (leaseExpiryMs / 2), checked every 375 ms.
    const { worker } = buildWorker('w1', clock, table, events);
    await start(worker, clock);
    const steps = () => events.flatMap((event) => (event.type === 'lease-handoff' ? [event.step] : []));
    const taken = () => events.filter((event) => event.type === 'lease-taken');
    expect(steps()).toEqual(['requested']);
    expect(taken()).toHaveLength(0);
    // Counted as w1's while it waits: the rebalance at 2 000 asks for nothing more.
    await clock.advance(1_499);
    expect(taken()).toHaveLength(0);
    await clock.advance(376);
    expect(steps()).toEqual(['requested', 'fell-back']);
    expect(taken()).toMatchObject([{ previousOwner: 'dead', stolen: true }]);
    expect(worker.status()).toHaveLength(1);
    const stopping = worker.stop(true);
    await clock.advance(0);
    await stopping;
  });

  it('gives leases up at the exact expiry when the store is unreachable, and takes them back after', async () => {
    const clock = new ManualClock();
    const events: KclEvent[] = [];
    const { worker, store } = buildWorker('w1', clock, new MemoryLeaseTable(), events);
    await start(worker, clock);
    await clock.advance(1_000); // renewal sent at 1 000 succeeds
    expect(worker.status()).toHaveLength(2);
    store.faults.setUnavailable();
    await clock.advance(3_000); // lease valid through 4 000
    expect(events.filter((event) => event.type === 'lease-lost')).toHaveLength(0);
    await clock.advance(2);
    expect(
      events
        .filter((event) => event.type === 'lease-lost')
        .map((event) => event.type === 'lease-lost' && event.reason),
    ).toEqual(['expired', 'expired']);
    await clock.advance(10);
    expect(worker.status()).toHaveLength(0);
    store.faults.restore();
    await clock.advance(2_000);
    expect(worker.status()).toHaveLength(2);
    const stopping = worker.stop(true);
    await clock.advance(0);
    await stopping;
  });

  it('releases its leases on a graceful stop so a peer takes them at its next rebalance', async () => {
    const clock = new ManualClock();
    const table = new MemoryLeaseTable();
    const events: KclEvent[] = [];
    const first = buildWorker('w1', clock, table, events);
    await start(first.worker, clock);
    await clock.advance(10);
    const second = buildWorker('w2', clock, table, events);
    await start(second.worker, clock);
    await clock.advance(10);
    // w2 evened the fleet out by asking for one lease; w1 sees the request at its renewal at 1 000 and
    // hands it over; w2 finds it handed over at its next check (every 375 ms).
    await clock.advance(1_200);
    expect([first.worker.status().length, second.worker.status().length]).toEqual([1, 1]);
    expect(
      events.flatMap((event) => (event.type === 'lease-handoff' ? [[event.workerId, event.step]] : [])),
    ).toEqual([
      ['w2', 'requested'],
      ['w1', 'completed'],
      ['w2', 'received'],
    ]);
    expect(events.filter((event) => event.type === 'lease-lost')).toEqual([]);
    const stopping = first.worker.stop(true);
    await clock.advance(0);
    await stopping;
    const leases = await first.store.leases.list();
    expect(leases.map((lease) => lease.owner).sort()).toEqual([null, 'w2'].sort());
    await clock.advance(2_000);
    expect(second.worker.status()).toHaveLength(2);
    const stoppingSecond = second.worker.stop(true);
    await clock.advance(0);
    await stoppingSecond;
  });
});
