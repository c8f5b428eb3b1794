import type { LeaseStoreError } from '@kcl/core';
import { ExtendedSequenceNumber } from '@kcl/core';
import { leaseSnapshot } from '@kcl/testkit/conformance';
import type { Kysely } from 'kysely';
import { Migrator, sql } from 'kysely';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { AnyKysely, SqlFlavorName } from '../src/index.js';
import { createSqlLeaseStore, sqlLeaseTableNames } from '../src/index.js';
import { addLeaseColumns } from '../src/sql-schema.js';
import type { TestDatabase } from './test-databases.js';
import { checkDialects, postgresKysely, readRawLease, TEST_DIALECTS } from './test-databases.js';

/**
 * The tables as the previous version of the package (LeaseStore contract v1) created them, copied
 * from its README, so the upgrade is tested against what is deployed, not against today's code.
 */
const V1_DDL: Record<SqlFlavorName, readonly string[]> = {
  postgres: [
    `create table if not exists "kcl_leases" (
      "application_name" varchar(255) collate "C" not null,
      "lease_key" varchar(512) collate "C" not null,
      "lease_owner" varchar(512) collate "C",
      "lease_counter" bigint not null,
      "checkpoint_sequence_number" varchar(256) not null,
      "checkpoint_sub_sequence_number" bigint not null,
      "pending_checkpoint_sequence_number" varchar(256),
      "pending_checkpoint_sub_sequence_number" bigint,
      "owner_switches_since_checkpoint" bigint not null,
      "parent_shard_ids" text not null,
      "child_shard_ids" text not null,
      "hash_key_range_start" varchar(39),
      "hash_key_range_end" varchar(39),
      constraint "kcl_leases_pkey" primary key ("application_name", "lease_key"))`,
    `create table if not exists "kcl_leases_workers" (
      "application_name" varchar(255) collate "C" not null,
      "worker_id" varchar(512) collate "C" not null,
      "heartbeat" bigint not null,
      "last_heartbeat_at_ms" bigint not null,
      "metadata" text not null,
      constraint "kcl_leases_workers_pkey" primary key ("application_name", "worker_id"))`,
    `create table if not exists "kcl_leases_applications" (
      "application_name" varchar(255) collate "C" not null,
      "migrated_to" text,
      "migrated_at_ms" bigint,
      constraint "kcl_leases_applications_pkey" primary key ("application_name"))`,
  ],
  mysql: [
    `create table if not exists \`kcl_leases\` (
      \`application_name\` varchar(255) not null,
      \`lease_key\` varchar(512) not null,
      \`lease_owner\` varchar(512),
      \`lease_counter\` bigint not null,
      \`checkpoint_sequence_number\` varchar(256) not null,
      \`checkpoint_sub_sequence_number\` bigint not null,
      \`pending_checkpoint_sequence_number\` varchar(256),
      \`pending_checkpoint_sub_sequence_number\` bigint,
      \`owner_switches_since_checkpoint\` bigint not null,
      \`parent_shard_ids\` text not null,
      \`child_shard_ids\` text not null,
      \`hash_key_range_start\` varchar(39),
      \`hash_key_range_end\` varchar(39),
      constraint \`kcl_leases_pkey\` primary key (\`application_name\`, \`lease_key\`)
    ) engine = InnoDB default charset = utf8mb4 collate = utf8mb4_nopad_bin row_format = dynamic`,
    `create table if not exists \`kcl_leases_workers\` (
      \`application_name\` varchar(255) not null,
      \`worker_id\` varchar(512) not null,
      \`heartbeat\` bigint not null,
      \`last_heartbeat_at_ms\` bigint not null,
      \`metadata\` text not null,
      constraint \`kcl_leases_workers_pkey\` primary key (\`application_name\`, \`worker_id\`)
    ) engine = InnoDB default charset = utf8mb4 collate = utf8mb4_nopad_bin row_format = dynamic`,
    `create table if not exists \`kcl_leases_applications\` (
      \`application_name\` varchar(255) not null,
      \`migrated_to\` text,
      \`migrated_at_ms\` bigint,
      constraint \`kcl_leases_applications_pkey\` primary key (\`application_name\`)
    ) engine = InnoDB default charset = utf8mb4 collate = utf8mb4_nopad_bin row_format = dynamic`,
  ],
  sqlite: [
    `create table if not exists "kcl_leases" (
      "application_name" text not null, "lease_key" text not null, "lease_owner" text,
      "lease_counter" integer not null,
      "checkpoint_sequence_number" text not null, "checkpoint_sub_sequence_number" integer not null,
      "pending_checkpoint_sequence_number" text, "pending_checkpoint_sub_sequence_number" integer,
      "owner_switches_since_checkpoint" integer not null,
      "parent_shard_ids" text not null, "child_shard_ids" text not null,
      "hash_key_range_start" text, "hash_key_range_end" text,
      constraint "kcl_leases_pkey" primary key ("application_name", "lease_key")) without rowid`,
    `create table if not exists "kcl_leases_workers" (
      "application_name" text not null, "worker_id" text not null, "heartbeat" integer not null,
      "last_heartbeat_at_ms" integer not null, "metadata" text not null,
      constraint "kcl_leases_workers_pkey" primary key ("application_name", "worker_id")) without rowid`,
    `create table if not exists "kcl_leases_applications" (
      "application_name" text not null, "migrated_to" text, "migrated_at_ms" integer,
      constraint "kcl_leases_applications_pkey" primary key ("application_name")) without rowid`,
  ],
};

