import { randomBytes } from 'node:crypto';
import { GetItemCommand } from '@aws-sdk/client-dynamodb';
import type { Lease, LeaseStore } from '@kcl/core';
import { ExtendedSequenceNumber, hashKeyRange } from '@kcl/core';
import { createDynamoLeaseStore } from '@kcl/store-dynamo';
import { createSqlLeaseStore } from '@kcl/store-sql';
import type { JavaLeaseTableItem } from '@kcl/testkit';
import {
  createJavaLeaseTable,
  JAVA_SAMPLE,
  javaKcl3OtherRows,
  javaLeaseItem,
  javaSplitAndMergeLeases,
  putJavaTableItems,
  javaShardId as SHARD,
} from '@kcl/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestDatabase } from './support/databases.js';
import {
  checkMysql,
  checkPostgres,
  createMysqlDatabase,
  createPostgresDatabase,
  createSqliteDatabase,
} from './support/databases.js';
import { startLocalDynamo } from './support/local-dynamo.js';
import { runCli, runInProcess } from './support/run-cli.js';

// The CLI is run as a user runs it (`node bin/kcl-migrate.js …`, no terminal) against a DynamoDB table
// in the Java KCL's format, into each SQL database, and back from PostgreSQL into DynamoDB.

const dynamo = await startLocalDynamo();
const postgres = await checkPostgres();
const mysql = await checkMysql();

afterAll(async () => {
  await dynamo.stop();
});

function unique(prefix: string): string {
  return `${prefix}-${randomBytes(4).toString('hex')}`;
}

const { checkpoint: LONG, pendingCheckpoint: NEXT, halfHashKey: HALF, maxHashKey: MAX_HASH } = JAVA_SAMPLE;

/**
 * Seeds a Java KCL table for a new application: the leases after a split and a merge, a very old
 * unowned row (no sub-sequence number, no owner switches, no hash range) and the KCL 3.x rows that
 * are not leases. Returns the application's name.
 */
async function seedJavaTable(extra: readonly JavaLeaseTableItem[] = []): Promise<string> {
  const applicationName = unique('billing');
  const client = dynamo.client();
  await createJavaLeaseTable(client, applicationName);
  const oldRow = javaLeaseItem({
    leaseKey: SHARD(5),
    leaseCounter: 77,
    checkpoint: '12345',
    checkpointSubSequenceNumber: null,
    ownerSwitchesSinceCheckpoint: null,
  });
  await putJavaTableItems(client, applicationName, [
    ...javaSplitAndMergeLeases(),
    oldRow,
    ...javaKcl3OtherRows(),
    ...extra,
  ]);
  return applicationName;
}

function dynamoStore(applicationName: string, tableName = applicationName) {
  return createDynamoLeaseStore({ client: dynamo.client(), applicationName, tableName });
}

const hash = (start: string, end: string) => hashKeyRange(start, end);

/** The Java table's leases as a copy must hold them: facts exact, owners cleared, counters above. */
const EXPECTED: ReadonlyArray<Omit<Lease, 'ownerSwitchesSinceCheckpoint'>> = [
  {
    leaseKey: SHARD(0),
    owner: null,
    leaseCounter: 2205,
    checkpoint: ExtendedSequenceNumber.SHARD_END,
    pendingCheckpoint: null,
    parentShardIds: [],
    childShardIds: [SHARD(2), SHARD(3)],
    hashKeyRange: hash('0', MAX_HASH),
    streamIdentifier: null,
    handoff: null,
  },
  {
    leaseKey: SHARD(1),
    owner: null,
    leaseCounter: 1524,
    checkpoint: ExtendedSequenceNumber.of(LONG, 3),
    pendingCheckpoint: ExtendedSequenceNumber.of(NEXT),
    parentShardIds: [],
    childShardIds: [],
    hashKeyRange: hash('0', MAX_HASH),
    streamIdentifier: null,
    handoff: null,
  },
  {
    leaseKey: SHARD(2),
    owner: null,
    leaseCounter: 303,
    checkpoint: ExtendedSequenceNumber.SHARD_END,
    pendingCheckpoint: null,
    parentShardIds: [SHARD(0)],
    childShardIds: [SHARD(4)],
    hashKeyRange: hash('0', ((1n << 127n) - 1n).toString()),
    streamIdentifier: null,
    handoff: null,
  },
  {
    leaseKey: SHARD(3),
    owner: null,
    leaseCounter: 304,
    checkpoint: ExtendedSequenceNumber.SHARD_END,
    pendingCheckpoint: null,
    parentShardIds: [SHARD(0)],
    childShardIds: [SHARD(4)],
    hashKeyRange: hash(HALF, MAX_HASH),
    streamIdentifier: null,
    handoff: null,
  },
  {
    leaseKey: SHARD(4),
    owner: null,
    leaseCounter: 13,
    checkpoint: ExtendedSequenceNumber.TRIM_HORIZON,
    pendingCheckpoint: null,
    parentShardIds: [SHARD(2), SHARD(3)],
    childShardIds: [],
    hashKeyRange: hash('0', MAX_HASH),
    streamIdentifier: null,
    handoff: null,
  },
  {
    leaseKey: SHARD(5),
    owner: null,
    leaseCounter: 78,
    checkpoint: ExtendedSequenceNumber.of('12345'),
    pendingCheckpoint: null,
    parentShardIds: [],
    childShardIds: [],
    hashKeyRange: null,
    streamIdentifier: null,
    handoff: null,
  },
];

