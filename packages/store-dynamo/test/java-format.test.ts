import type { AttributeValue, DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { GetItemCommand, ScanCommand } from '@aws-sdk/client-dynamodb';
import type { Lease, LeaseWriteResult } from '@kcl/core';
import { ExtendedSequenceNumber, hashKeyRange, LeaseStoreError, MAX_HASH_KEY } from '@kcl/core';
import { JAVA_SAMPLE, javaLeaseItem } from '@kcl/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DynamoLeaseStore } from '../src/index.js';
import { createDynamoLeaseStore } from '../src/index.js';
import { startLocalDynamo } from './local-dynamo.js';

// What kcl writes must parse in the Java KCL's DynamoDBLeaseSerializer (2.x and 3.x): the attribute
// names and DynamoDB types below, nothing else, no empty string or empty set.

const dynamo = await startLocalDynamo();
const LONG = JAVA_SAMPLE.checkpoint;
type Item = Record<string, AttributeValue>;

type AttributeType = 'S' | 'N' | 'SS' | 'M';

/**
 * Every attribute kcl may write on a lease row, with the one type the Java KCL reads it as; and kcl's
 * own `handoffDeadline`, which the Java reader ignores.
 */
const JAVA_LEASE_ATTRIBUTES: Readonly<Record<string, AttributeType>> = {
  leaseKey: 'S',
  leaseOwner: 'S',
  leaseCounter: 'N',
  checkpoint: 'S',
  checkpointSubSequenceNumber: 'N',
  pendingCheckpoint: 'S',
  pendingCheckpointSubSequenceNumber: 'N',
  ownerSwitchesSinceCheckpoint: 'N',
  parentShardId: 'SS',
  childShardIds: 'SS',
  startingHashKey: 'S',
  endingHashKey: 'S',
  entityType: 'S',
  streamName: 'S',
  shardId: 'S',
  checkpointOwner: 'S',
  handoffDeadline: 'M',
};

/** Checks an item as the Java serializer would read it; returns the problems found. */
function javaFormatProblems(
  item: Item,
  allowed: Record<string, AttributeType> = JAVA_LEASE_ATTRIBUTES,
): string[] {
  const problems: string[] = [];
  for (const required of [
    'leaseKey',
    'leaseCounter',
    'checkpoint',
    'checkpointSubSequenceNumber',
    'ownerSwitchesSinceCheckpoint',
  ]) {
    if (item[required] === undefined) problems.push(`${required} missing`);
  }
  for (const [name, value] of Object.entries(item)) {
    const type = allowed[name];
    const types = Object.keys(value).filter(
      (key) => (value as unknown as Record<string, unknown>)[key] !== undefined,
    );
    if (type === undefined) problems.push(`unexpected attribute ${name}`);
    else if (types.length !== 1 || types[0] !== type)
      problems.push(`${name} is ${types.join('/')}, not ${type}`);
    if (value.S === '') problems.push(`${name} is an empty string`);
    if (value.SS !== undefined && (value.SS.length === 0 || value.SS.includes('')))
      problems.push(`${name} is empty`);
    if (value.N !== undefined && !/^[0-9]+$/.test(value.N)) problems.push(`${name} is not an integer`);
  }
  if ((item.pendingCheckpoint === undefined) !== (item.pendingCheckpointSubSequenceNumber === undefined)) {
    problems.push('pendingCheckpoint and its sub-sequence number must come together');
  }
  if ((item.startingHashKey === undefined) !== (item.endingHashKey === undefined)) {
    problems.push('hash keys must come together');
  }
  if ((item.streamName === undefined) !== (item.shardId === undefined)) {
    problems.push('streamName and shardId must come together');
  }
  if (item.checkpointOwner !== undefined && item.leaseOwner === undefined) {
    problems.push('a checkpointOwner without a leaseOwner is no hand-off');
  }
  if (
    item.checkpoint?.S !== undefined &&
    !/^([0-9]+|TRIM_HORIZON|LATEST|AT_TIMESTAMP|SHARD_END)$/.test(item.checkpoint.S)
  ) {
    problems.push('checkpoint is neither digits nor a sentinel');
  }
  if (item.entityType !== undefined && item.entityType.S !== 'LEASE')
    problems.push('entityType is not LEASE');
  return problems;
}

function ok(result: LeaseWriteResult): Lease {
  if (!result.ok) throw new Error(`lost with ${result.reason}`);
  return result.lease;
}

let client: DynamoDBClient;
let store: DynamoLeaseStore;
const tableName = 'format-app';

async function raw(leaseKey: string): Promise<Item> {
  const output = await client.send(
    new GetItemCommand({ TableName: tableName, Key: { leaseKey: { S: leaseKey } }, ConsistentRead: true }),
  );
  if (output.Item === undefined) throw new Error(`no item ${leaseKey}`);
  expect(javaFormatProblems(output.Item), `Java format of ${leaseKey}`).toEqual([]);
  return output.Item;
}

describe.skipIf(!dynamo.check.available)('items kcl writes, read raw', () => {
  beforeAll(async () => {
    client = dynamo.client();
    store = createDynamoLeaseStore({ client, applicationName: tableName, schemaPollIntervalMs: 10 });
    await store.admin.ensureSchema();
  });
  afterAll(() => dynamo.stop());

  it('a new lease has the Java attributes only, with nothing empty written', async () => {
    ok(
      await store.leases.create({
        leaseKey: 'shardId-000000000000',
        checkpoint: ExtendedSequenceNumber.LATEST,
      }),
    );
    expect(await raw('shardId-000000000000')).toEqual(
      javaLeaseItem({ leaseKey: 'shardId-000000000000', checkpoint: 'LATEST', entityType: 'LEASE' }),
    );
  });

  it('a fully populated lease uses S, N and SS exactly as the Java serializer', async () => {
    ok(
      await store.leases.create({
        leaseKey: 'shardId-000000000004',
        checkpoint: ExtendedSequenceNumber.of(LONG, 5),
        pendingCheckpoint: ExtendedSequenceNumber.of(`${LONG}1`, 0),
        parentShardIds: ['shardId-000000000002', 'shardId-000000000003'],
        childShardIds: ['shardId-000000000009'],
        hashKeyRange: hashKeyRange(0n, MAX_HASH_KEY),
        owner: 'w-1',
        leaseCounter: 3,
        ownerSwitchesSinceCheckpoint: 1,
      }),
    );
    expect(await raw('shardId-000000000004')).toEqual(
      javaLeaseItem({
        leaseKey: 'shardId-000000000004',
        leaseOwner: 'w-1',
        leaseCounter: 3,
        checkpoint: LONG,
        checkpointSubSequenceNumber: 5,
        pendingCheckpoint: `${LONG}1`,
        pendingCheckpointSubSequenceNumber: 0,
        ownerSwitchesSinceCheckpoint: 1,
        parentShardId: ['shardId-000000000002', 'shardId-000000000003'],
        childShardIds: ['shardId-000000000009'],
        startingHashKey: '0',
        endingHashKey: MAX_HASH_KEY.toString(),
        entityType: 'LEASE',
      }),
    );
  });

  it('take, checkpoint, prepare, commit and release write and REMOVE the right attributes', async () => {
    const key = 'shardId-000000000001';
    let lease = ok(
      await store.leases.create({
        leaseKey: key,
        checkpoint: ExtendedSequenceNumber.TRIM_HORIZON,
        parentShardIds: ['shardId-000000000000'],
      }),
    );
    lease = ok(await store.leases.take(key, lease.leaseCounter, 'kcl-worker'));
    let item = await raw(key);
    // A free lease has no owner to switch from: the Java taker adds nothing, and neither does kcl.
    expect([item.leaseOwner, item.leaseCounter, item.ownerSwitchesSinceCheckpoint]).toEqual([
      { S: 'kcl-worker' },
      { N: '1' },
      { N: '0' },
    ]);

    lease = ok(
      await store.leases.checkpoint(key, lease.leaseCounter, {
        checkpoint: ExtendedSequenceNumber.of('100', 2),
        pendingCheckpoint: ExtendedSequenceNumber.of(LONG, 7),
      }),
    );
    item = await raw(key);
    expect([item.checkpoint, item.checkpointSubSequenceNumber, item.ownerSwitchesSinceCheckpoint]).toEqual([
      { S: '100' },
      { N: '2' },
      { N: '0' },
    ]);
    expect([item.pendingCheckpoint, item.pendingCheckpointSubSequenceNumber]).toEqual([
      { S: LONG },
      { N: '7' },
    ]);

    lease = ok(
      await store.leases.checkpoint(key, lease.leaseCounter, {
        checkpoint: ExtendedSequenceNumber.of(LONG, 7),
      }),
    );
    item = await raw(key);
    expect('pendingCheckpoint' in item || 'pendingCheckpointSubSequenceNumber' in item).toBe(false);

    lease = ok(await store.leases.release(key, lease.leaseCounter));
    item = await raw(key);
    expect('leaseOwner' in item).toBe(false);
    expect(item).toEqual(
      javaLeaseItem({
        leaseKey: key,
        leaseCounter: 4,
        checkpoint: LONG,
        checkpointSubSequenceNumber: 7,
        parentShardId: ['shardId-000000000000'],
        entityType: 'LEASE',
      }),
    );

    ok(
      await store.leases.checkpoint(key, lease.leaseCounter, {
        checkpoint: ExtendedSequenceNumber.SHARD_END,
      }),
    );
    expect((await raw(key)).checkpoint).toEqual({ S: 'SHARD_END' });
  });

  it('a hand-off is written as the Java KCL writes one, kept by renew and checkpoint, removed by take and release', async () => {
    const deadline = new Date('2030-01-02T03:04:05.678Z');
    const handoffAttributes = {
      leaseOwner: { S: 'worker-b' },
      checkpointOwner: { S: 'worker-a' },
      handoffDeadline: {
        M: { epochMillis: { N: String(deadline.getTime()) }, from: { S: 'worker-a' }, to: { S: 'worker-b' } },
      },
    };
    for (const [leaseKey, end] of [
      ['shardId-000000000010', 'take'],
      ['shardId-000000000011', 'release'],
    ] as const) {
      let lease = ok(
        await store.leases.create({
          leaseKey,
          checkpoint: ExtendedSequenceNumber.TRIM_HORIZON,
          owner: 'worker-a',
          handoff: { from: 'worker-a', to: 'worker-b', deadline },
        }),
      );
      expect(await raw(leaseKey)).toMatchObject(handoffAttributes);
      lease = ok(await store.leases.renew(leaseKey, lease.leaseCounter));
      lease = ok(
        await store.leases.checkpoint(leaseKey, lease.leaseCounter, {
          checkpoint: ExtendedSequenceNumber.of('9'),
        }),
      );
      expect(await raw(leaseKey)).toMatchObject({ ...handoffAttributes, leaseCounter: { N: '2' } });
      const ended =
        end === 'take'
          ? ok(await store.leases.take(leaseKey, lease.leaseCounter, 'worker-b'))
          : ok(await store.leases.release(leaseKey, lease.leaseCounter));
      expect(ended.handoff, end).toBeNull();
      const item = await raw(leaseKey);
      expect([item.leaseOwner, item.checkpointOwner, item.handoffDeadline], end).toEqual([
        end === 'take' ? { S: 'worker-b' } : undefined,
        undefined,
        undefined,
      ]);
    }
  });

  it('refuses to create a hand-off that does not come from the lease owner: the Java format could not hold it', async () => {
    const error = await store.leases
      .create({
        leaseKey: 'shardId-000000000012',
        checkpoint: ExtendedSequenceNumber.TRIM_HORIZON,
        owner: 'worker-x',
        handoff: { from: 'worker-a', to: 'worker-b', deadline: null },
      })
      .then(
        () => null,
        (rejection: unknown) => rejection,
      );
    expect(LeaseStoreError.is(error)).toBe(true);
    expect([(error as LeaseStoreError).code, (error as LeaseStoreError).retryable]).toEqual([
      'LEASE_DATA_INVALID',
      false,
    ]);
    expect((error as Error).message).toMatch(
      /^@kcl\/store-dynamo: lease "shardId-000000000012" cannot be stored in the Java KCL lease format: .*owner equal to handoff.from/,
    );
    expect(await store.leases.get('shardId-000000000012')).toBeNull();
  });

  it('meta updates write SS child ids and decimal hash keys, and remove child ids instead of writing an empty set', async () => {
    const key = 'shardId-000000000002';
    ok(await store.leases.create({ leaseKey: key, checkpoint: ExtendedSequenceNumber.TRIM_HORIZON }));
    await store.leases.updateMeta(key, {
      childShardIds: ['shardId-000000000006', 'shardId-000000000005'],
      hashKeyRange: hashKeyRange(1n << 127n, MAX_HASH_KEY),
    });
    let item = await raw(key);
    expect([item.childShardIds, item.startingHashKey, item.endingHashKey, item.leaseCounter]).toEqual([
      { SS: ['shardId-000000000005', 'shardId-000000000006'] },
      { S: (1n << 127n).toString() },
      { S: MAX_HASH_KEY.toString() },
      { N: '0' },
    ]);
    await store.leases.updateMeta(key, { childShardIds: [] });
    item = await raw(key);
    expect('childShardIds' in item).toBe(false);
  });

  it('workers and the migration marker never appear in the lease table', async () => {
    await store.workers.heartbeat('kcl-worker', { host: 'h' });
    await store.admin.setMigrationMarker({ migratedTo: 'postgres', migratedAt: new Date(0) });
    const scan = await client.send(new ScanCommand({ TableName: tableName, ConsistentRead: true }));
    for (const item of scan.Items ?? []) {
      expect(javaFormatProblems(item), item.leaseKey?.S).toEqual([]);
    }
    const workers = await client.send(
      new ScanCommand({ TableName: `${tableName}-kcl-workers`, ConsistentRead: true }),
    );
    expect((workers.Items ?? []).map((item) => item.entryKey?.S).sort()).toEqual([
      'java-layout-owner',
      'migration-marker',
      'worker:kcl-worker',
    ]);
    const owner = (workers.Items ?? []).find((item) => item.entryKey?.S === 'java-layout-owner');
    expect(owner).toMatchObject({ applicationName: { S: 'kcl:table' }, owner: { S: tableName } });
    const worker = (workers.Items ?? []).find((item) => item.entryKey?.S === 'worker:kcl-worker');
    expect(worker).toMatchObject({
      applicationName: { S: tableName },
      workerId: { S: 'kcl-worker' },
      heartbeat: { N: '1' },
      metadata: { M: { host: { S: 'h' } } },
    });
    expect(worker?.lastHeartbeatAt?.N).toMatch(/^[0-9]+$/);
  });

  it('the shared layout writes the same attributes plus its applicationName partition key', async () => {
    const shared = createDynamoLeaseStore({
      client,
      applicationName: 'billing',
      tableName: 'format-shared',
      layout: 'shared',
      schemaPollIntervalMs: 10,
    });
    await shared.admin.ensureSchema();
    ok(
      await shared.leases.create({
        leaseKey: 'shardId-000000000000',
        checkpoint: ExtendedSequenceNumber.TRIM_HORIZON,
      }),
    );
    const output = await client.send(
      new GetItemCommand({
        TableName: 'format-shared',
        Key: { applicationName: { S: 'billing' }, leaseKey: { S: 'shardId-000000000000' } },
        ConsistentRead: true,
      }),
    );
    const item = output.Item ?? {};
    expect(javaFormatProblems(item, { ...JAVA_LEASE_ATTRIBUTES, applicationName: 'S' })).toEqual([]);
    expect(item.applicationName).toEqual({ S: 'billing' });
  });

  it('the format check itself rejects what the Java reader would not parse', () => {
    expect(
      javaFormatProblems({
        leaseKey: { S: 'k' },
        leaseCounter: { S: '1' },
        checkpoint: { S: 'garbage' },
        checkpointSubSequenceNumber: { N: '0' },
        ownerSwitchesSinceCheckpoint: { N: '0' },
        parentShardIds: { SS: ['a'] },
        childShardIds: { SS: [] },
        leaseOwner: { S: '' },
      }),
    ).toEqual([
      'leaseCounter is S, not N',
      'unexpected attribute parentShardIds',
      'childShardIds is empty',
      'leaseOwner is an empty string',
      'checkpoint is neither digits nor a sentinel',
    ]);
  });
});
