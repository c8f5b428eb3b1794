import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import {
  CreateTableCommand,
  DescribeTableCommand,
  ListTagsOfResourceCommand,
} from '@aws-sdk/client-dynamodb';
import type { Logger } from '@kcl/core';
import { ExtendedSequenceNumber, LeaseStoreError, noopLogger, StoreCallAbortedError } from '@kcl/core';
import { ManualClock } from '@kcl/testkit';
import { afterAll, describe, expect, it } from 'vitest';
import { createDynamoLeaseStore, createTableInput, leaseTableDefinition } from '../src/index.js';
import { countCommands, failCommands } from './command-counter.js';
import { startLocalDynamo } from './local-dynamo.js';

// Tables that become ACTIVE 60 ms after creation (real time), and tables that never do within a test.
const quick = await startLocalDynamo({ createTableMs: 60 });
const stuck = await startLocalDynamo({ createTableMs: 600_000 });
afterAll(async () => {
  await quick.stop();
  await stuck.stop();
});

/**
 * Runs `work` while moving the manual clock on by `stepMs` whenever the work sleeps on it, until the
 * work settles. Real time passes only for the emulator's round trips.
 */
async function driveClock<T>(
  clock: ManualClock,
  stepMs: number,
  work: Promise<T>,
): Promise<{ value?: T; error?: unknown }> {
  let settled = false;
  const outcome = work.then(
    (value) => ({ value }),
    (error: unknown) => ({ error }),
  );
  void outcome.finally(() => {
    settled = true;
  });
  while (!settled) {
    if (clock.pendingSleeps > 0) await clock.advance(stepMs);
    else await new Promise<void>((resolve) => setImmediate(resolve));
  }
  return outcome;
}

async function status(client: DynamoDBClient, tableName: string): Promise<string | undefined> {
  return (await client.send(new DescribeTableCommand({ TableName: tableName }))).Table?.TableStatus;
}