async function expectExactCopy(store: LeaseStore): Promise<void> {
  const leases = await store.leases.list();
  expect(leases.map(({ ownerSwitchesSinceCheckpoint: _, ...rest }) => rest)).toEqual(EXPECTED);
  expect(leases.find((lease) => lease.leaseKey === SHARD(1))?.ownerSwitchesSinceCheckpoint).toBe(1);
}

const dynamoArgs = (applicationName: string) => [
  '--from',
  'dynamo',
  '--app',
  applicationName,
  '--dynamo-endpoint',
  dynamo.endpoint,
];

describe.skipIf(!dynamo.check.available || !postgres.available)(
  'Java KCL table on DynamoDB → PostgreSQL',
  () => {
    let database: TestDatabase;
    beforeAll(async () => {
      database = await createPostgresDatabase();
    });
    afterAll(async () => {
      await database?.drop();
    });

    it('plans, copies, verifies, marks, re-runs idempotently, keeps a target that moved on, unmarks', async () => {
      const applicationName = await seedJavaTable();
      const args = [...dynamoArgs(applicationName), '--to', 'postgres', '--postgres-url', database.url];
      const target = createSqlLeaseStore({ db: database.db, applicationName });

      const dryRun = await runCli([...args, '--dry-run', '--json']);
      expect(dryRun.code, dryRun.stderr).toBe(0);
      const plan = JSON.parse(dryRun.stdout);
      expect(plan.outcome).toBe('planned');
      expect(plan.source.leases).toBe(6);
      expect(plan.source.skippedRowCount).toBe(5);
      expect(plan.source.skippedRowsByEntityType).toEqual({
        WORKER_METRIC_STATS: 2,
        LEADER: 1,
        CLIENT_VERSION_MIGRATION: 1,
        TABLE_MIGRATION: 1,
      });
      expect(plan.source.owners).toEqual({ 'java-worker-1': 2, 'java-worker-2': 3 });
      expect(plan.plan.map((entry: { action: string }) => entry.action)).toEqual(Array(6).fill('create'));
      expect(plan.plan[1]).toMatchObject({
        leaseKey: SHARD(1),
        checkpoint: LONG,
        checkpointSubSequenceNumber: 3,
      });
      expect(plan.target.schemaMissing).toBe(true);

      const human = await runInProcess([...args, '--dry-run']);
      expect(human.code).toBe(0);
      expect(human.stdout).toContain('Dry run: nothing was written');
      expect(human.stdout).toMatch(
        /shardId-000000000001\s+49590338271490256608559692538361571095921575989136588898\/3/,
      );

      const notConfirmed = await runInProcess([...args, '--watch-ms', '100']);
      expect(notConfirmed.code).toBe(2);
      expect(notConfirmed.stderr).toContain('pass --yes');

      const copy = await runCli([...args, '--yes', '--watch-ms', '300']);
      expect(copy.code, copy.stderr).toBe(0);
      expect(copy.stdout).toMatch(/created\s+6/);
      expect(copy.stdout).toMatch(
        /non-lease rows skipped\s+5 \(CLIENT_VERSION_MIGRATION 1, LEADER 1, TABLE_MIGRATION 1, WORKER_METRIC_STATS 2\)/,
      );
      expect(copy.stdout).toMatch(/verified\s+6 of 6 leases match/);
      expect(copy.stdout).toMatch(/source marked\s+yes/);
      expect(copy.stderr).toMatch(/copying: 6\/6 leases \(100%\)/);
      await expectExactCopy(target);

      const marker = await dynamoStore(applicationName).admin.getMigrationMarker();
      expect(marker?.migratedTo).toMatch(
        /^PostgreSQL table "kcl_leases" \(application ".*"\) at postgres:\/\//,
      );

      const verify = await runInProcess([...args, '--verify']);
      expect(verify.code, verify.stderr).toBe(0);
      expect(verify.stdout).toMatch(/matching\s+6/);

      const again = await runInProcess([...args, '--yes', '--watch-ms', '200', '--json']);
      expect(again.code, again.stderr).toBe(0);
      const rerun = JSON.parse(again.stdout);
      expect(rerun.counts).toMatchObject({ created: 0, updated: 0, unchanged: 6 });

      // A new fleet on the target moves a lease on; neither a re-run nor --verify hides it.
      const lease = (await target.leases.get(SHARD(4))) as Lease;
      const taken = await target.leases.take(SHARD(4), lease.leaseCounter, 'new-worker');
      if (!taken.ok) throw new Error('take failed');
      await target.leases.checkpoint(SHARD(4), taken.lease.leaseCounter, {
        checkpoint: ExtendedSequenceNumber.of('777'),
      });
      const differs = await runInProcess([...args, '--verify', '--json']);
      expect(differs.code).toBe(4);
      expect(JSON.parse(differs.stdout).differences).toMatchObject([
        { leaseKey: SHARD(4), kind: 'different', fields: ['checkpoint'], targetAhead: true },
      ]);
      const kept = await runInProcess([...args, '--yes', '--watch-ms', '200']);
      expect(kept.code).toBe(4);
      expect(kept.stdout).toMatch(/target moved on \(kept\)\s+1/);
      expect(kept.stderr).toContain('--force overwrites them');
      expect((await target.leases.get(SHARD(4)))?.checkpoint.sequenceNumber).toBe('777');
      const forced = await runInProcess([...args, '--yes', '--force', '--json']);
      expect(forced.code, forced.stderr).toBe(0);
      expect(JSON.parse(forced.stdout).counts.overwritten).toBe(1);
      await expectExactCopy(target);

      const unmark = await runInProcess(['--unmark', ...dynamoArgs(applicationName)]);
      expect(unmark.code, unmark.stderr).toBe(0);
      expect(unmark.stdout).toContain('cleared the marker');
      expect(await dynamoStore(applicationName).admin.getMigrationMarker()).toBeNull();
    });

    it('refuses a source whose leases are being renewed, and says who holds them', async () => {
      const applicationName = await seedJavaTable();
      const source = dynamoStore(applicationName);
      let lease = (await source.leases.get(SHARD(1))) as Lease;
      let renewing = true;
      const renewer = (async () => {
        while (renewing) {
          const renewed = await source.leases.renew(SHARD(1), lease.leaseCounter);
          if (renewed.ok) lease = renewed.lease;
          await new Promise((resolve) => setTimeout(resolve, 50));
        }
      })();
      try {
        const run = await runInProcess([
          ...dynamoArgs(applicationName),
          '--to',
          'postgres',
          '--postgres-url',
          database.url,
          '--yes',
          '--watch-ms',
          '600',
        ]);
        expect(run.code).toBe(3);
        expect(run.stderr).toContain('refused: the source is in use');
        expect(run.stderr).toContain(`java-worker-1 holds ${SHARD(1)}`);
        expect(run.stderr).toMatch(/shardId-000000000001\s+java-worker-1\s+\d+ → \d+/);
      } finally {
        renewing = false;
        await renewer;
      }
      expect(
        await createSqlLeaseStore({ db: database.db, applicationName })
          .leases.list()
          .catch(() => []),
      ).toEqual([]);
    });

    it('refuses unreadable lease rows unless --force, which leaves them behind', async () => {
      const applicationName = await seedJavaTable([
        javaLeaseItem({
          leaseKey: SHARD(9),
          leaseCounter: 1,
          checkpoint: 'garbage',
          checkpointSubSequenceNumber: null,
          ownerSwitchesSinceCheckpoint: null,
        }),
      ]);
      const args = [...dynamoArgs(applicationName), '--to', 'postgres', '--postgres-url', database.url];
      const refused = await runInProcess([...args, '--yes', '--watch-ms', '100']);
      expect(refused.code).toBe(3);
      expect(refused.stderr).toContain('1 source lease rows cannot be read');
      expect(refused.stderr).toContain(SHARD(9));
      const forced = await runInProcess([...args, '--yes', '--force', '--no-mark', '--json']);
      expect(forced.code, forced.stderr).toBe(0);
      expect(JSON.parse(forced.stdout).counts.created).toBe(6);
    });
  },
);