const NEW_COLUMNS = ['stream_identifier', 'handoff_from', 'handoff_to', 'handoff_deadline_ms'];

/** Creates the v1 tables and records v1's one migration the way v1's `ensureSchema` did. */
async function createVersionOneSchema(db: AnyKysely, flavor: SqlFlavorName): Promise<void> {
  const migrator = new Migrator({
    db,
    provider: {
      getMigrations: async () => ({
        '0001_create_lease_tables': {
          up: async (kysely: Kysely<unknown>) => {
            for (const statement of V1_DDL[flavor]) await sql.raw(statement).execute(kysely);
          },
        },
      }),
    },
    migrationTableName: 'kcl_leases_migration',
    migrationLockTableName: 'kcl_leases_migration_lock',
  });
  const { error } = await migrator.migrateToLatest();
  if (error !== undefined) throw error;
}

/** A lease row as a v1 worker wrote it: every v1 column, in a state a worker would leave it. */
async function insertVersionOneLease(db: AnyKysely): Promise<void> {
  await sql`insert into kcl_leases (application_name, lease_key, lease_owner, lease_counter,
      checkpoint_sequence_number, checkpoint_sub_sequence_number, pending_checkpoint_sequence_number,
      pending_checkpoint_sub_sequence_number, owner_switches_since_checkpoint, parent_shard_ids,
      child_shard_ids, hash_key_range_start, hash_key_range_end)
    values (${'upgraded'}, ${'shardId-000000000001'}, ${'worker-v1'}, 7, ${'4959033827149025660855969253836'}, 3,
      ${null}, ${null}, 1, ${'["shardId-000000000000"]'}, ${'[]'}, ${'0'}, ${'340282366920938463463374607431768211455'})`.execute(
    db,
  );
  await sql`insert into kcl_leases_workers (application_name, worker_id, heartbeat, last_heartbeat_at_ms, metadata)
    values (${'upgraded'}, ${'worker-v1'}, 5, 0, ${'{"host":"old"}'})`.execute(db);
}

async function recordedMigrations(db: AnyKysely): Promise<string[]> {
  const { rows } = await sql<{ name: string }>`select name from kcl_leases_migration order by name`.execute(
    db,
  );
  return rows.map((row) => row.name);
}

const checks = await checkDialects();

