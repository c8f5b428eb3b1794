import { randomBytes } from 'node:crypto';
import type { AttributeValue } from '@aws-sdk/client-dynamodb';
import { ScanCommand } from '@aws-sdk/client-dynamodb';
import type { Lease, LeaseStore } from '@kcl/core';
import { compareLeaseKeys, ExtendedSequenceNumber, hashKeyRange, leasesEqual } from '@kcl/core';
import { createDynamoLeaseStore } from '@kcl/store-dynamo';
import type { AnyKysely } from '@kcl/store-sql';
import { createSqlLeaseStore } from '@kcl/store-sql';
import {
  createJavaLeaseTable,
  JAVA_SAMPLE,
  javaKcl3OtherRows,
  javaLeaseItem,
  putJavaTableItems,
  javaShardId as SHARD,
} from '@kcl/testkit';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createMigratingLeaseStore,
  cutOverLiveMigration,
  isSealedLease,
  readLiveMigrationState,
  startLiveMigration,
} from '../src/index.js';
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

// A multi-stream application (the Java KCL's MultiStreamTracker layout: lease keys
// `account:stream:creationEpoch:shardId`, the stream in `streamName`, the shard in `shardId`, parents
// and children as plain shard ids) moved from DynamoDB into each SQL database and back into a fresh
// DynamoDB table, offline with the CLI and live with a migrating fleet. Every field of every lease is
// compared on the way; the table that comes back must be one the Java multi-stream serializer reads.

const dynamo = await startLocalDynamo();
const postgres = await checkPostgres();
const mysql = await checkMysql();

afterAll(async () => {
  await dynamo.stop();
});

function unique(prefix: string): string {
  return `${prefix}-${randomBytes(4).toString('hex')}`;
}

const { checkpoint: LONG, pendingCheckpoint: NEXT, halfHashKey: HALF, maxHashKey: MAX } = JAVA_SAMPLE;
const BELOW_HALF = ((1n << 127n) - 1n).toString();
const PAYMENTS_CHECKPOINT = '49590338271490256608559692538361571095921575989136500000';

const ORDERS = '123456789012:orders:1700000000';
const PAYMENTS = '123456789012:payments:1700000001';
/** Another account's stream, as a cross-account multi-stream application reads it. */
const CLICKS = '210987654321:clicks:1700000002';
const key = (stream: string, shard: number): string => `${stream}:${SHARD(shard)}`;

/** The leases as Java KCL 2.x and 3.x multi-stream workers write them. */
function javaMultiStreamItems() {
  return [
    // orders: a split parent, finished, its children recorded.
    javaLeaseItem({
      leaseKey: key(ORDERS, 0),
      streamName: ORDERS,
      shardId: SHARD(0),
      leaseOwner: 'java-worker-1',
      leaseCounter: 120,
      checkpoint: 'SHARD_END',
      childShardIds: [SHARD(1), SHARD(2)],
      startingHashKey: '0',
      endingHashKey: MAX,
      entityType: 'LEASE',
    }),
    // orders: the split children; one mid-stream with an aggregated-record checkpoint and a prepared one.
    javaLeaseItem({
      leaseKey: key(ORDERS, 1),
      streamName: ORDERS,
      shardId: SHARD(1),
      leaseOwner: 'java-worker-1',
      leaseCounter: 41,
      checkpoint: LONG,
      checkpointSubSequenceNumber: 3,
      pendingCheckpoint: NEXT,
      pendingCheckpointSubSequenceNumber: 1,
      pendingCheckpointState: new Uint8Array([7, 7]),
      ownerSwitchesSinceCheckpoint: 2,
      parentShardId: [SHARD(0)],
      startingHashKey: '0',
      endingHashKey: BELOW_HALF,
      throughputKBps: 3.25,
      entityType: 'LEASE',
    }),
    // 2.x (no entityType), never taken.
    javaLeaseItem({
      leaseKey: key(ORDERS, 2),
      streamName: ORDERS,
      shardId: SHARD(2),
      leaseCounter: 7,
      checkpoint: 'TRIM_HORIZON',
      parentShardId: [SHARD(0)],
      startingHashKey: HALF,
      endingHashKey: MAX,
    }),
    // payments: the same shard id as an orders lease, in a 3.x graceful hand-off (java-worker-1 still
    // holds it and checkpoints; java-worker-2 is next).
    javaLeaseItem({
      leaseKey: key(PAYMENTS, 0),
      streamName: PAYMENTS,
      shardId: SHARD(0),
      leaseOwner: 'java-worker-2',
      checkpointOwner: 'java-worker-1',
      leaseCounter: 300,
      checkpoint: PAYMENTS_CHECKPOINT,
      ownerSwitchesSinceCheckpoint: 1,
      startingHashKey: '0',
      endingHashKey: BELOW_HALF,
      entityType: 'LEASE',
    }),
    // payments: a merge child whose parents' leases were cleaned up already.
    javaLeaseItem({
      leaseKey: key(PAYMENTS, 4),
      streamName: PAYMENTS,
      shardId: SHARD(4),
      leaseOwner: 'java-worker-2',
      leaseCounter: 12,
      checkpoint: 'LATEST',
      parentShardId: [SHARD(2), SHARD(3)],
      startingHashKey: HALF,
      endingHashKey: MAX,
      entityType: 'LEASE',
    }),
    // clicks: a very old row (no sub-sequence number, no owner switches, no hash range).
    javaLeaseItem({
      leaseKey: key(CLICKS, 9),
      streamName: CLICKS,
      shardId: SHARD(9),
      leaseOwner: 'java-worker-3',
      leaseCounter: 77,
      checkpoint: '12345',
      checkpointSubSequenceNumber: null,
      ownerSwitchesSinceCheckpoint: null,
    }),
  ];
}