describe.skipIf(!dynamo.check.available || !mysql.available)('Java KCL table on DynamoDB → MariaDB', () => {
  let database: TestDatabase;
  beforeAll(async () => {
    database = await createMysqlDatabase();
  });
  afterAll(async () => {
    await database?.drop();
  });

  it('copies every lease exactly and verifies', async () => {
    const applicationName = await seedJavaTable();
    const args = [...dynamoArgs(applicationName), '--to', 'mysql', '--mysql-url', database.url];
    const copy = await runCli([...args, '--yes', '--watch-ms', '200']);
    expect(copy.code, copy.stderr).toBe(0);
    await expectExactCopy(createSqlLeaseStore({ db: database.db, applicationName }));
    expect((await runInProcess([...args, '--verify'])).code).toBe(0);
  });
});

describe.skipIf(!dynamo.check.available)('Java KCL table on DynamoDB → SQLite', () => {
  let database: TestDatabase;
  beforeAll(() => {
    database = createSqliteDatabase();
  });
  afterAll(async () => {
    await database?.drop();
  });

  it('copies every lease exactly into a new file, with a custom table name', async () => {
    const applicationName = await seedJavaTable();
    const args = [
      ...dynamoArgs(applicationName),
      '--to',
      'sqlite',
      '--sqlite-file',
      database.url,
      '--sql-table',
      'billing_leases',
    ];
    const copy = await runInProcess([...args, '--yes', '--watch-ms', '200']);
    expect(copy.code, copy.stderr).toBe(0);
    expect(copy.stdout).toContain(`SQLite table "billing_leases"`);
    await expectExactCopy(
      createSqlLeaseStore({ db: database.db, applicationName, tableName: 'billing_leases' }),
    );
  });
});

