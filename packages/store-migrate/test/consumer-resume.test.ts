import { randomBytes } from 'node:crypto';
import { createConsumer } from '@kcl/consumer';
import { ApplicationMigratedError } from '@kcl/core';
import { createDynamoLeaseStore } from '@kcl/store-dynamo';
import { createSqlLeaseStore } from '@kcl/store-sql';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestDatabase } from './support/databases.js';
import { checkPostgres, createPostgresDatabase } from './support/databases.js';
import { FAST_TIMING, Fleet } from './support/fleet.js';
import { startLocalDynamo } from './support/local-dynamo.js';
import { createStream, putRecords, records, startLocalKinesis, until } from './support/local-kinesis.js';
import { runCli } from './support/run-cli.js';

// A fleet stops on DynamoDB, kcl-migrate copies its leases to PostgreSQL, and a consumer started on
// PostgreSQL resumes exactly at the checkpoints: not one record is processed again.

const kinesis = await startLocalKinesis();
const dynamo = await startLocalDynamo();
const postgres = await checkPostgres();
const available = kinesis.check.available && dynamo.check.available && postgres.available;

let database: TestDatabase;
beforeAll(async () => {
  if (available) database = await createPostgresDatabase();
});
afterAll(async () => {
  await database?.drop();
  await kinesis.stop();
  await dynamo.stop();
});

describe.skipIf(!available)('a consumer moved from DynamoDB to PostgreSQL', () => {
  it('resumes at the source checkpoints with zero records processed again', async () => {
    const applicationName = `resume-${randomBytes(4).toString('hex')}`;
    const streamName = applicationName;
    await createStream(kinesis.client, streamName, 3);
    const before = records('before', 300, 50);
    await putRecords(kinesis.client, streamName, before);

    const onDynamo = new Fleet({ streamName, applicationName, newClient: kinesis.newClient });
    await onDynamo.add('old-worker', createDynamoLeaseStore({ client: dynamo.client(), applicationName }));
    // Processed and checkpointed: on a loaded machine a checkpoint may fail, and its batch comes again.
    await until(
      () => new Set(onDynamo.checkpointedProcessed()).size >= before.length,
      30_000,
      'the old fleet to process and checkpoint every record',
    );
    await onDynamo.stopAll();
    expect(onDynamo.distinct().size).toBe(before.length);

    const after = records('after', 120, 50);
    await putRecords(kinesis.client, streamName, after);

    const migrated = await runCli([
      '--from',
      'dynamo',
      '--dynamo-endpoint',
      dynamo.endpoint,
      '--to',
      'postgres',
      '--postgres-url',
      database.url,
      '--app',
      applicationName,
      '--stream',
      streamName,
      '--yes',
      '--watch-ms',
      '1000',
    ]);
    expect(migrated.code, migrated.stderr).toBe(0);
    expect(migrated.stdout).toMatch(/created\s+3/);

    const onPostgres = new Fleet({ streamName, applicationName, newClient: kinesis.newClient });
    await onPostgres.add('new-worker', createSqlLeaseStore({ db: database.connect(), applicationName }));
    await until(
      () => onPostgres.distinct().size >= after.length,
      30_000,
      'the new fleet to process the new records',
    );
    // Give it time to (wrongly) re-read anything before the checkpoints.
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    await onPostgres.stopAll();
    expect(onPostgres.checkpointedProcessed().sort()).toEqual(after.map((record) => record.data).sort());

    // A worker still pointed at DynamoDB refuses to start, naming the new store.
    const stale = createConsumer({
      streamName,
      applicationName,
      kinesis: kinesis.newClient(),
      leaseStore: createDynamoLeaseStore({ client: dynamo.client(), applicationName }),
      ...FAST_TIMING,
      processor: () => ({ processRecords: async () => undefined }),
    });
    const refused = stale.start();
    await expect(refused).rejects.toSatisfy(ApplicationMigratedError.is);
    await expect(refused).rejects.toThrow(/migrated to PostgreSQL table "kcl_leases"/);
  });
});
