import { compareLeaseKeys, ExtendedSequenceNumber } from '@kcl/core';
import type { Kysely } from 'kysely';
import { CamelCasePlugin, Migrator, sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AnyKysely, SqlFlavorName } from '../src/index.js';
import { createSqlLeaseStore } from '../src/index.js';
import type { TestDatabase } from './test-databases.js';
import { checkDialects, TEST_DIALECTS } from './test-databases.js';

const checks = await checkDialects();

async function tableNames(db: AnyKysely): Promise<string[]> {
  const tables = await db.introspection.getTables({ withInternalKyselyTables: true });
  return tables.map((table) => table.name).sort();
}

/** The collation of the lease key column, as the database reports it. */
const KEY_COLLATION: Record<SqlFlavorName, (db: AnyKysely) => Promise<string | null>> = {
  postgres: async (db) =>
    (
      await sql<{
        collation: string | null;
      }>`select collation_name as collation from information_schema.columns
        where table_name = 'kcl_leases' and column_name = 'lease_key'`.execute(db)
    ).rows[0]?.collation ?? null,
  mysql: async (db) =>
    (
      await sql<{
        collation: string | null;
      }>`select collation_name as collation from information_schema.columns
        where table_schema = database() and table_name = 'kcl_leases' and column_name = 'lease_key'`.execute(
        db,
      )
    ).rows[0]?.collation ?? null,
  // SQLite declares no collation: its default, BINARY, compares the UTF-8 bytes.
  sqlite: async (db) => {
    const { rows } = await sql<{
      sql: string;
    }>`select sql from sqlite_master where name = 'kcl_leases'`.execute(db);
    return /collate/i.test(rows[0]?.sql ?? '') ? 'declared' : 'BINARY';
  },
};

const EXPECTED_COLLATION: Record<SqlFlavorName, string> = {
  postgres: 'C',
  mysql: 'utf8mb4_nopad_bin',
  sqlite: 'BINARY',
};

