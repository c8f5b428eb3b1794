import type { LeaseStoreAdministration, MigrationMarker, StoreCallOptions } from '@kcl/core';
import { sql } from 'kysely';
import { invalidArgument } from './sql-errors.js';
import { scanLeases } from './sql-lease-repository.js';
import { migrationMarkerFromRow } from './sql-lease-row.js';
import { ensureLeaseSchema } from './sql-schema.js';
import type { SqlStoreContext } from './sql-store-context.js';
import { runSql } from './sql-store-context.js';
import type { SqlRow } from './sql-types.js';

/** What tools and a starting worker need: the schema, the migration marker and whole-table scans. */
export function createSqlLeaseAdministration(context: SqlStoreContext): LeaseStoreAdministration {
  return {
    ensureSchema: (_options?: StoreCallOptions) =>
      ensureLeaseSchema(context.db, context.flavor, context.tables, context.store),
    getMigrationMarker: (_options?: StoreCallOptions) => getMigrationMarker(context),
    setMigrationMarker: (marker: MigrationMarker | null, _options?: StoreCallOptions) =>
      setMigrationMarker(context, marker),
    scan: (_options?: StoreCallOptions) => scanLeases(context),
  };
}

function getMigrationMarker(context: SqlStoreContext): Promise<MigrationMarker | null> {
  return runSql(context, 'reading the migration marker', async () => {
    const { rows } = await sql<SqlRow>`select ${sql.ref('migrated_to')}, ${sql.ref('migrated_at_ms')}
      from ${sql.table(context.tables.applications)}
      where ${sql.ref('application_name')} = ${context.applicationName}`.execute(context.db);
    const row = rows[0];
    return row === undefined ? null : migrationMarkerFromRow(row, context.store);
  });
}

async function setMigrationMarker(context: SqlStoreContext, marker: MigrationMarker | null): Promise<void> {
  if (
    marker !== null &&
    !(marker.migratedAt instanceof Date && Number.isFinite(marker.migratedAt.getTime()))
  ) {
    throw invalidArgument(context.store, 'the migration marker needs a valid migratedAt date');
  }
  const { db, tables, applicationName } = context;
  return runSql(
    context,
    marker === null ? 'clearing the migration marker' : 'setting the migration marker',
    async () => {
      if (marker === null) {
        await sql`update ${sql.table(tables.applications)}
          set ${sql.ref('migrated_to')} = ${null}, ${sql.ref('migrated_at_ms')} = ${null}
          where ${sql.ref('application_name')} = ${applicationName}`.execute(db);
      } else {
        await context.flavor.setMigrationMarker(
          db,
          tables,
          applicationName,
          marker.migratedTo,
          marker.migratedAt.getTime(),
        );
      }
    },
  );
}
