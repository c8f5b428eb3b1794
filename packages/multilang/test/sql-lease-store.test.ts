import { randomBytes } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { checkService } from '@kcl/testkit';
import { createConnection } from 'mysql2/promise';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openSqlLeaseStore } from '../src/index.js';
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

/** A database per run (dropped afterwards), or null when the server is not there (a visible skip). */
interface TestDatabase {
  readonly url: string;
  drop(): Promise<void>;
}

const databases: Record<string, () => Promise<TestDatabase | null>> = {
  sqlite: async () => ({
    url: `sqlite:${join(mkdtempSync(join(tmpdir(), 'kcl-sqlite-')), 'leases.db')}`,
    drop: async () => {},
  }),
  postgres: async () => {
    const check = await checkService(`PostgreSQL at ${POSTGRES_URL}`, async () => {
      const client = new pg.Client({ connectionString: POSTGRES_URL, connectionTimeoutMillis: 3_000 });
      await client.connect();
      await client.end();
    });
    if (!check.available) return null;
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
  mysql: async () => {
    const check = await checkService(`MySQL/MariaDB at ${MYSQL_URL}`, async () => {
      const connection = await createConnection({ uri: MYSQL_URL, connectTimeout: 3_000 });
      await connection.end();
    });
    if (!check.available) return null;
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
};

describe('kcl-multilang with the SQL lease store (kcl.leaseStore = sql)', () => {
  let aws: LocalAws;
  beforeAll(async () => {
    aws = await startLocalAws();
  });
  afterAll(async () => {
    await aws?.stop();
  });

  it.each(Object.keys(databases))('keeps leases and checkpoints in %s', async (flavor) => {
    const database = await databases[flavor]?.();
    if (database === null || database === undefined) return;
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
      const owned = await openSqlLeaseStore({
        url: database.url,
        applicationName: `sql-app-${flavor}`,
        tableName: 'multilang_leases',
        workingDirectory: PACKAGE_DIR,
      });
      try {
        const leases = await owned.store.listLeases();
        expect(leases).toHaveLength(1);
        expect(leases[0]?.checkpoint.sequenceNumber).toBe(last?.sequenceNumber);
        expect(leases[0]?.owner).toBeNull();
      } finally {
        await owned.close();
      }
    } finally {
      await database.drop();
    }
  });
});
