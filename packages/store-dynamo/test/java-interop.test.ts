import type {
  AttributeValue,
  AttributeValueUpdate,
  DynamoDBClient,
  ExpectedAttributeValue,
} from '@aws-sdk/client-dynamodb';
import { GetItemCommand, PutItemCommand, UpdateItemCommand } from '@aws-sdk/client-dynamodb';
import type { LeaseWriteResult } from '@kcl/core';
import { ExtendedSequenceNumber, MAX_HASH_KEY } from '@kcl/core';
import {
  JAVA_SAMPLE,
  javaKcl3OtherRows,
  javaLeaseItem,
  javaShardId,
  javaSplitAndMergeLeases,
} from '@kcl/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DynamoLeaseStore } from '../src/index.js';
import { createDynamoLeaseStore } from '../src/index.js';
import { startLocalDynamo } from './local-dynamo.js';

// Items below are shaped as the Java KCL's DynamoDBLeaseSerializer (2.x, 3.x) and the KCL 3.5
// single-table DAO write them: attribute names, DynamoDB types, omitted empties.

const dynamo = await startLocalDynamo();
const { checkpoint: LONG, pendingCheckpoint: NEXT } = JAVA_SAMPLE;
const MAX = MAX_HASH_KEY.toString();
const SHARD = javaShardId;
type Item = Record<string, AttributeValue>;

/** Leases of a single-stream application after a split (0 → 2, 3) and a merge (2 + 3 → 4), and two more. */
const javaLeaseRows: Item[] = [
  ...javaSplitAndMergeLeases(),
  // A very old row: no sub-sequence number, no owner switches, no hash range, no entityType.
  javaLeaseItem({
    leaseKey: SHARD(5),
    leaseOwner: 'java-worker-1',
    leaseCounter: 77,
    checkpoint: '12345',
    checkpointSubSequenceNumber: null,
    ownerSwitchesSinceCheckpoint: null,
  }),
  // 3.x: a graceful hand-off in progress (the old owner still checkpoints).
  javaLeaseItem({
    leaseKey: SHARD(6),
    leaseOwner: 'java-worker-2',
    checkpointOwner: 'java-worker-1',
    leaseCounter: 40,
    checkpoint: 'LATEST',
    startingHashKey: '0',
    endingHashKey: MAX,
    throughputKBps: 0.5,
    entityType: 'LEASE',
  }),
];

/** KCL 3.5 single-table rows that are not leases. */
const javaOtherRows: Item[] = javaKcl3OtherRows();