for (const dialect of TEST_DIALECTS) {
  const skip = checks.get(dialect.flavor)?.reason ?? null;

  describe.skipIf(skip !== null)(`${dialect.flavor}: upgrading a table of the previous version`, () => {
    let database: TestDatabase;

    beforeEach(async () => {
      database = await dialect.createDatabase();
      await createVersionOneSchema(database.db, dialect.flavor);
      await insertVersionOneLease(database.db);
    });

    afterEach(async () => {
      await database?.drop();
    });

    it('adds the new columns when many workers run ensureSchema at once; old rows read back with nulls, new writes round-trip', async () => {
      const before = await readRawLease(database.db, 'upgraded', 'shardId-000000000001');
      expect(Object.keys(before ?? {})).not.toContain('stream_identifier');

      const workers = Array.from({ length: 5 }, () =>
        createSqlLeaseStore({ db: database.connect({ poolSize: 2 }), applicationName: 'upgraded' }),
      );
      await Promise.all(workers.map((worker) => worker.admin.ensureSchema()));
      expect(await recordedMigrations(database.db)).toEqual([
        '0001_create_lease_tables',
        '0002_add_stream_and_handoff_columns',
      ]);

      const raw = await readRawLease(database.db, 'upgraded', 'shardId-000000000001');
      for (const column of NEW_COLUMNS) expect([column, raw?.[column]]).toEqual([column, null]);

      const store = createSqlLeaseStore({ db: database.db, applicationName: 'upgraded' });
      const old = await store.leases.get('shardId-000000000001');
      expect(leaseSnapshot(old)).toEqual({
        leaseKey: 'shardId-000000000001',
        owner: 'worker-v1',
        leaseCounter: 7,
        checkpoint: '4959033827149025660855969253836/3',
        pendingCheckpoint: null,
        ownerSwitchesSinceCheckpoint: 1,
        parentShardIds: ['shardId-000000000000'],
        childShardIds: [],
        hashKeyRange: '0-340282366920938463463374607431768211455',
        streamIdentifier: null,
        handoff: null,
      });
      expect((await store.admin.scan()).unreadable).toEqual([]);
      // The old row takes part in every write.
      const renewed = await store.leases.renew('shardId-000000000001', 7);
      expect(renewed.ok && renewed.lease.leaseCounter).toBe(8);
      const taken = await store.leases.take('shardId-000000000001', 8, 'worker-v2');
      expect(taken.ok && [taken.lease.owner, taken.lease.handoff]).toEqual(['worker-v2', null]);

      // New writes keep the new fields, exactly.
      const deadline = new Date('2031-02-03T04:05:06.789Z');
      const created = await store.leases.create({
        leaseKey: '123456789012:orders:1700000000:shardId-000000000002',
        checkpoint: ExtendedSequenceNumber.TRIM_HORIZON,
        owner: 'worker-a',
        streamIdentifier: '123456789012:orders:1700000000',
        handoff: { from: 'worker-a', to: 'worker-b', deadline },
      });
      expect(created.ok).toBe(true);
      const read = await store.leases.get('123456789012:orders:1700000000:shardId-000000000002');
      expect(read?.streamIdentifier).toBe('123456789012:orders:1700000000');
      expect(read?.handoff).toEqual({ from: 'worker-a', to: 'worker-b', deadline });
      const stored = await readRawLease(
        database.db,
        'upgraded',
        '123456789012:orders:1700000000:shardId-000000000002',
      );
      expect([stored?.stream_identifier, stored?.handoff_from, stored?.handoff_to]).toEqual([
        '123456789012:orders:1700000000',
        'worker-a',
        'worker-b',
      ]);
      expect(Number(stored?.handoff_deadline_ms)).toBe(deadline.getTime());

      // The worker registry was left as it was.
      const [worker] = await store.workers.list();
      expect([worker?.workerId, worker?.heartbeat, worker?.metadata]).toEqual([
        'worker-v1',
        5,
        { host: 'old' },
      ]);
    });

    it('completes an upgrade that stopped half-way (some columns added, the migration not recorded)', async () => {
      // MySQL and SQLite have no transactional DDL: a worker killed between two ALTERs leaves this.
      await sql`alter table kcl_leases add column stream_identifier ${sql.raw(
        dialect.flavor === 'sqlite' ? 'text' : 'varchar(512)',
      )}`.execute(database.db);
      const store = createSqlLeaseStore({ db: database.db, applicationName: 'upgraded' });
      await store.admin.ensureSchema();
      const raw = await readRawLease(database.db, 'upgraded', 'shardId-000000000001');
      for (const column of NEW_COLUMNS) expect([column, raw?.[column]]).toEqual([column, null]);
      expect(await recordedMigrations(database.db)).toEqual([
        '0001_create_lease_tables',
        '0002_add_stream_and_handoff_columns',
      ]);
      // A table whose columns exist without the record (created by hand from the README's DDL and
      // the v1 bookkeeping) upgrades as well: the migration adds nothing and is recorded.
      await sql`delete from kcl_leases_migration where name = ${'0002_add_stream_and_handoff_columns'}`.execute(
        database.db,
      );
      await store.admin.ensureSchema();
      expect(await recordedMigrations(database.db)).toHaveLength(2);
      expect((await store.leases.get('shardId-000000000001'))?.streamIdentifier).toBeNull();
    });

    it('takes a column another worker added after this one looked as added', async () => {
      const store = createSqlLeaseStore({ db: database.db, applicationName: 'upgraded' });
      await store.admin.ensureSchema();
      // What a worker that listed the columns just before another one added them goes on to do.
      const looked = new Set<string>();
      await addLeaseColumns(
        database.db,
        sqlLeaseTableNames('kcl_leases'),
        { key: 'text', counter: 'bigint' },
        looked,
      );
      expect((await store.leases.get('shardId-000000000001'))?.handoff).toBeNull();
    });

    it('reports the missing columns to a worker that has not run ensureSchema yet', async () => {
      const store = createSqlLeaseStore({ db: database.db, applicationName: 'upgraded' });
      const missing = await store.leases.list().then(
        () => null,
        (error: unknown) => error as LeaseStoreError,
      );
      expect(missing?.code).toBe('LEASE_STORE_SCHEMA_MISSING');
      expect(missing?.message).toContain('are not at the current version');
      await store.admin.ensureSchema();
      expect(await store.leases.list()).toHaveLength(1);
    });
  });
}

