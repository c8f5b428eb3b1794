import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { LeaseRepository, LeaseStore } from '@kcl/core';
import { ExtendedSequenceNumber, LeaseStoreError } from '@kcl/core';
import type { Kysely } from 'kysely';
import { CamelCasePlugin, sql } from 'kysely';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { AnyKysely, SqlTransaction } from '../src/index.js';
import { createSqlLeaseStore } from '../src/index.js';
import type { TestDatabase } from './test-databases.js';
import { checkDialects, postgresDialect, sqliteKysely } from './test-databases.js';

/** The application's schema as its code names it (camelCase), stored snake_case by CamelCasePlugin. */
interface OutputSchema {
  orderOutput: { recordKey: string; shardId: string };
}

const directories: string[] = [];
const instances: AnyKysely[] = [];

afterEach(async () => {
  await Promise.all(instances.splice(0).map((instance) => instance.destroy()));
  for (const directory of directories.splice(0)) rmSync(directory, { recursive: true, force: true });
});

function sqliteFile(): string {
  const directory = mkdtempSync(join(tmpdir(), 'kcl-transactions-'));
  directories.push(directory);
  return join(directory, 'leases.db');
}

function open(file: string, timeoutMs?: number): AnyKysely {
  const db = sqliteKysely(file, timeoutMs === undefined ? {} : { timeoutMs });
  instances.push(db);
  return db;
}

async function takenLease(store: LeaseStore, leaseKey: string, owner: string): Promise<number> {
  await store.admin.ensureSchema();
  const created = await store.leases.create({ leaseKey, checkpoint: ExtendedSequenceNumber.TRIM_HORIZON });
  if (!created.ok) throw new Error(`create ${leaseKey}: ${created.reason}`);
  const taken = await store.leases.take(leaseKey, created.lease.leaseCounter, owner);
  if (!taken.ok) throw new Error(`take ${leaseKey}: ${taken.reason}`);
  return taken.lease.leaseCounter;
}

const inTransaction = (store: LeaseStore) =>
  (store.leases as Required<LeaseRepository>).checkpointInTransaction;

describe('checkpointInTransaction on SQLite', () => {
  it("hands over a transaction on the caller's Kysely instance, its plugins applied, and keeps its own SQL free of them", async () => {
    const file = sqliteFile();
    const plain = open(file);
    await sql`create table order_output (record_key text primary key, shard_id text not null)`.execute(plain);
    const db = plain.withPlugin(new CamelCasePlugin()) as unknown as Kysely<OutputSchema>;
    const store = createSqlLeaseStore({ db, applicationName: 'plugins' });
    const counter = await takenLease(store, 'shard-1', 'worker-a');
    const result = await inTransaction(store)('shard-1', counter, async (transaction) => {
      await (transaction as SqlTransaction<OutputSchema>)
        .insertInto('orderOutput')
        .values({ recordKey: 'r-1', shardId: 'shard-1' })
        .execute();
      return { update: { checkpoint: ExtendedSequenceNumber.of('42', 7) }, value: 'ok' };
    });
    expect(result.ok).toBe(true);
    expect((await store.leases.get('shard-1'))?.checkpoint.toString()).toBe('42/7');
    const { rows } = await sql<{ record_key: string }>`select record_key from order_output`.execute(plain);
    expect(rows).toEqual([{ record_key: 'r-1' }]);
  });

  it("takes the file's write lock before the work: other connections' lease writes wait for the commit", async () => {
    const file = sqliteFile();
    const mine = open(file);
    await sql`create table order_output (record_key text primary key)`.execute(mine);
    const store = createSqlLeaseStore({ db: mine, applicationName: 'one-writer' });
    const counter = await takenLease(store, 'shard-1', 'worker-a');
    const otherCounter = await takenLease(store, 'shard-2', 'worker-b');
    // Another worker process, as better-sqlite3 sees it: its own connection, waiting 100 ms for a lock
    // (synchronously: it blocks its own event loop meanwhile, as a worker in another process would).
    const other = createSqlLeaseStore({ db: open(file, 100), applicationName: 'one-writer' });
    let duringWork: unknown;
    const result = await inTransaction(store)('shard-1', counter, async (transaction) => {
      duringWork = await other.leases.renew('shard-2', otherCounter).catch((error: unknown) => error);
      await (transaction as SqlTransaction)
        .insertInto('order_output')
        .values({ record_key: 'r-1' })
        .execute();
      return { update: { checkpoint: ExtendedSequenceNumber.of('42') }, value: null };
    });
    expect(result.ok).toBe(true);
    expect(LeaseStoreError.is(duringWork)).toBe(true);
    expect((duringWork as LeaseStoreError).retryable).toBe(true);
    expect(String((duringWork as LeaseStoreError).message)).toMatch(/stayed locked by another connection/);
    // Committed: the other worker writes again.
    expect(await other.leases.renew('shard-2', otherCounter)).toMatchObject({ ok: true });
  });

  it('commits work that reads before it writes while other connections keep trying to commit (renewals)', async () => {
    const file = sqliteFile();
    const mine = open(file);
    await sql`create table order_output (record_key text primary key)`.execute(mine);
    const store = createSqlLeaseStore({ db: mine, applicationName: 'read-then-write' });
    const counter = await takenLease(store, 'shard-1', 'worker-a');
    const otherCounter = await takenLease(store, 'shard-2', 'worker-b');
    const other = createSqlLeaseStore({ db: open(file, 100), applicationName: 'read-then-write' });
    const result = await inTransaction(store)('shard-1', counter, async (transaction) => {
      const { rows } = await sql<{ n: number }>`select count(*) as n from order_output`.execute(
        transaction as SqlTransaction,
      );
      // Another worker renews between the read and the write (it waits for the lock, if it must).
      await other.leases.renew('shard-2', otherCounter).catch(() => undefined);
      await (transaction as SqlTransaction)
        .insertInto('order_output')
        .values({ record_key: `r-${rows[0]?.n ?? 0}` })
        .execute();
      return { update: { checkpoint: ExtendedSequenceNumber.of('42') }, value: null };
    });
    expect(result.ok).toBe(true);
    expect((await store.leases.get('shard-1'))?.checkpoint.toString()).toBe('42');
    const { rows } = await sql<{ record_key: string }>`select record_key from order_output`.execute(mine);
    expect(rows).toEqual([{ record_key: 'r-0' }]);
  });
});