/** The same leases as kcl must read them, in lease-key order. */
const SOURCE: readonly Lease[] = [
  {
    leaseKey: key(ORDERS, 0),
    owner: 'java-worker-1',
    leaseCounter: 120,
    checkpoint: ExtendedSequenceNumber.SHARD_END,
    pendingCheckpoint: null,
    ownerSwitchesSinceCheckpoint: 0,
    parentShardIds: [],
    childShardIds: [SHARD(1), SHARD(2)],
    hashKeyRange: hashKeyRange('0', MAX),
    streamIdentifier: ORDERS,
    handoff: null,
  },
  {
    leaseKey: key(ORDERS, 1),
    owner: 'java-worker-1',
    leaseCounter: 41,
    checkpoint: ExtendedSequenceNumber.of(LONG, 3),
    pendingCheckpoint: ExtendedSequenceNumber.of(NEXT, 1),
    ownerSwitchesSinceCheckpoint: 2,
    parentShardIds: [SHARD(0)],
    childShardIds: [],
    hashKeyRange: hashKeyRange('0', BELOW_HALF),
    streamIdentifier: ORDERS,
    handoff: null,
  },
  {
    leaseKey: key(ORDERS, 2),
    owner: null,
    leaseCounter: 7,
    checkpoint: ExtendedSequenceNumber.TRIM_HORIZON,
    pendingCheckpoint: null,
    ownerSwitchesSinceCheckpoint: 0,
    parentShardIds: [SHARD(0)],
    childShardIds: [],
    hashKeyRange: hashKeyRange(HALF, MAX),
    streamIdentifier: ORDERS,
    handoff: null,
  },
  {
    leaseKey: key(PAYMENTS, 0),
    owner: 'java-worker-1',
    leaseCounter: 300,
    checkpoint: ExtendedSequenceNumber.of(PAYMENTS_CHECKPOINT),
    pendingCheckpoint: null,
    ownerSwitchesSinceCheckpoint: 1,
    parentShardIds: [],
    childShardIds: [],
    hashKeyRange: hashKeyRange('0', BELOW_HALF),
    streamIdentifier: PAYMENTS,
    handoff: { from: 'java-worker-1', to: 'java-worker-2', deadline: null },
  },
  {
    leaseKey: key(PAYMENTS, 4),
    owner: 'java-worker-2',
    leaseCounter: 12,
    checkpoint: ExtendedSequenceNumber.LATEST,
    pendingCheckpoint: null,
    ownerSwitchesSinceCheckpoint: 0,
    parentShardIds: [SHARD(2), SHARD(3)],
    childShardIds: [],
    hashKeyRange: hashKeyRange(HALF, MAX),
    streamIdentifier: PAYMENTS,
    handoff: null,
  },
  {
    leaseKey: key(CLICKS, 9),
    owner: 'java-worker-3',
    leaseCounter: 77,
    checkpoint: ExtendedSequenceNumber.of('12345'),
    pendingCheckpoint: null,
    ownerSwitchesSinceCheckpoint: 0,
    parentShardIds: [],
    childShardIds: [],
    hashKeyRange: null,
    streamIdentifier: CLICKS,
    handoff: null,
  },
];

