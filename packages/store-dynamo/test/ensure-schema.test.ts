import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { CreateTableCommand, DescribeTableCommand } from '@aws-sdk/client-dynamodb';
import { ExtendedSequenceNumber, LeaseStoreError } from '@kcl/core';
import { ManualClock } from '@kcl/testkit';
import { afterAll, describe, expect, it } from 'vitest';
import { createDynamoLeaseStore, createTableInput, leaseTableDefinition } from '../src/index.js';
import { countCommands } from './command-counter.js';
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
    const result = await driveClock(clock, 1_000, store.ensureSchema());
    expect(result.error).toBeUndefined();
    expect(clock.monotonicNow()).toBeGreaterThanOrEqual(1_000);
    expect(await status(client, 'waiting-app')).toBe('ACTIVE');
    expect(await status(client, 'waiting-app-kcl-workers')).toBe('ACTIVE');
    const created = await store.createLeaseIfAbsent({
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
    const result = await driveClock(clock, 1_000, store.ensureSchema());
    expect(result.error).toBeInstanceOf(LeaseStoreError);
    const error = result.error as LeaseStoreError;
    expect(error.retryable).toBe(true);
    expect(error.message).toMatch(
      /^@kcl\/store-dynamo: table "stuck-app(-kcl-workers)?" did not become ACTIVE within 5000 ms \(last status: CREATING\)/,
    );
    expect(clock.monotonicNow()).toBe(5_000);
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
    expect((await driveClock(clock, 500, store.ensureSchema())).error).toBeUndefined();
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
    await Promise.all(stores.map((store) => store.ensureSchema()));
    expect(counts.get('CreateTableCommand')).toBeGreaterThanOrEqual(2);
    for (const [index, store] of stores.entries()) {
      await store.createLeaseIfAbsent({
        leaseKey: 'shardId-1',
        checkpoint: ExtendedSequenceNumber.of(String(index + 1)),
      });
    }
    expect((await stores[3]?.getLease('shardId-1'))?.checkpoint.sequenceNumber).toBe('4');
  });

  it('leaves an existing table alone and does not call CreateTable', async () => {
    const client = quick.client();
    const store = createDynamoLeaseStore({
      client,
      applicationName: 'existing-app',
      schemaPollIntervalMs: 10,
    });
    await store.ensureSchema();
    const counts = countCommands(client);
    await store.ensureSchema();
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
    await store.ensureSchema();
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
    }).ensureSchema();
    const shared = createDynamoLeaseStore({
      client,
      applicationName: 'someone',
      tableName: 'java-table',
      layout: 'shared',
      schemaPollIntervalMs: 10,
    });
    const error = await shared.ensureSchema().then(
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
    await first.ensureSchema();
    await first.ensureSchema();
    const error = await second.ensureSchema().then(
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
    await expect(Promise.all([sharedA.ensureSchema(), sharedB.ensureSchema()])).resolves.toBeDefined();
  });
});