/** A multi-stream application: lease keys `account:stream:epoch:shardId`, plus a 3.x stream row. */
const multiStreamRows: Item[] = [
  javaLeaseItem({
    leaseKey: `123456789012:orders:1600000000:${SHARD(7)}`,
    streamName: '123456789012:orders:1600000000',
    shardId: SHARD(7),
    leaseOwner: 'java-worker-1',
    leaseCounter: 9,
    checkpoint: LONG,
    startingHashKey: '0',
    endingHashKey: MAX,
    entityType: 'LEASE',
  }),
  javaLeaseItem({
    leaseKey: `123456789012:payments:1600000001:${SHARD(0)}`,
    streamName: '123456789012:payments:1600000001',
    shardId: SHARD(0),
    checkpoint: 'TRIM_HORIZON',
    startingHashKey: '0',
    endingHashKey: MAX,
    entityType: 'LEASE',
  }),
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

/** A Java KCL 3.x lease write: the legacy conditional API, as DynamoDBLeaseRefresher sends it. */
async function javaUpdate(
  tableName: string,
  leaseKey: string,
  expected: Record<string, ExpectedAttributeValue>,
  updates: Record<string, AttributeValueUpdate>,
): Promise<boolean> {
  try {
    await client.send(
      new UpdateItemCommand({
        TableName: tableName,
        Key: { leaseKey: { S: leaseKey } },
        Expected: { leaseKey: { Exists: true, Value: { S: leaseKey } }, ...expected },
        AttributeUpdates: updates,
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
    await store.admin.ensureSchema();
    await multiStream.admin.ensureSchema();
    for (const item of [...javaLeaseRows, ...javaOtherRows]) {
      await client.send(new PutItemCommand({ TableName: 'orders-app', Item: item }));
    }
    for (const item of multiStreamRows) {
      await client.send(new PutItemCommand({ TableName: 'fanout-app', Item: item }));
    }
  });
  afterAll(() => dynamo.stop());

  it('lists exactly the leases, in key order, and counts the skipped KCL 3.x rows', async () => {
    const leases = await store.leases.list();
    expect(leases.map((lease) => lease.leaseKey)).toEqual([0, 1, 2, 3, 4, 5, 6].map(SHARD));
    const summary = await store.admin.scan();
    expect(summary.leases).toHaveLength(7);
    expect(summary.skippedRowCount).toBe(5);
    expect(summary.skippedRowsByEntityType).toEqual({
      WORKER_METRIC_STATS: 2,
      LEADER: 1,
      CLIENT_VERSION_MIGRATION: 1,
      TABLE_MIGRATION: 1,
    });
    expect(summary.unreadable).toEqual([]);
  });

  it('reads checkpoints, pending checkpoints, lineage and hash ranges as Java wrote them', async () => {
    const byKey = new Map((await store.leases.list()).map((lease) => [lease.leaseKey, lease]));
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
    expect(await store.leases.get('Leader')).toBeNull();
    expect(await store.leases.get('java-worker-1')).toBeNull();
    expect(await store.leases.renew('Leader', 0)).toEqual({ ok: false, reason: 'not-found' });
    expect(await store.leases.take('java-worker-1', 0, 'kcl')).toEqual({ ok: false, reason: 'not-found' });
    expect(await store.leases.updateMeta('Migration3.0', { childShardIds: [SHARD(9)] })).toBeNull();
    expect(
      await store.leases.create({
        leaseKey: 'Leader',
        checkpoint: ExtendedSequenceNumber.TRIM_HORIZON,
      }),
    ).toEqual({ ok: false, reason: 'already-exists' });
    await store.leases.delete('TableMigration3.5');
    expect(await raw('orders-app', 'Leader')).toEqual(javaOtherRows[2]);
    expect(await raw('orders-app', 'Migration3.0')).toEqual(javaOtherRows[3]);
    expect(await raw('orders-app', 'TableMigration3.5')).toEqual(javaOtherRows[4]);
  });

  it('takes a lease from an expired Java worker with its checkpoint kept, fenced on the Java counter', async () => {
    const taken = expectOk(await store.leases.take(SHARD(1), 1523, 'kcl-worker-1'));
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
      await store.leases.checkpoint(SHARD(1), taken.leaseCounter, {
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
    expect(await store.leases.renew(SHARD(1), 1525)).toEqual({ ok: false, reason: 'counter-mismatch' });
    expect((await store.leases.get(SHARD(1)))?.leaseCounter).toBe(1526);
  });

  it('takes over a row missing the optional attributes and checkpoints it in the full format', async () => {
    const taken = expectOk(await store.leases.take(SHARD(5), 77, 'kcl-worker-1'));
    expect(taken.ownerSwitchesSinceCheckpoint).toBe(1);
    expectOk(
      await store.leases.checkpoint(SHARD(5), taken.leaseCounter, {
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

  it('reads a KCL 3.x hand-off in progress: the checkpointOwner still owns the lease, the leaseOwner is next', async () => {
    const lease = await store.leases.get(SHARD(6));
    expect([lease?.owner, lease?.handoff]).toEqual([
      'java-worker-1',
      { from: 'java-worker-1', to: 'java-worker-2', deadline: null },
    ]);
    // A renewal and a checkpoint by the current owner keep the hand-off, as Java's renewer and updater do.
    const renewed = expectOk(await store.leases.renew(SHARD(6), 40));
    const checkpointed = expectOk(
      await store.leases.checkpoint(SHARD(6), renewed.leaseCounter, {
        checkpoint: ExtendedSequenceNumber.of(LONG),
      }),
    );
    expect(checkpointed.handoff).toEqual(lease?.handoff);
    expect(await raw('orders-app', SHARD(6))).toMatchObject({
      leaseOwner: { S: 'java-worker-2' },
      checkpointOwner: { S: 'java-worker-1' },
      leaseCounter: { N: '42' },
    });
  });

  it('ends a pending KCL 3.x hand-off when it takes the lease, keeping the other 3.x attributes', async () => {
    const taken = expectOk(await store.leases.take(SHARD(6), 42, 'kcl-worker-2'));
    expect([taken.owner, taken.handoff, taken.ownerSwitchesSinceCheckpoint]).toEqual([
      'kcl-worker-2',
      null,
      1,
    ]);
    const item = await raw('orders-app', SHARD(6));
    expect(item?.checkpointOwner).toBeUndefined();
    expect(item?.throughputKBps).toEqual({ N: '0.5' });
    expect(item?.entityType).toEqual({ S: 'LEASE' });
    expect(item?.leaseOwner).toEqual({ S: 'kcl-worker-2' });
  });

  it('records child shards on a Java lease without moving its counter', async () => {
    const updated = await store.leases.updateMeta(SHARD(4), { childShardIds: [SHARD(8)] });
    expect(updated?.leaseCounter).toBe(12);
    expect((await raw('orders-app', SHARD(4)))?.childShardIds).toEqual({ SS: [SHARD(8)] });
    expect(await javaRenew('orders-app', SHARD(4), 12)).toBe(true);
  });

  it('reads a multi-stream table: streamName is the stream identifier, kept with shardId on every write', async () => {
    const scan = await multiStream.admin.scan();
    expect(scan.leases.map((lease) => [lease.leaseKey, lease.streamIdentifier])).toEqual([
      [`123456789012:orders:1600000000:${SHARD(7)}`, '123456789012:orders:1600000000'],
      [`123456789012:payments:1600000001:${SHARD(0)}`, '123456789012:payments:1600000001'],
    ]);
    expect(scan.skippedRowsByEntityType).toEqual({ STREAM: 1 });
    const key = `123456789012:orders:1600000000:${SHARD(7)}`;
    const taken = expectOk(await multiStream.leases.take(key, 9, 'kcl-worker-1'));
    const checkpointed = expectOk(
      await multiStream.leases.checkpoint(key, taken.leaseCounter, {
        checkpoint: ExtendedSequenceNumber.of(NEXT),
      }),
    );
    expect(checkpointed.streamIdentifier).toBe('123456789012:orders:1600000000');
    const item = await raw('fanout-app', key);
    expect([item?.streamName, item?.shardId, item?.checkpoint]).toEqual([
      { S: '123456789012:orders:1600000000' },
      { S: SHARD(7) },
      { S: NEXT },
    ]);
    // A lease kcl creates with a stream identifier is readable by the Java multi-stream serializer,
    // which requires both attributes.
    const childKey = `123456789012:orders:1600000000:${SHARD(9)}`;
    expectOk(
      await multiStream.leases.create({
        leaseKey: childKey,
        checkpoint: ExtendedSequenceNumber.TRIM_HORIZON,
        parentShardIds: [SHARD(7)],
        streamIdentifier: '123456789012:orders:1600000000',
      }),
    );
    const child = await raw('fanout-app', childKey);
    expect([child?.streamName, child?.shardId, child?.parentShardId]).toEqual([
      { S: '123456789012:orders:1600000000' },
      { S: SHARD(9) },
      { SS: [SHARD(7)] },
    ]);
  });

  it('a hand-off kcl records reads as Java records one, and Java ending it and starting another leaves no stale deadline', async () => {
    const deadline = new Date('2031-05-06T07:08:09.010Z');
    const leaseKey = SHARD(20);
    expectOk(
      await store.leases.create({
        leaseKey,
        checkpoint: ExtendedSequenceNumber.of(LONG),
        owner: 'worker-a',
        leaseCounter: 5,
        handoff: { from: 'worker-a', to: 'worker-b', deadline },
      }),
    );
    expect(await raw('orders-app', leaseKey)).toMatchObject({
      leaseOwner: { S: 'worker-b' },
      checkpointOwner: { S: 'worker-a' },
    });

    // Java's evictLease by the old owner completes the hand-off: it removes checkpointOwner only.
    expect(
      await javaUpdate(
        'orders-app',
        leaseKey,
        { leaseOwner: { Value: { S: 'worker-b' } }, checkpointOwner: { Value: { S: 'worker-a' } } },
        { checkpointOwner: { Action: 'DELETE' }, leaseCounter: { Action: 'ADD', Value: { N: '1' } } },
      ),
    ).toBe(true);
    expect(await store.leases.get(leaseKey)).toMatchObject({
      owner: 'worker-b',
      handoff: null,
      leaseCounter: 6,
    });

    // Java's initiateGracefulLeaseHandoff then hands it on; kcl's deadline of the earlier hand-off,
    // still on the item, is not this one's.
    expect(
      await javaUpdate(
        'orders-app',
        leaseKey,
        { leaseOwner: { Value: { S: 'worker-b' } }, checkpointOwner: { Exists: false } },
        {
          leaseOwner: { Action: 'PUT', Value: { S: 'worker-c' } },
          checkpointOwner: { Action: 'PUT', Value: { S: 'worker-b' } },
        },
      ),
    ).toBe(true);
    expect(await store.leases.get(leaseKey)).toMatchObject({
      owner: 'worker-b',
      handoff: { from: 'worker-b', to: 'worker-c', deadline: null },
    });

    // kcl's take ends it and leaves nothing of either hand-off behind.
    expectOk(await store.leases.take(leaseKey, 6, 'worker-c'));
    const item = await raw('orders-app', leaseKey);
    expect([item?.leaseOwner, item?.checkpointOwner, item?.handoffDeadline]).toEqual([
      { S: 'worker-c' },
      undefined,
      undefined,
    ]);
  });

  it("completes a hand-off Java requested: a Java worker then reads the lease as the next owner's", async () => {
    const leaseKey = SHARD(21);
    const written = javaLeaseItem({
      leaseKey,
      leaseOwner: 'next',
      checkpointOwner: 'current',
      leaseCounter: 30,
      checkpoint: LONG,
      ownerSwitchesSinceCheckpoint: 2,
      throughputKBps: 1.5,
      entityType: 'LEASE',
    });
    await client.send(new PutItemCommand({ TableName: 'orders-app', Item: written }));
    const requested = await store.leases.get(leaseKey);
    expect([requested?.owner, requested?.handoff, requested?.leaseCounter]).toEqual([
      'current',
      { from: 'current', to: 'next', deadline: null },
      30,
    ]);
    // A second request while Java's is in progress loses, as Java's own would.
    expect(
      await store.leases.requestHandoff(leaseKey, 30, { from: 'current', to: 'other', deadline: null }),
    ).toEqual({ ok: false, reason: 'handoff-mismatch' });

    const completed = expectOk(await store.leases.completeHandoff(leaseKey, 30));
    expect([
      completed.owner,
      completed.handoff,
      completed.leaseCounter,
      completed.ownerSwitchesSinceCheckpoint,
    ]).toEqual(['next', null, 31, 3]);
    // As the Java serializer reads it: leaseOwner is the owner, no checkpointOwner, the rest as Java left it.
    const { checkpointOwner: _handedOver, ...kept } = written;
    expect(await raw('orders-app', leaseKey)).toEqual({
      ...kept,
      leaseCounter: { N: '31' },
      ownerSwitchesSinceCheckpoint: { N: '3' },
    });
    // The next owner, a Java worker, renews with the counter it reads.
    expect(await javaRenew('orders-app', leaseKey, 31)).toBe(true);
  });

  it('requests a hand-off with exactly the attributes Java writes: leaseOwner = to, checkpointOwner = from', async () => {
    const leaseKey = SHARD(22);
    await client.send(
      new PutItemCommand({
        TableName: 'orders-app',
        Item: javaLeaseItem({ leaseKey, leaseOwner: 'current', leaseCounter: 8, checkpoint: LONG }),
      }),
    );
    const before = await raw('orders-app', leaseKey);
    const requested = expectOk(
      await store.leases.requestHandoff(leaseKey, 8, { from: 'current', to: 'next', deadline: null }),
    );
    expect([requested.owner, requested.handoff, requested.leaseCounter]).toEqual([
      'current',
      { from: 'current', to: 'next', deadline: null },
      8,
    ]);
    expect(await raw('orders-app', leaseKey)).toEqual({
      ...before,
      leaseOwner: { S: 'next' },
      checkpointOwner: { S: 'current' },
    });
    // Java's own hand-off condition now fails on it (a hand-off is in progress), and Java's evict by
    // the old owner completes it, as kcl's completeHandoff would.
    expect(
      await javaUpdate(
        'orders-app',
        leaseKey,
        { leaseOwner: { Value: { S: 'current' } }, checkpointOwner: { Exists: false } },
        {
          leaseOwner: { Action: 'PUT', Value: { S: 'someone-else' } },
          checkpointOwner: { Action: 'PUT', Value: { S: 'current' } },
        },
      ),
    ).toBe(false);
    expect(
      await javaUpdate(
        'orders-app',
        leaseKey,
        { leaseOwner: { Value: { S: 'next' } }, checkpointOwner: { Value: { S: 'current' } } },
        { checkpointOwner: { Action: 'DELETE' }, leaseCounter: { Action: 'ADD', Value: { N: '1' } } },
      ),
    ).toBe(true);
    expect(await store.leases.get(leaseKey)).toMatchObject({ owner: 'next', handoff: null, leaseCounter: 9 });
  });
});