for (const dialect of TEST_DIALECTS) {
  const skip = checks.get(dialect.flavor)?.reason ?? null;

  describe.skipIf(skip !== null)(`${dialect.flavor}: schema`, () => {
    let database: TestDatabase;

    beforeAll(async () => {
      database = await dialect.createDatabase();
    });

    afterAll(async () => {
      await database?.drop();
    });

    it("creates its tables with its own migration tables and leaves the application's Kysely migrations alone", async () => {
      const db = database.db;
      // The application's own migrations, with Kysely's default migration tables.
      const applicationMigrator = new Migrator({
        db,
        provider: {
          getMigrations: async () => ({
            '2024_01_01_orders': {
              up: async (kysely: Kysely<unknown>) => {
                await kysely.schema
                  .createTable('orders')
                  .addColumn('id', 'integer', (column) => column.primaryKey())
                  .execute();
              },
            },
          }),
        },
      });
      expect((await applicationMigrator.migrateToLatest()).error).toBeUndefined();

      const store = createSqlLeaseStore({ db, applicationName: 'schema' });
      await store.admin.ensureSchema();
      expect(await tableNames(db)).toEqual([
        'kcl_leases',
        'kcl_leases_applications',
        'kcl_leases_migration',
        'kcl_leases_migration_lock',
        'kcl_leases_workers',
        'kysely_migration',
        'kysely_migration_lock',
        'orders',
      ]);
      const ours = await sql<{ name: string }>`select name from kcl_leases_migration`.execute(db);
      expect(ours.rows.map((row) => row.name).sort()).toEqual([
        '0001_create_lease_tables',
        '0002_add_stream_and_handoff_columns',
      ]);
      const theirs = await applicationMigrator.getMigrations();
      expect(theirs.map((migration) => [migration.name, migration.executedAt !== undefined])).toEqual([
        ['2024_01_01_orders', true],
      ]);
      expect((await applicationMigrator.migrateToLatest()).error).toBeUndefined();
    });

    it(`keys use a binary collation (${EXPECTED_COLLATION[dialect.flavor]})`, async () => {
      await createSqlLeaseStore({ db: database.db, applicationName: 'collation' }).admin.ensureSchema();
      expect(await KEY_COLLATION[dialect.flavor](database.db)).toBe(EXPECTED_COLLATION[dialect.flavor]);
    });

    it('keeps keys that differ only in trailing spaces apart and lists them in UTF-8 byte order', async () => {
      const store = createSqlLeaseStore({ db: database.db, applicationName: 'bytes' });
      await store.admin.ensureSchema();
      // "\uFFFF" sorts before "😀" in UTF-8 but after it in JavaScript's UTF-16 order.
      const keys = ['a ', 'a', 'a\t', 'A', 'é', '😀', '\uFFFF', 'a  ', 'Z'];
      for (const [index, leaseKey] of keys.entries()) {
        const created = await store.leases.create({
          leaseKey,
          checkpoint: ExtendedSequenceNumber.of(String(index)),
        });
        expect([leaseKey, created.ok]).toEqual([leaseKey, true]);
      }
      expect((await store.leases.list()).map((lease) => lease.leaseKey)).toEqual(
        [...keys].sort(compareLeaseKeys),
      );
      expect((await store.leases.get('a '))?.checkpoint.sequenceNumber).toBe('0');
      expect((await store.leases.get('a'))?.checkpoint.sequenceNumber).toBe('1');
      expect((await store.leases.take('a  ', 0, 'w')).ok).toBe(true);
      expect((await store.leases.get('a '))?.owner).toBeNull();
      for (const workerId of ['w', 'w ']) await store.workers.heartbeat(workerId);
      expect((await store.workers.list()).map((worker) => [worker.workerId, worker.heartbeat])).toEqual([
        ['w', 1],
        ['w ', 1],
      ]);
    });

    it('keeps two lease tables in one database apart, each with its own migration tables', async () => {
      const first = createSqlLeaseStore({
        db: database.db,
        applicationName: 'same-app',
        tableName: 'first_leases',
      });
      const second = createSqlLeaseStore({
        db: database.db,
        applicationName: 'same-app',
        tableName: 'second_leases',
      });
      await first.admin.ensureSchema();
      await second.admin.ensureSchema();
      const names = await tableNames(database.db);
      for (const table of ['first_leases', 'second_leases']) {
        expect(names).toEqual(
          expect.arrayContaining([
            table,
            `${table}_workers`,
            `${table}_applications`,
            `${table}_migration`,
            `${table}_migration_lock`,
          ]),
        );
      }
      await first.leases.create({ leaseKey: 'shard', checkpoint: ExtendedSequenceNumber.LATEST });
      await first.admin.setMigrationMarker({ migratedTo: 'second_leases', migratedAt: new Date(0) });
      expect(await second.leases.list()).toEqual([]);
      expect(await second.admin.getMigrationMarker()).toBeNull();
      expect((await first.admin.getMigrationMarker())?.migratedTo).toBe('second_leases');
    });

    it('creates the schema once when several connections run ensureSchema at the same moment', async () => {
      const stores = Array.from({ length: 5 }, () =>
        createSqlLeaseStore({
          db: database.connect({ poolSize: 2 }),
          applicationName: 'at-once',
          tableName: 'racing_leases',
        }),
      );
      await Promise.all(stores.map((store) => store.admin.ensureSchema()));
      const recorded = await sql<{ name: string }>`select name from racing_leases_migration`.execute(
        database.db,
      );
      expect(recorded.rows.map((row) => row.name).sort()).toEqual([
        '0001_create_lease_tables',
        '0002_add_stream_and_handoff_columns',
      ]);
      expect(
        (await stores[4]!.leases.create({ leaseKey: 'k', checkpoint: ExtendedSequenceNumber.LATEST })).ok,
      ).toBe(true);
    });

    it("ignores the caller's plugins: a CamelCasePlugin does not rename the store's columns", async () => {
      const camel = database.db.withPlugin(new CamelCasePlugin());
      const store = createSqlLeaseStore({ db: camel, applicationName: 'camel' });
      await store.admin.ensureSchema();
      const created = await store.leases.create({
        leaseKey: 'k',
        checkpoint: ExtendedSequenceNumber.LATEST,
      });
      expect(created.ok).toBe(true);
      expect((await store.leases.get('k'))?.checkpoint.sentinel).toBe('LATEST');
      expect((await store.workers.heartbeat('w')).heartbeat).toBe(1);
    });
  });
}