/**
 * The leases after `hops` offline copies: every fact kept, owners and with them hand-offs cleared,
 * counters one above the previous store's at each hop.
 */
function afterOfflineCopies(hops: number, leases: readonly Lease[] = SOURCE): Lease[] {
  return leases.map((lease) => ({
    ...lease,
    owner: null,
    handoff: null,
    leaseCounter: lease.leaseCounter + hops,
  }));
}

/** A lease with plain values, so a failing comparison shows what differs. */
function plain(lease: Lease) {
  return {
    ...lease,
    checkpoint: lease.checkpoint.toString(),
    pendingCheckpoint: lease.pendingCheckpoint?.toString() ?? null,
    hashKeyRange:
      lease.hashKeyRange === null
        ? null
        : `${lease.hashKeyRange.startingHashKey}…${lease.hashKeyRange.endingHashKey}`,
    handoff:
      lease.handoff === null
        ? null
        : { ...lease.handoff, deadline: lease.handoff.deadline?.getTime() ?? null },
  };
}

/** Every field of every lease, in lease-key order: compared as values and with `leasesEqual`. */
function expectLeases(actual: readonly Lease[], expected: readonly Lease[]): void {
  const sorted = [...expected].sort((a, b) => compareLeaseKeys(a.leaseKey, b.leaseKey));
  expect(actual.map(plain)).toEqual(sorted.map(plain));
  expect(actual.map((lease, index) => leasesEqual(lease, sorted[index] as Lease))).toEqual(
    sorted.map(() => true),
  );
}

async function seedJavaMultiStreamTable(): Promise<string> {
  const applicationName = unique('fanout');
  const client = dynamo.client();
  await createJavaLeaseTable(client, applicationName);
  await putJavaTableItems(client, applicationName, [...javaMultiStreamItems(), ...javaKcl3OtherRows()]);
  return applicationName;
}

function dynamoStore(applicationName: string, tableName = applicationName): LeaseStore {
  return createDynamoLeaseStore({ client: dynamo.client(), applicationName, tableName });
}

/** Every item of a DynamoDB table, read as it is stored. */
async function rawItems(tableName: string): Promise<Record<string, AttributeValue>[]> {
  const items: Record<string, AttributeValue>[] = [];
  let startKey: Record<string, AttributeValue> | undefined;
  do {
    const page = await dynamo
      .client()
      .send(new ScanCommand({ TableName: tableName, ConsistentRead: true, ExclusiveStartKey: startKey }));
    items.push(...(page.Items ?? []));
    startKey = page.LastEvaluatedKey;
  } while (startKey !== undefined);
  return items;
}

/** The attributes the Java multi-stream serializer reads, of every item, in lease-key order. */
async function javaAttributes(tableName: string) {
  const items = await rawItems(tableName);
  return items
    .map((item) => ({
      leaseKey: item.leaseKey?.S,
      streamName: item.streamName?.S,
      shardId: item.shardId?.S,
      leaseOwner: item.leaseOwner?.S,
      checkpointOwner: item.checkpointOwner?.S,
      leaseCounter: item.leaseCounter?.N,
      checkpoint: item.checkpoint?.S,
      checkpointSubSequenceNumber: item.checkpointSubSequenceNumber?.N,
      pendingCheckpoint: item.pendingCheckpoint?.S,
      pendingCheckpointSubSequenceNumber: item.pendingCheckpointSubSequenceNumber?.N,
      ownerSwitchesSinceCheckpoint: item.ownerSwitchesSinceCheckpoint?.N,
      parentShardId: item.parentShardId?.SS === undefined ? undefined : [...item.parentShardId.SS].sort(),
      childShardIds: item.childShardIds?.SS === undefined ? undefined : [...item.childShardIds.SS].sort(),
      startingHashKey: item.startingHashKey?.S,
      endingHashKey: item.endingHashKey?.S,
      entityType: item.entityType?.S,
    }))
    .sort((a, b) => compareLeaseKeys(a.leaseKey ?? '', b.leaseKey ?? ''));
}

