import {
  createFaultyLeaseStore,
  createMemoryLeaseStore,
  type FaultyLeaseStore,
  MemoryLeaseTable,
} from '@kcl/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Fleet } from './support/fleet.js';
import {
  createStream,
  indexOf,
  type LocalKinesis,
  mergeShards,
  openShards,
  putRecords,
  records,
  splitShard,
  startLocalKinesis,
  until,
} from './support/kinesis.js';

let kinesis: LocalKinesis;
beforeAll(async () => {
  kinesis = await startLocalKinesis();
});
afterAll(async () => {
  await kinesis?.stop();
});

let streamCounter = 0;
async function newStream(shards: number): Promise<string> {
  streamCounter += 1;
  const name = `fleet-${streamCounter}`;
  await createStream(kinesis.client, name, shards);
  return name;
}

function memoryFleet(streamName: string, applicationName: string, options: { checkpoint?: boolean } = {}) {
  const table = new MemoryLeaseTable();
  return {
    table,
    fleet: new Fleet({
      streamName,
      applicationName,
      newClient: kinesis.newClient,
      store: () => createMemoryLeaseStore({ applicationName, table }),
      ...options,
    }),
  };
}

describe('a fleet of workers (in process, memory store)', () => {
  it('spreads 4 shards over 3 workers and processes every record once', async () => {
    const streamName = await newStream(4);
    const { fleet } = memoryFleet(streamName, 'spread');
    await Promise.all(['w1', 'w2', 'w3'].map((id) => fleet.add(id)));
    const written = records('r', 2_000, 200);
    await putRecords(kinesis.client, streamName, written);
    await until(() => fleet.distinct().size >= written.length, 30_000, 'all records');
    await until(
      () => ['w1', 'w2', 'w3'].every((id) => fleet.leasesHeldBy(id).length >= 1),
      10_000,
      'every worker holding a lease',
    );
    const counts = ['w1', 'w2', 'w3'].map((id) => fleet.leasesHeldBy(id).length).sort();
    expect(counts).toEqual([1, 1, 2]);
    await fleet.stopAll();
    expect(fleet.distinct().size).toBe(written.length);
    expect(fleet.duplicates()).toBe(0);
    expect(fleet.orderViolations(indexOf)).toBe(0);
  });

  it('resumes a crashed worker’s shards on the others, replaying only what was not checkpointed', async () => {
    const streamName = await newStream(2);
    const { fleet, table } = memoryFleet(streamName, 'crash');
    await fleet.add('w1');
    await fleet.add('w2');
    await until(
      () => fleet.leasesHeldBy('w1').length === 1 && fleet.leasesHeldBy('w2').length === 1,
      10_000,
      'balanced',
    );
    const first = records('c', 400, 50);
    await putRecords(kinesis.client, streamName, first);
    await until(() => fleet.distinct().size >= 400, 20_000, 'first batch');
    const store = createMemoryLeaseStore({ applicationName: 'crash', table });
    const crashedLease = fleet.leasesHeldBy('w1')[0] ?? '';
    const checkpointBefore = (await store.leases.get(crashedLease))?.checkpoint;
    const crashedAt = Date.now();
    await fleet.workers.get('w1')?.stop({ graceful: false });
    const second = records('c', 400, 50, 400);
    await putRecords(kinesis.client, streamName, second);
    await until(() => fleet.distinct().size >= 800, 30_000, 'all records after the crash');
    const takeover = fleet.processed.find(
      (record) => record.workerId === 'w2' && record.shardId === crashedLease && record.at > crashedAt,
    );
    // w2 took the crashed worker's shard over and processed records of it after the crash.
    expect(takeover).toMatchObject({ workerId: 'w2', shardId: crashedLease });
    // expiry (700) + rebalance (150 ± 25%) + a poll, with slack for a loaded machine
    expect((takeover?.at ?? Number.POSITIVE_INFINITY) - crashedAt).toBeLessThan(700 + 190 + 50 + 2_000);
    // Everything w1 processed was checkpointed, so nothing is processed twice.
    expect(checkpointBefore?.isSentinel).toBe(false);
    expect(fleet.duplicates()).toBe(0);
    await fleet.stopAll();
    expect(fleet.orderViolations(indexOf)).toBe(0);
  });

  it('replays exactly the records after the last checkpoint when a worker crashes without checkpointing them', async () => {
    const streamName = await newStream(1);
    const table = new MemoryLeaseTable();
    const store = createMemoryLeaseStore({ applicationName: 'replay', table });
    const lazy = new Fleet({
      streamName,
      applicationName: 'replay',
      newClient: kinesis.newClient,
      store: () => createMemoryLeaseStore({ applicationName: 'replay', table }),
      checkpoint: false,
    });
    await lazy.add('lazy');
    await putRecords(kinesis.client, streamName, records('p', 100, 10));
    await until(() => lazy.distinct().size >= 100, 20_000, 'first records');
    // Checkpoint half-way by hand, as the crashed worker's last checkpoint.
    const lease = (await store.leases.list())[0];
    const midpoint = lazy.processed[49];
    if (lease === undefined || midpoint === undefined) throw new Error('no lease');
    const writes = await store.leases.checkpoint(lease.leaseKey, lease.leaseCounter, {
      checkpoint: (await import('@kcl/core')).ExtendedSequenceNumber.of(midpoint.sequenceNumber),
    });
    expect(writes.ok).toBe(true);
    await lazy.workers.get('lazy')?.stop({ graceful: false });
    const heir = new Fleet({
      streamName,
      applicationName: 'replay',
      newClient: kinesis.newClient,
      store: () => createMemoryLeaseStore({ applicationName: 'replay', table }),
    });
    await heir.add('heir');
    await until(() => heir.distinct().size >= 50, 20_000, 'replayed records');
    await heir.stopAll();
    expect(heir.processed.map((record) => record.data)).toEqual(
      lazy.processed.slice(50).map((record) => record.data),
    );
  });

  it('hands a gracefully stopped worker’s shards over without processing any record twice', async () => {
    const streamName = await newStream(3);
    const { fleet } = memoryFleet(streamName, 'graceful');
    await Promise.all(['w1', 'w2', 'w3'].map((id) => fleet.add(id)));
    await until(
      () => ['w1', 'w2', 'w3'].every((id) => fleet.leasesHeldBy(id).length === 1),
      10_000,
      'balanced',
    );
    let producing = true;
    let offset = 0;
    const producer = (async () => {
      while (producing) {
        await putRecords(kinesis.client, streamName, records('g', 50, 30, offset));
        offset += 50;
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    })();
    await until(() => fleet.distinct().size >= 300, 20_000, 'records flowing');
    const leaving = fleet.leasesHeldBy('w2');
    const stoppedAt = Date.now();
    await fleet.workers.get('w2')?.stop();
    await until(
      () =>
        leaving.every(
          (key) => fleet.leasesHeldBy('w1').includes(key) || fleet.leasesHeldBy('w3').includes(key),
        ),
      10_000,
      'takeover',
    );
    const takenAt = Date.now();
    producing = false;
    await producer;
    await until(() => fleet.distinct().size >= offset, 20_000, 'all records');
    await fleet.stopAll();
    expect(takenAt - stoppedAt).toBeLessThan(2 * 150 * 1.25 + 1_500);
    expect(fleet.duplicates()).toBe(0);
    expect(fleet.distinct().size).toBe(offset);
    expect(fleet.orderViolations(indexOf)).toBe(0);
  });

  it('follows a split and a merge while records flow, keeping each key in order', async () => {
    const streamName = await newStream(2);
    const { fleet, table } = memoryFleet(streamName, 'reshard');
    await fleet.add('w1');
    await fleet.add('w2');
    let producing = true;
    let offset = 0;
    const producer = (async () => {
      while (producing) {
        await putRecords(kinesis.client, streamName, records('s', 40, 60, offset));
        offset += 40;
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
    })();
    await until(() => fleet.distinct().size >= 200, 20_000, 'records flowing');
    const [first, second] = (await openShards(kinesis.client, streamName)).map(
      (shard) => shard.ShardId ?? '',
    );
    await splitShard(kinesis.client, streamName, first ?? '');
    await until(() => fleet.distinct().size >= offset - 40, 20_000, 'after split');
    const children = (await openShards(kinesis.client, streamName))
      .filter((shard) => shard.ParentShardId === first)
      .sort((a, b) =>
        BigInt(a.HashKeyRange?.StartingHashKey ?? 0) < BigInt(b.HashKeyRange?.StartingHashKey ?? 0) ? -1 : 1,
      );
    // Merge the upper child of the split with the other original shard (adjacent hash ranges).
    await mergeShards(kinesis.client, streamName, children[1]?.ShardId ?? '', second ?? '');
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    producing = false;
    await producer;
    await until(() => fleet.distinct().size >= offset, 30_000, 'all records');
    const store = createMemoryLeaseStore({ applicationName: 'reshard', table });
    await until(() => fleet.events.some((event) => event.type === 'shard-ended'), 10_000, 'a shard end');
    await fleet.stopAll();
    expect(fleet.distinct().size).toBe(offset);
    expect(fleet.orderViolations(indexOf)).toBe(0);
    // Children were created for both reshards; finished parents are deleted once their children started.
    const created = fleet.events.flatMap((event) =>
      event.type === 'leases-created' && event.cause === 'shard-end' ? event.leaseKeys : [],
    );
    expect(new Set(created).size).toBe(3);
    expect(fleet.events.filter((event) => event.type === 'shard-ended').length).toBe(3);
    const open = (await openShards(kinesis.client, streamName)).map((shard) => shard.ShardId).sort();
    const leases = await store.leases.list();
    for (const shardId of open) expect(leases.map((lease) => lease.leaseKey)).toContain(shardId);
    for (const lease of leases.filter((candidate) => candidate.checkpoint.isShardEnd)) {
      expect(lease.childShardIds.length).toBeGreaterThan(0);
    }
  });

  it('stops a worker cut off from the store before anyone else takes its shards, and lets it rejoin', async () => {
    const streamName = await newStream(2);
    const table = new MemoryLeaseTable();
    let cutOff: FaultyLeaseStore | undefined;
    const fleet = new Fleet({
      streamName,
      applicationName: 'outage',
      newClient: kinesis.newClient,
      store: (workerId) => {
        const store = createFaultyLeaseStore(createMemoryLeaseStore({ applicationName: 'outage', table }));
        if (workerId === 'w1') cutOff = store;
        return store;
      },
    });
    await fleet.add('w1');
    await fleet.add('w2');
    await until(
      () => fleet.leasesHeldBy('w1').length === 1 && fleet.leasesHeldBy('w2').length === 1,
      10_000,
      'balanced',
    );
    let producing = true;
    let offset = 0;
    const producer = (async () => {
      while (producing) {
        await putRecords(kinesis.client, streamName, records('o', 20, 20, offset));
        offset += 20;
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    })();
    await until(() => fleet.distinct().size >= 100, 20_000, 'records flowing');
    const shardOfW1 = fleet.leasesHeldBy('w1')[0] ?? '';
    const outageAt = Date.now();
    cutOff?.faults.setUnavailable();
    await until(
      () =>
        fleet.processed.some(
          (record) => record.workerId === 'w2' && record.shardId === shardOfW1 && record.at > outageAt,
        ),
      15_000,
      'w2 taking over',
    );
    const firstByW2 = Math.min(
      ...fleet.processed
        .filter((record) => record.workerId === 'w2' && record.shardId === shardOfW1 && record.at > outageAt)
        .map((record) => record.at),
    );
    const lastByW1 = Math.max(
      ...fleet.processed
        .filter((record) => record.workerId === 'w1' && record.shardId === shardOfW1)
        .map((record) => record.at),
    );
    expect(lastByW1).toBeLessThan(firstByW2);
    expect(fleet.events).toContainEqual({
      type: 'lease-lost',
      workerId: 'w1',
      leaseKey: shardOfW1,
      reason: 'expired',
    });
    cutOff?.faults.restore();
    await until(() => fleet.leasesHeldBy('w1').length === 1, 15_000, 'w1 rejoining');
    producing = false;
    await producer;
    await until(() => fleet.distinct().size >= offset, 20_000, 'all records');
    await fleet.stopAll();
    expect(fleet.distinct().size).toBe(offset);
  });

  it('re-adopts its own leases when restarted with the same worker id', async () => {
    const streamName = await newStream(2);
    const table = new MemoryLeaseTable();
    const options = {
      streamName,
      applicationName: 'restart',
      newClient: kinesis.newClient,
      store: () => createMemoryLeaseStore({ applicationName: 'restart', table }),
    };
    const before = new Fleet(options);
    await before.add('stable-id');
    await until(() => before.leasesHeldBy('stable-id').length === 2, 10_000, 'both leases');
    await before.workers.get('stable-id')?.stop({ graceful: false });
    const after = new Fleet(options);
    const restarted = await after.add('stable-id', { rebalanceIntervalMs: 60_000 });
    // Held at once, without waiting for the leases to expire or for a rebalance.
    expect(
      restarted
        .status()
        .leases.map((lease) => lease.leaseKey)
        .sort(),
    ).toHaveLength(2);
    expect(after.events.filter((event) => event.type === 'lease-taken')).toHaveLength(2);
    await after.stopAll();
  });
});