const postgresSkip = (await checkDialects()).get('postgres')?.reason ?? null;

describe.skipIf(postgresSkip !== null)('checkpointInTransaction on PostgreSQL', () => {
  let database: TestDatabase;

  beforeAll(async () => {
    database = await postgresDialect.createDatabase();
    await sql`create table order_output (record_key text primary key)`.execute(database.db);
  });

  afterAll(async () => {
    await database?.drop();
  });

  it('bounds the transaction on the server (lock_timeout, idle_in_transaction_session_timeout), for it alone', async () => {
    const store = createSqlLeaseStore({
      db: database.db,
      applicationName: 'bounded',
      transactionTimeoutMs: 4_000,
    });
    const counter = await takenLease(store, 'shard-1', 'worker-a');
    const settings = await inTransaction(store)('shard-1', counter, async (transaction) => {
      const { rows } = await sql<{ idle: string; lock: string }>`select
        current_setting('idle_in_transaction_session_timeout') as idle,
        current_setting('lock_timeout') as lock`.execute(transaction as SqlTransaction);
      return { update: { checkpoint: ExtendedSequenceNumber.of('42') }, value: rows[0] };
    });
    expect(settings).toMatchObject({ ok: true, value: { idle: '4s', lock: '4s' } });
    const { rows } = await sql<{ lock: string }>`select current_setting('lock_timeout') as lock`.execute(
      database.db,
    );
    expect(rows[0]?.lock).toBe('0');
  });

  it('ends a transaction whose work stalls past transactionTimeoutMs, so it holds no lock for longer', async () => {
    const db = database.connect();
    const store = createSqlLeaseStore({ db, applicationName: 'stalled', transactionTimeoutMs: 300 });
    const counter = await takenLease(store, 'shard-1', 'worker-a');
    const outcome = await inTransaction(store)('shard-1', counter, async (transaction) => {
      await (transaction as SqlTransaction)
        .insertInto('order_output')
        .values({ record_key: 'stalled' })
        .execute();
      // The work waits for something that does not come (a query on the outer db behind this
      // transaction's own row lock, say): the server ends the transaction instead of waiting forever.
      await new Promise((resolve) => setTimeout(resolve, 900));
      return { update: { checkpoint: ExtendedSequenceNumber.of('42') }, value: null };
    }).catch((error: unknown) => error);
    expect(LeaseStoreError.is(outcome)).toBe(true);
    const { rows } = await sql<{ record_key: string }>`select record_key from order_output
      where record_key = 'stalled'`.execute(database.db);
    expect(rows).toEqual([]);
    expect((await store.leases.get('shard-1'))?.checkpoint.isSentinel).toBe(true);
  });
});