/** What a fresh table holds after two offline copies, attribute by attribute, as Java writes them. */
function javaAttributesAfterTwoCopies() {
  const common = { leaseOwner: undefined, checkpointOwner: undefined, entityType: 'LEASE' };
  return [
    {
      ...common,
      leaseKey: `${ORDERS}:shardId-000000000000`,
      streamName: ORDERS,
      shardId: 'shardId-000000000000',
      leaseCounter: '122',
      checkpoint: 'SHARD_END',
      checkpointSubSequenceNumber: '0',
      pendingCheckpoint: undefined,
      pendingCheckpointSubSequenceNumber: undefined,
      ownerSwitchesSinceCheckpoint: '0',
      parentShardId: undefined,
      childShardIds: ['shardId-000000000001', 'shardId-000000000002'],
      startingHashKey: '0',
      endingHashKey: MAX,
    },
    {
      ...common,
      leaseKey: `${ORDERS}:shardId-000000000001`,
      streamName: ORDERS,
      shardId: 'shardId-000000000001',
      leaseCounter: '43',
      checkpoint: LONG,
      checkpointSubSequenceNumber: '3',
      pendingCheckpoint: NEXT,
      pendingCheckpointSubSequenceNumber: '1',
      ownerSwitchesSinceCheckpoint: '2',
      parentShardId: ['shardId-000000000000'],
      childShardIds: undefined,
      startingHashKey: '0',
      endingHashKey: BELOW_HALF,
    },
    {
      ...common,
      leaseKey: `${ORDERS}:shardId-000000000002`,
      streamName: ORDERS,
      shardId: 'shardId-000000000002',
      leaseCounter: '9',
      checkpoint: 'TRIM_HORIZON',
      checkpointSubSequenceNumber: '0',
      pendingCheckpoint: undefined,
      pendingCheckpointSubSequenceNumber: undefined,
      ownerSwitchesSinceCheckpoint: '0',
      parentShardId: ['shardId-000000000000'],
      childShardIds: undefined,
      startingHashKey: HALF,
      endingHashKey: MAX,
    },
    {
      ...common,
      leaseKey: `${PAYMENTS}:shardId-000000000000`,
      streamName: PAYMENTS,
      shardId: 'shardId-000000000000',
      leaseCounter: '302',
      checkpoint: PAYMENTS_CHECKPOINT,
      checkpointSubSequenceNumber: '0',
      pendingCheckpoint: undefined,
      pendingCheckpointSubSequenceNumber: undefined,
      ownerSwitchesSinceCheckpoint: '1',
      parentShardId: undefined,
      childShardIds: undefined,
      startingHashKey: '0',
      endingHashKey: BELOW_HALF,
    },
    {
      ...common,
      leaseKey: `${PAYMENTS}:shardId-000000000004`,
      streamName: PAYMENTS,
      shardId: 'shardId-000000000004',
      leaseCounter: '14',
      checkpoint: 'LATEST',
      checkpointSubSequenceNumber: '0',
      pendingCheckpoint: undefined,
      pendingCheckpointSubSequenceNumber: undefined,
      ownerSwitchesSinceCheckpoint: '0',
      parentShardId: ['shardId-000000000002', 'shardId-000000000003'],
      childShardIds: undefined,
      startingHashKey: HALF,
      endingHashKey: MAX,
    },
    {
      ...common,
      leaseKey: `${CLICKS}:shardId-000000000009`,
      streamName: CLICKS,
      shardId: 'shardId-000000000009',
      leaseCounter: '79',
      checkpoint: '12345',
      checkpointSubSequenceNumber: '0',
      pendingCheckpoint: undefined,
      pendingCheckpointSubSequenceNumber: undefined,
      ownerSwitchesSinceCheckpoint: '0',
      parentShardId: undefined,
      childShardIds: undefined,
      startingHashKey: undefined,
      endingHashKey: undefined,
    },
  ];
}

/** The stream column of the SQL rows, read as stored. */
async function storedStreams(db: AnyKysely, applicationName: string, table = 'kcl_leases') {
  const { rows } = await sql<{
    lease_key: string;
    stream_identifier: string | null;
    parent_shard_ids: string;
  }>`
    select lease_key, stream_identifier, parent_shard_ids from ${sql.table(table)}
    where application_name = ${applicationName}`.execute(db);
  return rows
    .map((row) => [row.lease_key, row.stream_identifier, JSON.parse(row.parent_shard_ids)])
    .sort((a, b) => compareLeaseKeys(a[0] as string, b[0] as string));
}