describe.skipIf(checks.get('postgres')?.reason !== null)(
  "postgres: a worker with only the README's worker grants, after the upgrade",
  () => {
    let database: TestDatabase;
    const role = `kcl_worker_${Math.random().toString(36).slice(2, 10)}`;

    beforeEach(async () => {
      database = await TEST_DIALECTS[0]!.createDatabase();
      await createVersionOneSchema(database.db, 'postgres');
      await insertVersionOneLease(database.db);
      await sql`create role ${sql.id(role)} login`.execute(database.db);
      // "Grants" in the README, for the workers' user.
      await sql`grant select, insert, update, delete on kcl_leases, kcl_leases_workers, kcl_leases_applications to ${sql.id(role)}`.execute(
        database.db,
      );
      await sql`grant select on kcl_leases_migration to ${sql.id(role)}`.execute(database.db);
    });

    afterEach(async () => {
      // Roles belong to the cluster: revoke its grants here, then drop it, before the database goes.
      await sql`drop owned by ${sql.id(role)}`.execute(database.db);
      await sql`drop role if exists ${sql.id(role)}`.execute(database.db);
      await database?.drop();
    });

    it('cannot upgrade, and says to run ensureSchema once as a user that may; then works', async () => {
      const url = new URL(database.location);
      url.username = role;
      const workerDb = database.connect();
      const asWorker = postgresKysely(url.toString(), { poolSize: 2 });
      try {
        const worker = createSqlLeaseStore({
          db: asWorker,
          applicationName: 'upgraded',
          sessionLiveness: true,
        });
        const refused = await worker.admin.ensureSchema().then(
          () => null,
          (error: unknown) => error as LeaseStoreError,
        );
        expect([refused?.code, refused?.retryable]).toEqual(['LEASE_STORE_FAILURE', false]);
        expect(refused?.message).toMatch(
          /refused to create or upgrade the lease tables .*run admin\.ensureSchema\(\) once as a user that may create and alter tables/,
        );
        await createSqlLeaseStore({ db: workerDb, applicationName: 'schema' }).admin.ensureSchema();
        await worker.admin.ensureSchema();
        const taken = await worker.leases.take('shardId-000000000001', 7, 'worker-v2');
        expect(taken.ok).toBe(true);
        expect((await worker.workers.heartbeat('worker-v2')).metadata).toEqual({});
        // Sessions need no grant: the advisory lock, reading pg_locks, releasing it.
        const session = await worker.workers.attachSession?.('worker-v2');
        expect(await session?.check()).toBe(true);
        expect(await worker.workers.liveSessions?.(['worker-v2'])).toEqual(new Set(['worker-v2']));
        await session?.close();
        expect(await worker.workers.liveSessions?.(['worker-v2'])).toEqual(new Set());
      } finally {
        await asWorker.destroy();
      }
    });
  },
);