describe.skipIf(!quick.check.available || !stuck.check.available)('ensureSchema', () => {
  it('creates both tables and waits for them to become ACTIVE, polling on the injected clock', async () => {
    const client = quick.client();
    const clock = new ManualClock();
    const store = createDynamoLeaseStore({
      client,
      applicationName: 'waiting-app',
      clock,
      schemaPollIntervalMs: 1_000,
    });
    const result = await driveClock(clock, 1_000, store.admin.ensureSchema());
    expect(result.error).toBeUndefined();
    expect(clock.monotonicNow()).toBeGreaterThanOrEqual(1_000);
    expect(await status(client, 'waiting-app')).toBe('ACTIVE');
    expect(await status(client, 'waiting-app-kcl-workers')).toBe('ACTIVE');
    const created = await store.leases.create({
      leaseKey: 'shardId-1',
      checkpoint: ExtendedSequenceNumber.LATEST,
    });
    expect(created.ok).toBe(true);
  });

  it('gives up after the timeout with a clear, retryable error', async () => {
    const clock = new ManualClock();
    const store = createDynamoLeaseStore({
      client: stuck.client(),
      applicationName: 'stuck-app',
      clock,
      schemaPollIntervalMs: 1_000,
      schemaWaitTimeoutMs: 5_000,
    });
    const result = await driveClock(clock, 1_000, store.admin.ensureSchema());
    expect(result.error).toBeInstanceOf(LeaseStoreError);
    const error = result.error as LeaseStoreError;
    expect(error.retryable).toBe(true);
    expect(error.message).toMatch(
      /^@kcl\/store-dynamo: table "stuck-app(-kcl-workers)?" did not become ACTIVE within 5000 ms \(last status: CREATING\)/,
    );
    expect(clock.monotonicNow()).toBe(5_000);
  });

  it('stops waiting for a table at once when its signal aborts', async () => {
    const clock = new ManualClock();
    const client = stuck.client();
    const commands = countCommands(client);
    const store = createDynamoLeaseStore({
      client,
      applicationName: 'stuck-aborted-app',
      clock,
      schemaPollIntervalMs: 1_000,
    });
    const controller = new AbortController();
    const outcome = store.admin.ensureSchema({ signal: controller.signal }).then(
      () => null,
      (error: unknown) => error,
    );
    // Both tables are CREATING and the store sleeps on the clock before asking again.
    while (clock.pendingSleeps < 2) await new Promise<void>((resolve) => setImmediate(resolve));
    const describes = commands.get('DescribeTableCommand');
    controller.abort();
    const error = await outcome;
    expect(StoreCallAbortedError.is(error)).toBe(true);
    expect(clock.pendingSleeps).toBe(0);
    expect(clock.monotonicNow()).toBe(0);
    expect(commands.get('DescribeTableCommand')).toBe(describes);
  });

  it('waits for a table someone else is creating instead of failing', async () => {
    const client = quick.client();
    await client.send(
      new CreateTableCommand(
        createTableInput(leaseTableDefinition('racing-app', 'java'), { mode: 'PAY_PER_REQUEST' }),
      ),
    );
    const counts = countCommands(client);
    const clock = new ManualClock();
    const store = createDynamoLeaseStore({
      client,
      applicationName: 'racing-app',
      clock,
      schemaPollIntervalMs: 500,
    });
    expect((await driveClock(clock, 500, store.admin.ensureSchema())).error).toBeUndefined();
    expect(counts.get('CreateTableCommand')).toBe(1); // only the worker table
    expect(counts.get('DescribeTableCommand')).toBeGreaterThan(2);
  });

  it('is safe when many stores race to create one shared table', async () => {
    const client = quick.client();
    const counts = countCommands(client);
    const stores = Array.from({ length: 5 }, (_, index) =>
      createDynamoLeaseStore({
        client,
        applicationName: `racer-${index}`,
        tableName: 'raced-shared',
        layout: 'shared',
        schemaPollIntervalMs: 10,
      }),
    );
    await Promise.all(stores.map((store) => store.admin.ensureSchema()));
    expect(counts.get('CreateTableCommand')).toBeGreaterThanOrEqual(2);
    for (const [index, store] of stores.entries()) {
      await store.leases.create({
        leaseKey: 'shardId-1',
        checkpoint: ExtendedSequenceNumber.of(String(index + 1)),
      });
    }
    expect((await stores[3]?.leases.get('shardId-1'))?.checkpoint.sequenceNumber).toBe('4');
  });

  it('leaves an existing table alone and does not call CreateTable', async () => {
    const client = quick.client();
    const store = createDynamoLeaseStore({
      client,
      applicationName: 'existing-app',
      schemaPollIntervalMs: 10,
    });
    await store.admin.ensureSchema();
    const counts = countCommands(client);
    await store.admin.ensureSchema();
    expect(counts.get('CreateTableCommand')).toBeUndefined();
    expect(counts.get('DescribeTableCommand')).toBe(2);
  });

  it('creates PROVISIONED tables with the capacity asked for', async () => {
    const client = quick.client();
    const store = createDynamoLeaseStore({
      client,
      applicationName: 'provisioned-app',
      billing: { mode: 'PROVISIONED', readCapacityUnits: 10, writeCapacityUnits: 7 },
      schemaPollIntervalMs: 10,
    });
    await store.admin.ensureSchema();
    for (const tableName of ['provisioned-app', 'provisioned-app-kcl-workers']) {
      const table = (await client.send(new DescribeTableCommand({ TableName: tableName }))).Table;
      expect(table?.ProvisionedThroughput).toMatchObject({ ReadCapacityUnits: 10, WriteCapacityUnits: 7 });
    }
  });

  it('refuses a table whose key schema belongs to the other layout', async () => {
    const client = quick.client();
    await createDynamoLeaseStore({
      client,
      applicationName: 'java-table',
      schemaPollIntervalMs: 10,
    }).admin.ensureSchema();
    const shared = createDynamoLeaseStore({
      client,
      applicationName: 'someone',
      tableName: 'java-table',
      layout: 'shared',
      schemaPollIntervalMs: 10,
    });
    const error = await shared.admin.ensureSchema().then(
      () => null,
      (caught: unknown) => caught,
    );
    expect(error).toBeInstanceOf(LeaseStoreError);
    expect((error as LeaseStoreError).retryable).toBe(false);
    expect((error as Error).message).toContain(
      'table "java-table" has the key schema leaseKey (HASH), but the \'shared\' layout needs applicationName (HASH, S) + leaseKey (RANGE, S)',
    );
  });
});