const STORED_STREAMS = [
  [key(ORDERS, 0), ORDERS, []],
  [key(ORDERS, 1), ORDERS, [SHARD(0)]],
  [key(ORDERS, 2), ORDERS, [SHARD(0)]],
  [key(PAYMENTS, 0), PAYMENTS, []],
  [key(PAYMENTS, 4), PAYMENTS, [SHARD(2), SHARD(3)]],
  [key(CLICKS, 9), CLICKS, []],
];

interface SqlKind {
  readonly name: string;
  readonly skip: string | null;
  create(): Promise<TestDatabase>;
  /** The CLI flags that name the database. */
  args(database: TestDatabase): string[];
  readonly cliName: string;
}

const SQL_KINDS: readonly SqlKind[] = [
  {
    name: 'PostgreSQL',
    cliName: 'postgres',
    skip: postgres.available ? null : (postgres.reason ?? 'PostgreSQL is not reachable'),
    create: createPostgresDatabase,
    args: (database) => ['--postgres-url', database.url],
  },
  {
    name: 'MariaDB',
    cliName: 'mysql',
    skip: mysql.available ? null : (mysql.reason ?? 'MariaDB is not reachable'),
    create: createMysqlDatabase,
    args: (database) => ['--mysql-url', database.url],
  },
  {
    name: 'SQLite',
    cliName: 'sqlite',
    skip: null,
    create: async () => createSqliteDatabase(),
    args: (database) => ['--sqlite-file', database.url],
  },
];

