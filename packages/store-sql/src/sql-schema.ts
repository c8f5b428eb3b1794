import type { ColumnDataType, Expression, Migration, MigrationProvider, RawBuilder } from 'kysely';
import { Migrator, sql } from 'kysely';
import { isMissingTableError, schemaCreationError, toLeaseStoreError } from './sql-errors.js';
import type { SqlFlavor } from './sql-flavor.js';
import type { AnyKysely } from './sql-lease-store-options.js';
import type { SqlLeaseTableNames } from './sql-table-names.js';

/** Longest lease key, in characters. MySQL's 3,072-byte InnoDB key limit sets it; see the README. */
export const MAX_LEASE_KEY_LENGTH = 512;
/** Longest worker id (also the lease owner column), in characters. */
export const MAX_WORKER_ID_LENGTH = 512;
/** Longest sequence number, in digits (Kinesis uses up to 129). */
export const MAX_SEQUENCE_NUMBER_LENGTH = 256;

/** A column type: a name Kysely knows, or SQL (for collations and lengths). */
// biome-ignore lint/suspicious/noExplicitAny: Kysely's own type for data type expressions.
export type SqlDataType = ColumnDataType | Expression<any>;

/** The column types of one dialect. */
export interface SqlColumnTypes {
  /** `varchar(255)` in a binary, no-pad collation. */
  readonly applicationName: SqlDataType;
  /** `varchar(512)` in a binary, no-pad collation: lease keys, worker ids and owners. */
  readonly key: SqlDataType;
  readonly sequenceNumber: SqlDataType;
  /** Decimal text of a 128-bit hash key (at most 39 digits). */
  readonly hashKey: SqlDataType;
  /** Unbounded text: JSON documents, the migration marker's description. */
  readonly text: SqlDataType;
  readonly counter: SqlDataType;
  /** Appended to every CREATE TABLE (MySQL table options, SQLite's WITHOUT ROWID). */
  readonly tableOptions: RawBuilder<unknown> | null;
}

/**
 * Creates the lease, worker and application tables unless they exist. Every statement is
 * `create table if not exists`, so a run that stopped half-way (MySQL and SQLite have no
 * transactional DDL) completes when run again.
 */
export async function createLeaseTables(
  db: AnyKysely,
  tables: SqlLeaseTableNames,
  types: SqlColumnTypes,
): Promise<void> {
  const withOptions = <T extends { modifyEnd(modifier: RawBuilder<unknown>): T }>(builder: T): T =>
    types.tableOptions === null ? builder : builder.modifyEnd(types.tableOptions);

  await withOptions(
    db.schema
      .createTable(tables.leases)
      .ifNotExists()
      .addColumn('application_name', types.applicationName, (column) => column.notNull())
      .addColumn('lease_key', types.key, (column) => column.notNull())
      .addColumn('lease_owner', types.key)
      .addColumn('lease_counter', types.counter, (column) => column.notNull())
      .addColumn('checkpoint_sequence_number', types.sequenceNumber, (column) => column.notNull())
      .addColumn('checkpoint_sub_sequence_number', types.counter, (column) => column.notNull())
      .addColumn('pending_checkpoint_sequence_number', types.sequenceNumber)
      .addColumn('pending_checkpoint_sub_sequence_number', types.counter)
      .addColumn('owner_switches_since_checkpoint', types.counter, (column) => column.notNull())
      .addColumn('parent_shard_ids', types.text, (column) => column.notNull())
      .addColumn('child_shard_ids', types.text, (column) => column.notNull())
      .addColumn('hash_key_range_start', types.hashKey)
      .addColumn('hash_key_range_end', types.hashKey)
      .addPrimaryKeyConstraint(`${tables.leases}_pkey`, ['application_name', 'lease_key']),
  ).execute();

  await withOptions(
    db.schema
      .createTable(tables.workers)
      .ifNotExists()
      .addColumn('application_name', types.applicationName, (column) => column.notNull())
      .addColumn('worker_id', types.key, (column) => column.notNull())
      .addColumn('heartbeat', types.counter, (column) => column.notNull())
      .addColumn('last_heartbeat_at_ms', types.counter, (column) => column.notNull())
      .addColumn('metadata', types.text, (column) => column.notNull())
      .addPrimaryKeyConstraint(`${tables.workers}_pkey`, ['application_name', 'worker_id']),
  ).execute();

  await withOptions(
    db.schema
      .createTable(tables.applications)
      .ifNotExists()
      .addColumn('application_name', types.applicationName, (column) => column.notNull())
      .addColumn('migrated_to', types.text)
      .addColumn('migrated_at_ms', types.counter)
      .addPrimaryKeyConstraint(`${tables.applications}_pkey`, ['application_name']),
  ).execute();
}

/** The schema's migrations, oldest first. Names sort in the order they must run. */
export function leaseSchemaMigrations(
  flavor: SqlFlavor,
  tables: SqlLeaseTableNames,
): Readonly<Record<string, Migration>> {
  return {
    '0001_create_lease_tables': { up: (db) => flavor.createTables(db, tables) },
  };
}

const SCHEMA_ATTEMPTS = 3;

/**
 * Brings the tables to the current version with Kysely's `Migrator`, using this store's own
 * migration tables. One read when the schema is already current. Concurrent callers are serialized
 * by the Migrator's lock on PostgreSQL (an advisory lock) and MySQL (`GET_LOCK`); on SQLite, where
 * processes do not share that lock, a caller that loses the race to record the migration finds it
 * recorded on its next attempt.
 */
export async function ensureLeaseSchema(
  db: AnyKysely,
  flavor: SqlFlavor,
  tables: SqlLeaseTableNames,
  store: string,
): Promise<void> {
  const migrations = leaseSchemaMigrations(flavor, tables);
  const names = Object.keys(migrations);
  const context = { store, tables };

  const isCurrent = async (): Promise<boolean> => {
    try {
      const { rows } = await sql<{
        name: string;
      }>`select ${sql.ref('name')} from ${sql.table(tables.migration)}`.execute(db);
      const executed = new Set(rows.map((row) => row.name));
      return names.every((name) => executed.has(name));
    } catch (error) {
      if (isMissingTableError(error)) return false;
      throw toLeaseStoreError(error, { ...context, operation: 'reading the schema version' });
    }
  };

  if (await isCurrent()) return;

  const provider: MigrationProvider = { getMigrations: async () => ({ ...migrations }) };
  const migrator = new Migrator({
    db,
    provider,
    migrationTableName: tables.migration,
    migrationLockTableName: tables.migrationLock,
  });
  let lastError: unknown;
  for (let attempt = 1; attempt <= SCHEMA_ATTEMPTS; attempt++) {
    const { error } = await migrator.migrateToLatest();
    if (error === undefined) return;
    lastError = error;
    if (await isCurrent()) return;
  }
  throw schemaCreationError(lastError, context);
}