describe.skipIf(!quick.check.available)('one application per Java-layout table', () => {
  it('refuses a second application on a Java-layout table, naming the owner and the fix', async () => {
    const client = quick.client();
    const first = createDynamoLeaseStore({
      client,
      applicationName: 'orders-billing',
      tableName: 'shared-by-mistake',
    });
    const second = createDynamoLeaseStore({
      client,
      applicationName: 'orders-search',
      tableName: 'shared-by-mistake',
    });
    await first.admin.ensureSchema();
    await first.admin.ensureSchema();
    const error = await second.admin.ensureSchema().then(
      () => null,
      (caught: unknown) => caught,
    );
    expect(error).toBeInstanceOf(LeaseStoreError);
    expect((error as LeaseStoreError).retryable).toBe(false);
    expect((error as Error).message).toContain('already holds the leases of application "orders-billing"');
    expect((error as Error).message).toContain("layout: 'shared'");
    // The shared layout keeps several applications in one table.
    const sharedA = createDynamoLeaseStore({
      client,
      applicationName: 'a',
      tableName: 'really-shared',
      layout: 'shared',
    });
    const sharedB = createDynamoLeaseStore({
      client,
      applicationName: 'b',
      tableName: 'really-shared',
      layout: 'shared',
    });
    await expect(Promise.all([sharedA.admin.ensureSchema(), sharedB.admin.ensureSchema()])).resolves.toEqual([
      undefined,
      undefined,
    ]);
    // Each keeps its own lease under the same key.
    for (const [store, checkpoint] of [
      [sharedA, '1'],
      [sharedB, '2'],
    ] as const) {
      const created = await store.leases.create({
        leaseKey: 'shardId-000000000000',
        checkpoint: ExtendedSequenceNumber.of(checkpoint),
      });
      expect(created.ok).toBe(true);
    }
    expect((await sharedA.leases.list()).map((lease) => lease.checkpoint.sequenceNumber)).toEqual(['1']);
    expect((await sharedB.leases.list()).map((lease) => lease.checkpoint.sequenceNumber)).toEqual(['2']);
  });

  it('lets applications with their own Java-layout tables share one custom worker table', async () => {
    const client = quick.client();
    const billing = createDynamoLeaseStore({
      client,
      applicationName: 'billing',
      tableName: 'billing-leases',
      workerTableName: 'all-kcl-workers',
      schemaPollIntervalMs: 10,
    });
    const search = createDynamoLeaseStore({
      client,
      applicationName: 'search',
      tableName: 'search-leases',
      workerTableName: 'all-kcl-workers',
      schemaPollIntervalMs: 10,
    });
    await billing.admin.ensureSchema();
    await search.admin.ensureSchema();
    await billing.admin.ensureSchema();
    await billing.workers.heartbeat('billing-1');
    await search.workers.heartbeat('search-1');
    expect((await billing.workers.list()).map((worker) => worker.workerId)).toEqual(['billing-1']);
    expect((await search.workers.list()).map((worker) => worker.workerId)).toEqual(['search-1']);
  });

  it('refuses a second application on one Java-layout table even when each keeps its own worker table', async () => {
    const client = quick.client();
    const first = createDynamoLeaseStore({
      client,
      applicationName: 'orders-billing',
      tableName: 'one-lease-table',
      workerTableName: 'orders-billing-workers',
      schemaPollIntervalMs: 10,
    });
    const second = createDynamoLeaseStore({
      client,
      applicationName: 'orders-search',
      tableName: 'one-lease-table',
      workerTableName: 'orders-search-workers',
      schemaPollIntervalMs: 10,
    });
    await first.admin.ensureSchema();
    const error = await second.admin.ensureSchema().then(
      () => null,
      (caught: unknown) => caught,
    );
    expect(error).toBeInstanceOf(LeaseStoreError);
    expect((error as LeaseStoreError).retryable).toBe(false);
    expect((error as Error).message).toContain(
      'lease table "one-lease-table" already holds the leases of application "orders-billing", not "orders-search"',
    );
    // The owner is not disturbed, and the lease table names it for every registry.
    await first.admin.ensureSchema();
    expect(await ownerTag(client, 'one-lease-table')).toBe('orders-billing');
  });

  it('without permission for tags it warns, and the registry claim still refuses a second application', async () => {
    const client = quick.client();
    failCommands(client, ['ListTagsOfResourceCommand', 'TagResourceCommand'], () =>
      Object.assign(new Error('User is not authorized to perform: dynamodb:ListTagsOfResource'), {
        name: 'AccessDeniedException',
        $metadata: { httpStatusCode: 400 },
      }),
    );
    const warnings: string[] = [];
    const logger: Logger = { ...noopLogger, warn: (message) => warnings.push(message) };
    const owner = createDynamoLeaseStore({
      client,
      applicationName: 'untagged-owner',
      tableName: 'untagged-table',
      schemaPollIntervalMs: 10,
      logger,
    });
    await owner.admin.ensureSchema();
    expect(warnings).toEqual([
      expect.stringMatching(
        /^@kcl\/store-dynamo: could not check which application owns lease table "untagged-table" through its kcl:application tag \(ListTagsOfResource failed\).*Grant dynamodb:ListTagsOfResource and dynamodb:TagResource/,
      ),
    ]);
    const intruder = createDynamoLeaseStore({
      client,
      applicationName: 'untagged-intruder',
      tableName: 'untagged-table',
      schemaPollIntervalMs: 10,
    });
    const error = await intruder.admin.ensureSchema().then(
      () => null,
      (caught: unknown) => caught,
    );
    expect((error as Error).message).toContain('already holds the leases of application "untagged-owner"');
    // Once tags may be used, the owner's next start records it on the table as well.
    await createDynamoLeaseStore({
      client: quick.client(),
      applicationName: 'untagged-owner',
      tableName: 'untagged-table',
      schemaPollIntervalMs: 10,
    }).admin.ensureSchema();
    expect(await ownerTag(quick.client(), 'untagged-table')).toBe('untagged-owner');
  });
});

async function ownerTag(client: DynamoDBClient, tableName: string): Promise<string | undefined> {
  const table = (await client.send(new DescribeTableCommand({ TableName: tableName }))).Table;
  const tags = await client.send(new ListTagsOfResourceCommand({ ResourceArn: table?.TableArn }));
  return tags.Tags?.find((tag) => tag.Key === 'kcl:application')?.Value;
}