describe.each(SQL_KINDS)('a multi-stream Java table: DynamoDB → $name → DynamoDB', (kind) => {
  const skip = !dynamo.check.available ? (dynamo.check.reason ?? 'dynalite did not start') : kind.skip;
  let database: TestDatabase;
  beforeAll(async () => {
    if (skip === null) database = await kind.create();
  });
  afterAll(async () => {
    await database?.drop();
  });

  it.skipIf(skip !== null)(
    'copies every lease of every stream exactly, and back into a fresh table in the Java multi-stream format',
    async () => {
      const applicationName = await seedJavaMultiStreamTable();
      // The Java rows as the DynamoDB store reads them: the stream from streamName, parents plain ids.
      expectLeases((await dynamoStore(applicationName).admin.scan()).leases, SOURCE);

      const sqlSide = [...kind.args(database)];
      const out = await runCli([
        '--from',
        'dynamo',
        '--dynamo-endpoint',
        dynamo.endpoint,
        '--app',
        applicationName,
        '--to',
        kind.cliName,
        ...sqlSide,
        '--yes',
        '--watch-ms',
        '200',
        '--json',
      ]);
      expect(out.code, out.stderr).toBe(0);
      const copied = JSON.parse(out.stdout);
      expect(copied).toMatchObject({
        outcome: 'completed',
        marked: true,
        counts: { created: 6 },
        source: { leases: 6, skippedRowCount: 5 },
        summary: { ownedLeases: 5, handoffs: 1 },
      });
      expect(copied.verification).toMatchObject({ compared: 6, matching: 6, differences: [] });

      const sqlStore = createSqlLeaseStore({ db: database.db, applicationName });
      expectLeases(await sqlStore.leases.list(), afterOfflineCopies(1));
      expect(await storedStreams(database.db, applicationName)).toEqual(STORED_STREAMS);

      // Back, into a DynamoDB table of its own that the copy creates.
      const backTable = `${applicationName}-back`;
      const back = await runInProcess([
        '--from',
        kind.cliName,
        ...sqlSide,
        '--to',
        'dynamo',
        '--dynamo-endpoint',
        dynamo.endpoint,
        '--to-dynamo-table',
        backTable,
        '--app',
        applicationName,
        '--yes',
        '--watch-ms',
        '200',
        '--json',
      ]);
      expect(back.code, back.stderr).toBe(0);
      expect(JSON.parse(back.stdout)).toMatchObject({ outcome: 'completed', counts: { created: 6 } });

      expectLeases(await dynamoStore(applicationName, backTable).leases.list(), afterOfflineCopies(2));
      expect(await javaAttributes(backTable)).toEqual(javaAttributesAfterTwoCopies());

      const verify = await runInProcess([
        '--from',
        kind.cliName,
        ...sqlSide,
        '--to',
        'dynamo',
        '--dynamo-endpoint',
        dynamo.endpoint,
        '--to-dynamo-table',
        backTable,
        '--app',
        applicationName,
        '--verify',
        '--json',
      ]);
      expect(verify.code, verify.stderr).toBe(0);
      expect(JSON.parse(verify.stdout)).toMatchObject({ compared: 6, matching: 6, differences: [] });
    },
  );

  it.skipIf(skip !== null)('copies the leases of one stream with --stream, streams kept', async () => {
    const applicationName = await seedJavaMultiStreamTable();
    const out = await runInProcess([
      '--from',
      'dynamo',
      '--dynamo-endpoint',
      dynamo.endpoint,
      '--app',
      applicationName,
      '--to',
      kind.cliName,
      ...kind.args(database),
      '--stream',
      'payments',
      '--no-mark',
      '--yes',
      '--watch-ms',
      '100',
      '--json',
    ]);
    expect(out.code, out.stderr).toBe(0);
    expect(JSON.parse(out.stdout).counts.created).toBe(2);
    expectLeases(
      await createSqlLeaseStore({ db: database.db, applicationName }).leases.list(),
      afterOfflineCopies(
        1,
        SOURCE.filter((lease) => lease.streamIdentifier === PAYMENTS),
      ),
    );
  });

  it.skipIf(skip !== null)(
    'moves them live: the backfill and the cut-over copy owners, hand-offs, counters and streams exactly',
    async () => {
      const applicationName = await seedJavaMultiStreamTable();
      const from = dynamoStore(applicationName);
      const newTo = () => createSqlLeaseStore({ db: database.db, applicationName });
      const to = newTo();
      // A kcl fleet on the Java table has its worker registry next to it.
      await from.admin.ensureSchema();
      const worker = createMigratingLeaseStore({
        from: dynamoStore(applicationName),
        to: newTo(),
        phaseRefreshMs: 1,
      });
      await worker.workers.heartbeat('kcl-worker-1');

      const started = await startLiveMigration({ from, to });
      expect(started).toMatchObject({ sourceLeases: 6, created: 6, unreadable: [] });
      expectLeases(await to.leases.list(), SOURCE);
      expect(await storedStreams(database.db, applicationName)).toEqual(STORED_STREAMS);

      // The migrating fleet takes over a lease and checkpoints it; the mirror keeps the stream.
      const clicks = key(CLICKS, 9);
      const taken = await worker.leases.take(clicks, 77, 'kcl-worker-1');
      if (!taken.ok) throw new Error(`take failed: ${taken.reason}`);
      const checkpointed = await worker.leases.checkpoint(clicks, taken.lease.leaseCounter, {
        checkpoint: ExtendedSequenceNumber.of('12399', 4),
      });
      if (!checkpointed.ok) throw new Error(`checkpoint failed: ${checkpointed.reason}`);
      const now = SOURCE.map((lease) =>
        lease.leaseKey === clicks
          ? {
              ...lease,
              owner: 'kcl-worker-1',
              // Taken (77 → 78), checkpointed (→ 79): the checkpoint resets the owner switch the take counted.
              leaseCounter: 79,
              checkpoint: ExtendedSequenceNumber.of('12399', 4),
              ownerSwitchesSinceCheckpoint: 0,
            }
          : lease,
      );
      expectLeases([checkpointed.lease], [now.find((lease) => lease.leaseKey === clicks) as Lease]);
      expectLeases(await to.leases.list(), now);

      // A copy the cut-over has to write itself: the lease in a hand-off.
      await to.leases.delete(key(PAYMENTS, 0));
      const report = await cutOverLiveMigration({
        from,
        to,
        watchMs: 1,
        phaseRefreshMs: 1,
        settleMarginMs: 0,
      });
      expect(report).toMatchObject({ moved: 6, takenSeals: [] });
      expect((await readLiveMigrationState(from, to)).phase).toBe('complete');
      for (const row of await from.leases.list()) expect(isSealedLease(row), row.leaseKey).toBe(true);
      expectLeases(await newTo().leases.list(), now);
      expect(await storedStreams(database.db, applicationName)).toEqual(STORED_STREAMS);
    },
  );
});
