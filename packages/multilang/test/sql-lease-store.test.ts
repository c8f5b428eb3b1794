import { randomBytes } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openLeaseStore } from '@kcl/stores';
import { checkService, type ServiceCheck } from '@kcl/testkit';
import { createConnection } from 'mysql2/promise';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { recordData } from './support/child-output.js';
import { createTestDaemon, FAST_PROPERTIES, PACKAGE_DIR } from './support/daemon-harness.js';
import { createStream, type LocalAws, putRecords, startLocalAws, until } from './support/local-aws.js';

const POSTGRES_URL = process.env.KCL_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const MYSQL_URL = process.env.KCL_MYSQL_URL ?? 'mysql://root@127.0.0.1:3306/test';

function withDatabase(url: string, database: string): string {
  const parsed = new URL(url);
  parsed.pathname = `/${database}`;
  return parsed.toString();
}

/** A database per run (dropped afterwards). */
interface TestDatabase {
  readonly url: string;
  drop(): Promise<void>;
}

interface Flavor {
  readonly name: string;
  /** Whether its server answers: a missing one is a visible skip locally and a failure in CI. */
  readonly check: ServiceCheck;
  create(): Promise<TestDatabase>;
}

const postgresCheck = await checkService(`PostgreSQL at ${POSTGRES_URL}`, async () => {
  const client = new pg.Client({ connectionString: POSTGRES_URL, connectionTimeoutMillis: 3_000 });
  await client.connect();
  await client.end();
});
const mysqlCheck = await checkService(`MySQL/MariaDB at ${MYSQL_URL}`, async () => {
  const connection = await createConnection({ uri: MYSQL_URL, connectTimeout: 3_000 });
  await connection.end();
});

const flavors: readonly Flavor[] = [
  {
    name: 'sqlite',
    check: { available: true, reason: null },
    create: async () => ({
      url: `sqlite:${join(mkdtempSync(join(tmpdir(), 'kcl-sqlite-')), 'leases.db')}`,
      drop: async () => {},
    }),
  },
  {
    name: 'postgres',
    check: postgresCheck,
    create: async () => {
      const name = `kcl_multilang_${randomBytes(5).toString('hex')}`;
      const admin = new pg.Client({ connectionString: POSTGRES_URL });
      await admin.connect();
      await admin.query(`create database ${name}`);
      return {
        url: withDatabase(POSTGRES_URL, name),
        drop: async () => {
          await admin.query(`drop database if exists ${name} with (force)`);
          await admin.end();
        },
      };
    },
  },
  {
    name: 'mysql',
    check: mysqlCheck,
    create: async () => {
      const name = `kcl_multilang_${randomBytes(5).toString('hex')}`;
      const admin = await createConnection({ uri: MYSQL_URL });
      await admin.query(`create database ${name}`);
      return {
        url: withDatabase(MYSQL_URL, name),
        drop: async () => {
          await admin.query(`drop database if exists ${name}`);
          await admin.end();
        },
      };
    },
  },
];

describe('kcl-multilang with the SQL lease store (kcl.leaseStore = sql)', () => {
  let aws: LocalAws;
  beforeAll(async () => {
    aws = await startLocalAws();
  });
  afterAll(async () => {
    await aws?.stop();
  });

  for (const { name: flavor, check, create } of flavors) {
    const skipped = check.reason === null ? '' : ` (skipped: ${check.reason})`;
    it.skipIf(!check.available)(`keeps leases and checkpoints in ${flavor}${skipped}`, async () => {
      const database = await create();
      try {
        const streamName = `sql-${flavor}`;
        await createStream(aws.kinesis, streamName, 1);
        const written = Array.from({ length: 20 }, (_, index) => ({
          partitionKey: `k${index}`,
          data: `${flavor}-${index}`,
        }));
        await putRecords(aws.kinesis, streamName, written);
        const test = createTestDaemon({
          properties: {
            executableName: 'node test/fixtures/aws-kcl-processor.cjs',
            streamName,
            applicationName: `sql-app-${flavor}`,
            initialPositionInStream: 'TRIM_HORIZON',
            // Kinesis only: no DynamoDB endpoint, the leases live in SQL.
            regionName: aws.kinesisEmulator.region,
            kinesisEndpoint: aws.kinesisEmulator.endpoint,
            'kcl.leaseStore': 'sql',
            'kcl.sqlUrl': database.url,
            'kcl.sqlTableName': 'multilang_leases',
            ...FAST_PROPERTIES,
          },
        });
        await test.daemon.start();
        await until(() => recordData(test.childEvents()).size === written.length, 30_000, 'every record');
        await test.daemon.stop();
        await test.daemon.stopped();

        const last = test
          .childEvents()
          .filter((event) => event.event === 'record')
          .at(-1);
        // The store URL's own way to name the table, read back independently of the daemon's options.
        const store = await openLeaseStore(`${database.url}?table=multilang_leases`, {
          applicationName: `sql-app-${flavor}`,
          workingDirectory: PACKAGE_DIR,
        });
        try {
          const leases = await store.leases.list();
          expect(leases).toHaveLength(1);
          expect(leases[0]?.checkpoint.sequenceNumber).toBe(last?.sequenceNumber);
          expect(leases[0]?.owner).toBeNull();
        } finally {
          await store.close();
        }
      } finally {
        await database.drop();
      }
    });
  }
});
