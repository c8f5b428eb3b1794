import type { AttributeValue, DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { GetItemCommand, PutItemCommand, UpdateItemCommand } from '@aws-sdk/client-dynamodb';
import type { LeaseWriteResult } from '@kcl/core';
import { ExtendedSequenceNumber, MAX_HASH_KEY } from '@kcl/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DynamoLeaseStore } from '../src/index.js';
import { createDynamoLeaseStore } from '../src/index.js';
import { startLocalDynamo } from './local-dynamo.js';

// Items below are shaped as the Java KCL's DynamoDBLeaseSerializer (2.x, 3.x) and the KCL 3.5
// single-table DAO write them: attribute names, DynamoDB types, omitted empties.

const dynamo = await startLocalDynamo();
const LONG = '49590338271490256608559692538361571095921575989136588898';
const NEXT = '49590338271490256608559692538361571095921575989136599999';
const HALF = (1n << 127n).toString();
const MAX = MAX_HASH_KEY.toString();
const SHARD = (n: number): string => `shardId-${String(n).padStart(12, '0')}`;
type Item = Record<string, AttributeValue>;

/** Leases of a single-stream application after a split (0 → 2, 3) and a merge (2 + 3 → 4). */
const javaLeaseRows: Item[] = [
  // 2.x: finished parent, recorded its children at SHARD_END.
  {
    leaseKey: { S: SHARD(0) },
    leaseOwner: { S: 'java-worker-1' },
    leaseCounter: { N: '2204' },
    checkpoint: { S: 'SHARD_END' },
    checkpointSubSequenceNumber: { N: '0' },
    ownerSwitchesSinceCheckpoint: { N: '0' },
    childShardIds: { SS: [SHARD(2), SHARD(3)] },
    startingHashKey: { S: '0' },
    endingHashKey: { S: MAX },
  },
  // 2.x: an open shard mid-stream, with an aggregated-record checkpoint and a prepared checkpoint.
  {
    leaseKey: { S: SHARD(1) },
    leaseOwner: { S: 'java-worker-1' },
    leaseCounter: { N: '1523' },
    checkpoint: { S: LONG },
    checkpointSubSequenceNumber: { N: '3' },
    pendingCheckpoint: { S: NEXT },
    pendingCheckpointSubSequenceNumber: { N: '0' },
    pendingCheckpointState: { B: new Uint8Array([1, 2, 3]) },
    ownerSwitchesSinceCheckpoint: { N: '1' },
    startingHashKey: { S: '0' },
    endingHashKey: { S: MAX },
  },
  // 2.x: split children, finished and merged.
  ...[2, 3].map(
    (n): Item => ({
      leaseKey: { S: SHARD(n) },
      leaseOwner: { S: 'java-worker-2' },
      leaseCounter: { N: String(300 + n) },
      checkpoint: { S: 'SHARD_END' },
      checkpointSubSequenceNumber: { N: '0' },
      ownerSwitchesSinceCheckpoint: { N: '0' },
      parentShardId: { SS: [SHARD(0)] },
      childShardIds: { SS: [SHARD(4)] },
      startingHashKey: { S: n === 2 ? '0' : HALF },
      endingHashKey: { S: n === 2 ? ((1n << 127n) - 1n).toString() : MAX },
    }),
  ),
  // 3.x: a merge child with two parents, entityType written, throughput recorded on renewal.
  {
    leaseKey: { S: SHARD(4) },
    leaseOwner: { S: 'java-worker-2' },
    leaseCounter: { N: '12' },
    checkpoint: { S: 'TRIM_HORIZON' },
    checkpointSubSequenceNumber: { N: '0' },
    ownerSwitchesSinceCheckpoint: { N: '0' },
    parentShardId: { SS: [SHARD(2), SHARD(3)] },
    startingHashKey: { S: '0' },
    endingHashKey: { S: MAX },
    throughputKBps: { N: '12.345678' },
    entityType: { S: 'LEASE' },
  },
  // A very old row: no sub-sequence number, no owner switches, no hash range, no entityType.
  {
    leaseKey: { S: SHARD(5) },
    leaseOwner: { S: 'java-worker-1' },
    leaseCounter: { N: '77' },
    checkpoint: { S: '12345' },
  },
  // 3.x: a graceful hand-off in progress (the old owner still checkpoints).
  {
    leaseKey: { S: SHARD(6) },
    leaseOwner: { S: 'java-worker-2' },
    checkpointOwner: { S: 'java-worker-1' },
    leaseCounter: { N: '40' },
    checkpoint: { S: 'LATEST' },
    checkpointSubSequenceNumber: { N: '0' },
    ownerSwitchesSinceCheckpoint: { N: '0' },
    startingHashKey: { S: '0' },
    endingHashKey: { S: MAX },
    throughputKBps: { N: '0.5' },
    entityType: { S: 'LEASE' },
  },
];

/** KCL 3.5 single-table rows that are not leases. */
const javaOtherRows: Item[] = [
  ...['java-worker-1', 'java-worker-2'].map(
    (workerId): Item => ({
      leaseKey: { S: workerId },
      wid: { S: workerId },
      lut: { N: '1735689600' },
      sts: { M: { C: { L: [{ N: '12.5' }, { N: '13' }, { N: '-1' }] }, M: { L: [{ N: '40' }] } } },
      opr: { M: { C: { L: [{ N: '100' }] } } },
      properties: { M: { jvm: { S: '21' } } },
      sup: { N: '1' },
      slu: { N: '1735689600' },
      entityType: { S: 'WORKER_METRIC_STATS' },
    }),
  ),
  {
    leaseKey: { S: 'Leader' },
    ownerName: { S: 'java-worker-1' },
    leaseDuration: { S: '20000' },
    recordVersionNumber: { S: '5e1c8d6e-7a4e-4b8e-9d0e-1a2b3c4d5e6f' },
    entityType: { S: 'LEADER' },
  },
  {
    leaseKey: { S: 'Migration3.0' },
    cv: { S: 'CLIENT_VERSION_3X' },
    mb: { S: 'java-worker-1' },
    mts: { N: '1735689600000' },
    h: { L: [{ M: { cv: { S: 'CLIENT_VERSION_UPGRADE_FROM_2X' }, mts: { N: '1735600000000' } } }] },
    entityType: { S: 'CLIENT_VERSION_MIGRATION' },
  },
  {
    leaseKey: { S: 'TableMigration3.5' },
    tm: { S: 'COMPLETE' },
    mb: { S: 'java-worker-1' },
    mts: { N: '1735689600000' },
    entityType: { S: 'TABLE_MIGRATION' },
  },
];

/** A multi-stream application: lease keys `account:stream:epoch:shardId`, plus a 3.x stream row. */
const multiStreamRows: Item[] = [
  {
    leaseKey: { S: `123456789012:orders:1600000000:${SHARD(7)}` },
    streamName: { S: '123456789012:orders:1600000000' },
    shardId: { S: SHARD(7) },
    leaseOwner: { S: 'java-worker-1' },
    leaseCounter: { N: '9' },
    checkpoint: { S: LONG },
    checkpointSubSequenceNumber: { N: '0' },
    ownerSwitchesSinceCheckpoint: { N: '0' },
    startingHashKey: { S: '0' },
    endingHashKey: { S: MAX },
    entityType: { S: 'LEASE' },
  },
  {
    leaseKey: { S: `123456789012:payments:1600000001:${SHARD(0)}` },
    streamName: { S: '123456789012:payments:1600000001' },
    shardId: { S: SHARD(0) },
    leaseCounter: { N: '0' },
    checkpoint: { S: 'TRIM_HORIZON' },
    checkpointSubSequenceNumber: { N: '0' },
    ownerSwitchesSinceCheckpoint: { N: '0' },
    startingHashKey: { S: '0' },
    endingHashKey: { S: MAX },
    entityType: { S: 'LEASE' },
  },
  {
    leaseKey: { S: '123456789012:orders:1600000000' },
    streamId: { S: '123456789012:orders:1600000000' },
    entityType: { S: 'STREAM' },
  },
];

let client: DynamoDBClient;
let store: DynamoLeaseStore;
let multiStream: DynamoLeaseStore;

async function raw(tableName: string, leaseKey: string): Promise<Item | undefined> {
  const output = await client.send(
    new GetItemCommand({ TableName: tableName, Key: { leaseKey: { S: leaseKey } }, ConsistentRead: true }),
  );
  return output.Item;
}

/** A Java KCL 2.x renewal: the legacy conditional API on the counter it last saw, writing counter + 1. */
async function javaRenew(tableName: string, leaseKey: string, counter: number): Promise<boolean> {
  try {
    await client.send(
      new UpdateItemCommand({
        TableName: tableName,
        Key: { leaseKey: { S: leaseKey } },
        Expected: { leaseCounter: { Value: { N: String(counter) } } },
        AttributeUpdates: { leaseCounter: { Action: 'PUT', Value: { N: String(counter + 1) } } },
      }),
    );
    return true;
  } catch (error) {
    if ((error as Error).name === 'ConditionalCheckFailedException') return false;
    throw error;
  }
}

function expectOk(result: LeaseWriteResult) {
  if (!result.ok) throw new Error(`expected success, lost with ${result.reason}`);
  return result.lease;
}

describe.skipIf(!dynamo.check.available)('a lease table written by the Java KCL', () => {
  beforeAll(async () => {
    client = dynamo.client();
    // The Java default: the table is named after the application.
    store = createDynamoLeaseStore({ client, applicationName: 'orders-app', schemaPollIntervalMs: 10 });
    multiStream = createDynamoLeaseStore({ client, applicationName: 'fanout-app', schemaPollIntervalMs: 10 });
    await store.ensureSchema();
    await multiStream.ensureSchema();
    for (const item of [...javaLeaseRows, ...javaOtherRows]) {
      await client.send(new PutItemCommand({ TableName: 'orders-app', Item: item }));
    }
    for (const item of multiStreamRows) {
      await client.send(new PutItemCommand({ TableName: 'fanout-app', Item: item }));
    }
  });
  afterAll(() => dynamo.stop());

  it('lists exactly the leases, in key order, and counts the skipped KCL 3.x rows', async () => {
    const leases = await store.listLeases();
    expect(leases.map((lease) => lease.leaseKey)).toEqual([0, 1, 2, 3, 4, 5, 6].map(SHARD));
    const summary = await store.scanSummary();
    expect(summary.leases).toHaveLength(7);
    expect(summary.skippedRowCount).toBe(5);
    expect(summary.skippedRowsByEntityType).toEqual({
      WORKER_METRIC_STATS: 2,
      LEADER: 1,
      CLIENT_VERSION_MIGRATION: 1,
      TABLE_MIGRATION: 1,
    });
    expect(summary.invalidRows).toEqual([]);
  });

  it('reads checkpoints, pending checkpoints, lineage and hash ranges as Java wrote them', async () => {
    const byKey = new Map((await store.listLeases()).map((lease) => [lease.leaseKey, lease]));
    const open = byKey.get(SHARD(1));
    expect(open?.checkpoint.toString()).toBe(`${LONG}/3`);
    expect(open?.pendingCheckpoint?.toString()).toBe(NEXT);
    expect(open?.owner).toBe('java-worker-1');
    expect(open?.leaseCounter).toBe(1523);
    expect(open?.ownerSwitchesSinceCheckpoint).toBe(1);
    expect(byKey.get(SHARD(0))?.checkpoint.isShardEnd).toBe(true);
    expect(byKey.get(SHARD(0))?.childShardIds).toEqual([SHARD(2), SHARD(3)]);
    expect(byKey.get(SHARD(2))?.parentShardIds).toEqual([SHARD(0)]);
    expect(byKey.get(SHARD(4))?.parentShardIds).toEqual([SHARD(2), SHARD(3)]);
    expect(byKey.get(SHARD(3))?.hashKeyRange).toEqual({
      startingHashKey: 1n << 127n,
      endingHashKey: MAX_HASH_KEY,
    });
    const old = byKey.get(SHARD(5));
    expect(old).toMatchObject({
      owner: 'java-worker-1',
      leaseCounter: 77,
      ownerSwitchesSinceCheckpoint: 0,
      hashKeyRange: null,
      parentShardIds: [],
      childShardIds: [],
      pendingCheckpoint: null,
    });
    expect(old?.checkpoint.toString()).toBe('12345');
  });

  it('never treats a KCL 3.x coordinator or worker-metrics row as a lease', async () => {
    expect(await store.getLease('Leader')).toBeNull();
    expect(await store.getLease('java-worker-1')).toBeNull();
    expect(await store.renewLease('Leader', 0)).toEqual({ ok: false, reason: 'not-found' });
    expect(await store.takeLease('java-worker-1', 0, 'kcl')).toEqual({ ok: false, reason: 'not-found' });
    expect(await store.updateLeaseMeta('Migration3.0', { childShardIds: [SHARD(9)] })).toBeNull();
    expect(
      await store.createLeaseIfAbsent({
        leaseKey: 'Leader',
        checkpoint: ExtendedSequenceNumber.TRIM_HORIZON,
      }),
    ).toEqual({ ok: false, reason: 'already-exists' });
    await store.deleteLease('TableMigration3.5');
    expect(await raw('orders-app', 'Leader')).toEqual(javaOtherRows[2]);
    expect(await raw('orders-app', 'Migration3.0')).toEqual(javaOtherRows[3]);
    expect(await raw('orders-app', 'TableMigration3.5')).toEqual(javaOtherRows[4]);
  });

  it('takes a lease from an expired Java worker with its checkpoint kept, fenced on the Java counter', async () => {
    const taken = expectOk(await store.takeLease(SHARD(1), 1523, 'kcl-worker-1'));
    expect(taken).toMatchObject({
      owner: 'kcl-worker-1',
      leaseCounter: 1524,
      ownerSwitchesSinceCheckpoint: 2,
    });
    expect(taken.checkpoint.toString()).toBe(`${LONG}/3`);
    expect(taken.pendingCheckpoint?.toString()).toBe(NEXT);
    const item = await raw('orders-app', SHARD(1));
    expect(item).toEqual({
      ...javaLeaseRows[1],
      leaseOwner: { S: 'kcl-worker-1' },
      leaseCounter: { N: '1524' },
      ownerSwitchesSinceCheckpoint: { N: '2' },
    });

    // The Java worker, still holding counter 1523, loses its next renewal: the fence holds both ways.
    expect(await javaRenew('orders-app', SHARD(1), 1523)).toBe(false);

    const checkpointed = expectOk(
      await store.updateCheckpoint(SHARD(1), taken.leaseCounter, {
        checkpoint: ExtendedSequenceNumber.of(NEXT, 0),
      }),
    );
    expect(checkpointed).toMatchObject({
      leaseCounter: 1525,
      ownerSwitchesSinceCheckpoint: 0,
      pendingCheckpoint: null,
    });
    const after = await raw('orders-app', SHARD(1));
    expect(after).toEqual({
      leaseKey: { S: SHARD(1) },
      leaseOwner: { S: 'kcl-worker-1' },
      leaseCounter: { N: '1525' },
      checkpoint: { S: NEXT },
      checkpointSubSequenceNumber: { N: '0' },
      ownerSwitchesSinceCheckpoint: { N: '0' },
      startingHashKey: { S: '0' },
      endingHashKey: { S: MAX },
    });

    // A Java worker that takes the lease back (having read counter 1525) fences kcl out in turn.
    expect(await javaRenew('orders-app', SHARD(1), 1525)).toBe(true);
    expect(await store.renewLease(SHARD(1), 1525)).toEqual({ ok: false, reason: 'counter-mismatch' });
    expect((await store.getLease(SHARD(1)))?.leaseCounter).toBe(1526);
  });

  it('takes over a row missing the optional attributes and checkpoints it in the full format', async () => {
    const taken = expectOk(await store.takeLease(SHARD(5), 77, 'kcl-worker-1'));
    expect(taken.ownerSwitchesSinceCheckpoint).toBe(1);
    expectOk(
      await store.updateCheckpoint(SHARD(5), taken.leaseCounter, {
        checkpoint: ExtendedSequenceNumber.of('12346', 2),
      }),
    );
    expect(await raw('orders-app', SHARD(5))).toEqual({
      leaseKey: { S: SHARD(5) },
      leaseOwner: { S: 'kcl-worker-1' },
      leaseCounter: { N: '79' },
      checkpoint: { S: '12346' },
      checkpointSubSequenceNumber: { N: '2' },
      ownerSwitchesSinceCheckpoint: { N: '0' },
    });
  });

  it('ends a pending KCL 3.x hand-off when it takes the lease, keeping the other 3.x attributes', async () => {
    expectOk(await store.takeLease(SHARD(6), 40, 'kcl-worker-2'));
    const item = await raw('orders-app', SHARD(6));
    expect(item?.checkpointOwner).toBeUndefined();
    expect(item?.throughputKBps).toEqual({ N: '0.5' });
    expect(item?.entityType).toEqual({ S: 'LEASE' });
    expect(item?.leaseOwner).toEqual({ S: 'kcl-worker-2' });
  });

  it('records child shards on a Java lease without moving its counter', async () => {
    const updated = await store.updateLeaseMeta(SHARD(4), { childShardIds: [SHARD(8)] });
    expect(updated?.leaseCounter).toBe(12);
    expect((await raw('orders-app', SHARD(4)))?.childShardIds).toEqual({ SS: [SHARD(8)] });
    expect(await javaRenew('orders-app', SHARD(4), 12)).toBe(true);
  });

  it('reads a multi-stream table and keeps streamName/shardId on every write', async () => {
    const summary = await multiStream.scanSummary();
    expect(summary.leases.map((lease) => lease.leaseKey)).toEqual([
      `123456789012:orders:1600000000:${SHARD(7)}`,
      `123456789012:payments:1600000001:${SHARD(0)}`,
    ]);
    expect(summary.skippedRowsByEntityType).toEqual({ STREAM: 1 });
    const key = `123456789012:orders:1600000000:${SHARD(7)}`;
    const taken = expectOk(await multiStream.takeLease(key, 9, 'kcl-worker-1'));
    expectOk(
      await multiStream.updateCheckpoint(key, taken.leaseCounter, {
        checkpoint: ExtendedSequenceNumber.of(NEXT),
      }),
    );
    const item = await raw('fanout-app', key);
    expect([item?.streamName, item?.shardId, item?.checkpoint]).toEqual([
      { S: '123456789012:orders:1600000000' },
      { S: SHARD(7) },
      { S: NEXT },
    ]);
    // A lease kcl creates in a multi-stream table is readable by the Java multi-stream serializer.
    const childKey = `123456789012:orders:1600000000:${SHARD(9)}`;
    expectOk(
      await multiStream.createLeaseIfAbsent({
        leaseKey: childKey,
        checkpoint: ExtendedSequenceNumber.TRIM_HORIZON,
        parentShardIds: [SHARD(7)],
      }),
    );
    const child = await raw('fanout-app', childKey);
    expect([child?.streamName, child?.shardId, child?.parentShardId]).toEqual([
      { S: '123456789012:orders:1600000000' },
      { S: SHARD(9) },
      { SS: [SHARD(7)] },
    ]);
  });
});
