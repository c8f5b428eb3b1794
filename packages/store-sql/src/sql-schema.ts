import type {
  AlterTableColumnAlteringBuilder,
  ColumnDataType,
  Expression,
  Migration,
  MigrationProvider,
  RawBuilder,
} from 'kysely';
import { Migrator, sql } from 'kysely';
import {
  isDuplicateColumnError,
  isMissingTableError,
  schemaCreationError,
  toLeaseStoreError,
} from './sql-errors.js';
import type { SqlFlavor } from './sql-flavor.js';
import type { SqlLeaseTableNames } from './sql-table-names.js';
import type { AnyKysely } from './sql-types.js';

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
      // The columns migration 0002 adds to older tables, in the same order and with the same types,
      // so a created and an upgraded table are alike.
      .$call((builder) =>
        ADDED_LEASE_COLUMNS.reduce(
          (table, column) => table.addColumn(column, addedColumnType(column, types)),
          builder,
        ),
      )
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

/**
 * The lease table's columns added by the LeaseStore contract v2 (migration 0002): a lease's stream
 * and its hand-off state. All nullable, so rows written before the upgrade (or by a worker of the
 * previous version during a rolling upgrade) read as a single-stream lease without a hand-off.
 */
export const ADDED_LEASE_COLUMNS = [
  'stream_identifier',
  'handoff_from',
  'handoff_to',
  /** The writer's wall clock, epoch milliseconds, as `last_heartbeat_at_ms`. */
  'handoff_deadline_ms',
] as const;

export type AddedLeaseColumn = (typeof ADDED_LEASE_COLUMNS)[number];

/** A stream identifier fits a lease key column (`account:stream:creationEpoch` is part of such keys); the hand-off names workers. */
function addedColumnType(
  column: AddedLeaseColumn,
  types: Pick<SqlColumnTypes, 'key' | 'counter'>,
): SqlDataType {
  return column === 'handoff_deadline_ms' ? types.counter : types.key;
}

/**
 * The body of migration 0002: adds the columns of `ADDED_LEASE_COLUMNS` the lease table lacks.
 * `existingColumns` lists the table's columns, or is null where the database skips existing columns
 * itself (PostgreSQL's `add column if not exists`). Idempotent, and safe when another process adds
 * the same column at the same moment (SQLite has no migration lock across processes): a column that
 * appeared meanwhile is taken as added. One statement per column where DDL is not transactional, so
 * a run that stopped half-way resumes where it stopped.
 */
export async function addLeaseColumns(
  db: AnyKysely,
  tables: SqlLeaseTableNames,
  types: Pick<SqlColumnTypes, 'key' | 'counter'>,
  existingColumns: ReadonlySet<string> | null,
): Promise<void> {
  if (existingColumns === null) {
    let statement: AlterTableColumnAlteringBuilder | undefined;
    for (const column of ADDED_LEASE_COLUMNS) {
      statement = (statement ?? db.schema.alterTable(tables.leases)).addColumn(
        column,
        addedColumnType(column, types),
        (definition) => definition.ifNotExists(),
      );
    }
    await statement?.execute();
    return;
  }
  for (const column of ADDED_LEASE_COLUMNS) {
    if (existingColumns.has(column)) continue;
    try {
      await db.schema.alterTable(tables.leases).addColumn(column, addedColumnType(column, types)).execute();
    } catch (error) {
      if (!isDuplicateColumnError(error)) throw error;
    }
  }
}

/** The schema's migrations, oldest first. Names sort in the order they must run. */
export function leaseSchemaMigrations(
  flavor: SqlFlavor,
  tables: SqlLeaseTableNames,
): Readonly<Record<string, Migration>> {
  return {
    '0001_create_lease_tables': { up: (db) => flavor.createTables(db, tables) },
    '0002_add_stream_and_handoff_columns': { up: (db) => flavor.upgradeTables(db, tables) },
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