describe.skipIf(!dynamo.check.available || !postgres.available)('PostgreSQL → DynamoDB', () => {
  let database: TestDatabase;
  beforeAll(async () => {
    database = await createPostgresDatabase();
  });
  afterAll(async () => {
    await database?.drop();
  });

  it('copies into a DynamoDB table it creates, in the Java format, and marks PostgreSQL', async () => {
    const applicationName = unique('orders');
    const source = createSqlLeaseStore({ db: database.db, applicationName });
    await source.admin.ensureSchema();
    const created = await source.leases.create({
      leaseKey: '123456789012:orders:1700000000:shardId-000000000007',
      checkpoint: ExtendedSequenceNumber.of(LONG, 2),
      pendingCheckpoint: ExtendedSequenceNumber.of(NEXT, 1),
      parentShardIds: [SHARD(5), SHARD(6)],
      hashKeyRange: hash('0', HALF),
      owner: 'pg-worker',
      leaseCounter: 41,
    });
    expect(created.ok).toBe(true);
    await source.leases.create({ leaseKey: SHARD(1), checkpoint: ExtendedSequenceNumber.LATEST });

    const run = await runCli([
      '--from',
      'postgres',
      '--postgres-url',
      database.url,
      '--to',
      'dynamo',
      '--dynamo-endpoint',
      dynamo.endpoint,
      '--app',
      applicationName,
      '--yes',
      '--watch-ms',
      '200',
      '--json',
    ]);
    expect(run.code, run.stderr).toBe(0);
    const report = JSON.parse(run.stdout);
    expect(report).toMatchObject({ outcome: 'completed', marked: true, counts: { created: 2 } });

    const target = dynamoStore(applicationName);
    const copied = await target.leases.get('123456789012:orders:1700000000:shardId-000000000007');
    expect(copied).toMatchObject({
      owner: null,
      leaseCounter: 42,
      parentShardIds: [SHARD(5), SHARD(6)],
      hashKeyRange: hash('0', HALF),
    });
    expect(copied?.checkpoint.toString()).toBe(`${LONG}/2`);
    expect(copied?.pendingCheckpoint?.toString()).toBe(`${NEXT}/1`);
    const raw = await dynamo
      .client()
      .send(new GetItemCommand({ TableName: applicationName, Key: { leaseKey: { S: SHARD(1) } } }));
    expect(raw.Item?.entityType?.S).toBe('LEASE');
    expect(raw.Item?.checkpoint?.S).toBe('LATEST');
    expect((await source.admin.getMigrationMarker())?.migratedTo).toMatch(/^DynamoDB table /);
  });
});
