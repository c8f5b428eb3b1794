import { GetItemCommand, PutItemCommand } from '@aws-sdk/client-dynamodb';
import { compareLeaseKeys, ExtendedSequenceNumber } from '@kcl/core';
import { javaLeaseItem, javaShardId } from '@kcl/testkit';
import { afterAll, describe, expect, it } from 'vitest';
import { createDynamoLeaseStore } from '../src/index.js';
import { countCommands } from './command-counter.js';
import { startLocalDynamo } from './local-dynamo.js';

const dynamo = await startLocalDynamo();
afterAll(() => dynamo.stop());

const SHARD = javaShardId;

describe.skipIf(!dynamo.check.available)('paginated reads', () => {
  it('lists a Java-layout table page by page with a small page size', async () => {
    const client = dynamo.client();
    const store = createDynamoLeaseStore({
      client,
      applicationName: 'paged-app',
      pageSize: 7,
      schemaPollIntervalMs: 10,
    });
    await store.admin.ensureSchema();
    const keys = Array.from({ length: 50 }, (_, index) => SHARD(index));
    await Promise.all(
      keys.map((leaseKey) =>
        store.leases.create({ leaseKey, checkpoint: ExtendedSequenceNumber.TRIM_HORIZON }),
      ),
    );
    // KCL 3.x rows spread among the pages are skipped and counted on every page.
    for (const workerId of ['w-1', 'w-2', 'w-3']) {
      await client.send(
        new PutItemCommand({
          TableName: 'paged-app',
          Item: { leaseKey: { S: workerId }, wid: { S: workerId }, entityType: { S: 'WORKER_METRIC_STATS' } },
        }),
      );
    }
    const counts = countCommands(client);
    const summary = await store.admin.scan();
    expect(summary.leases.map((lease) => lease.leaseKey)).toEqual(keys);
    expect(summary.skippedRowCount).toBe(3);
    expect(counts.get('ScanCommand')).toBeGreaterThanOrEqual(Math.ceil(53 / 7));
  });

  it('queries one application of a shared table page by page, workers too', async () => {
    const client = dynamo.client();
    const open = (applicationName: string) =>
      createDynamoLeaseStore({
        client,
        applicationName,
        tableName: 'paged-shared',
        layout: 'shared',
        pageSize: 4,
        schemaPollIntervalMs: 10,
      });
    const mine = open('team');
    const theirs = open('team:x');
    await mine.admin.ensureSchema();
    for (const [store, count] of [
      [mine, 21],
      [theirs, 13],
    ] as const) {
      for (let index = 0; index < count; index++) {
        await store.leases.create({
          leaseKey: SHARD(index),
          checkpoint: ExtendedSequenceNumber.LATEST,
        });
        await store.workers.heartbeat(`worker-${index}`);
      }
    }
    const counts = countCommands(client);
    expect((await mine.leases.list()).map((lease) => lease.leaseKey)).toEqual(
      Array.from({ length: 21 }, (_, index) => SHARD(index)),
    );
    expect(counts.get('QueryCommand')).toBeGreaterThanOrEqual(6);
    expect(counts.get('ScanCommand')).toBeUndefined();
    const workers = await mine.workers.list();
    expect(workers.map((worker) => worker.workerId)).toEqual(
      Array.from({ length: 21 }, (_, index) => `worker-${index}`).sort(compareLeaseKeys),
    );
    expect(await theirs.leases.list()).toHaveLength(13);
    expect(await theirs.workers.list()).toHaveLength(13);
  });

  it('reads past DynamoDB’s 1 MB page limit without a page size', async () => {
    const client = dynamo.client();
    const store = createDynamoLeaseStore({ client, applicationName: 'big-app', schemaPollIntervalMs: 10 });
    await store.admin.ensureSchema();
    // Rows carry an attribute kcl does not know (20 KB each, 1.6 MB in all), as later Java versions
    // may add attributes: they must be read past and left untouched.
    const padding = 'x'.repeat(20_000);
    const keys = Array.from({ length: 80 }, (_, index) => SHARD(index));
    await Promise.all(
      keys.map((leaseKey, index) =>
        client.send(
          new PutItemCommand({
            TableName: 'big-app',
            Item: javaLeaseItem(
              { leaseKey, leaseCounter: index, checkpoint: String(1_000 + index) },
              { futureAttribute: { S: padding } },
            ),
          }),
        ),
      ),
    );
    const counts = countCommands(client);
    const leases = await store.leases.list();
    expect(leases.map((lease) => lease.leaseKey)).toEqual(keys);
    expect(leases[79]?.checkpoint.sequenceNumber).toBe('1079');
    expect(counts.get('ScanCommand')).toBeGreaterThanOrEqual(2);
    const taken = await store.leases.take(SHARD(5), 5, 'kcl');
    expect(taken.ok).toBe(true);
    const item = await client.send(
      new GetItemCommand({ TableName: 'big-app', Key: { leaseKey: { S: SHARD(5) } }, ConsistentRead: true }),
    );
    expect(item.Item?.futureAttribute?.S).toHaveLength(20_000);
    expect(item.Item?.leaseOwner).toEqual({ S: 'kcl' });
  });
});
