import { fileURLToPath } from 'node:url';
import type { ConformanceSessionHarness, ConformanceTransactionHarness } from '@kcl/testkit/conformance';
import { describeLeaseStoreConformance } from '@kcl/testkit/conformance';
import { sql } from 'kysely';
import type { SqlTransaction } from '../src/index.js';
import { createSqlLeaseStore, sqlLeaseTableNames } from '../src/index.js';
import { mysqlSessionLockName } from '../src/mysql/mysql-sessions.js';
import { postgresSessionKeys } from '../src/postgres/postgres-sessions.js';
import type { TestDatabase } from './test-databases.js';
import { checkDialects, readRawLease, TEST_DIALECTS } from './test-databases.js';

const checks = await checkDialects();
const HOLDER = fileURLToPath(new URL('./session-holder.ts', import.meta.url));
const PACKAGE_DIRECTORY = fileURLToPath(new URL('..', import.meta.url));

/** Ends worker sessions from another connection, as an administrator would, and starts holder processes. */
function sessionHarness(database: TestDatabase): ConformanceSessionHarness {
  const tables = sqlLeaseTableNames('kcl_leases');
  const { db, flavor, location } = database;
  return {
    async killSession(applicationName, workerId) {
      const scope = { tables, applicationName };
      if (flavor === 'postgres') {
        const { classId, objectId } = postgresSessionKeys(scope, workerId);
        const { rows } = await sql<{ terminated: boolean }>`select pg_terminate_backend(pid) as terminated
          from pg_locks where locktype = 'advisory' and database = (select oid from pg_database
            where datname = current_database()) and classid = ${classId}::int8::oid
            and objid = ${objectId}::int8::oid and objsubid = 2 and granted`.execute(db);
        if (rows.length !== 1 || rows[0]?.terminated !== true) {
          throw new Error(`no session of ${workerId} to terminate (${JSON.stringify(rows)})`);
        }
        return;
      }
      const name = mysqlSessionLockName(new URL(location).pathname.slice(1), scope, workerId);
      const { rows } = await sql<{ id: number | null }>`select is_used_lock(${name}) as id`.execute(db);
      const id = rows[0]?.id;
      if (id === null || id === undefined) throw new Error(`no session of ${workerId} holds ${name}`);
      await sql`kill ${sql.lit(Number(id))}`.execute(db);
    },
    holderProcess: (applicationName, workerId) => ({
      command: process.execPath,
      args: ['--import', 'tsx', HOLDER, flavor, location, applicationName, workerId],
      cwd: PACKAGE_DIRECTORY,
    }),
  };
}

/** An application table beside the lease tables, written through the store's transactions. */
async function transactionHarness(database: TestDatabase): Promise<ConformanceTransactionHarness> {
  const { db, flavor } = database;
  const text = flavor === 'mysql' ? sql`varchar(200)` : sql`text`;
  await sql`create table if not exists ${sql.table('conformance_output')} (
    ${sql.ref('application_name')} ${text} not null,
    ${sql.ref('record_key')} ${text} not null,
    primary key (${sql.ref('application_name')}, ${sql.ref('record_key')}))`.execute(db);
  return {
    async write(transaction, applicationName, key) {
      await (transaction as SqlTransaction)
        .insertInto('conformance_output')
        .values({ application_name: applicationName, record_key: key })
        .execute();
    },
    async read(applicationName) {
      const rows = await db
        .selectFrom('conformance_output')
        .select('record_key')
        .where('application_name', '=', applicationName)
        .orderBy('record_key')
        .execute();
      return rows.map((row) => String(row.record_key));
    },
    concurrentWriters: flavor !== 'sqlite',
  };
}

for (const dialect of TEST_DIALECTS) {
  let database: TestDatabase | undefined;
  describeLeaseStoreConformance({
    name: `${dialect.flavor} (@kcl/store-sql)`,
    skip: checks.get(dialect.flavor)?.reason ?? null,
    setup: async () => {
      const created = await dialect.createDatabase();
      database = created;
      const sessions = created.flavor !== 'sqlite';
      return {
        // PostgreSQL offers sessions when asked (the test pools give every client an error listener).
        createStore: (applicationName) =>
          createSqlLeaseStore({
            db: created.db,
            applicationName,
            ...(sessions ? { sessionLiveness: true } : {}),
          }),
        readRawLease: (applicationName, leaseKey) => readRawLease(created.db, applicationName, leaseKey),
        ...(sessions ? { sessions: sessionHarness(created) } : {}),
        transactions: await transactionHarness(created),
      };
    },
    teardown: async () => {
      await database?.drop();
    },
    onNote: (message) => console.info(message),
  });
}
