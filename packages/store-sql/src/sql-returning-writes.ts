import { sql } from 'kysely';
import type { LeaseUpdate, LeaseUpdateOutcome } from './sql-flavor.js';
import type { LeaseRowValues, SqlRow } from './sql-lease-row.js';
import type { AnyKysely } from './sql-lease-store-options.js';
import { leaseColumnList, leaseInsertColumnsAndValues, leaseMatch } from './sql-statements.js';
import type { SqlLeaseTableNames } from './sql-table-names.js';

/**
 * The lease writes of dialects with `RETURNING` and `ON CONFLICT` (PostgreSQL, SQLite): each is one
 * statement that reports the row as written.
 */
export async function insertLeaseReturning(
  db: AnyKysely,
  tables: SqlLeaseTableNames,
  values: LeaseRowValues,
): Promise<SqlRow | null> {
  const { rows } =
    await sql<SqlRow>`insert into ${sql.table(tables.leases)} ${leaseInsertColumnsAndValues(values)}
      on conflict (${sql.ref('application_name')}, ${sql.ref('lease_key')}) do nothing
      returning ${leaseColumnList()}`.execute(db);
  return rows[0] ?? null;
}

/** A counter-fenced UPDATE … RETURNING (PostgreSQL, SQLite). */
export async function updateLeaseReturning(
  db: AnyKysely,
  tables: SqlLeaseTableNames,
  update: LeaseUpdate,
): Promise<LeaseUpdateOutcome> {
  const { rows } = await sql<SqlRow>`update ${sql.table(tables.leases)} set ${sql.join(update.assignments)}
      where ${leaseMatch(update.applicationName, update.leaseKey, update.leaseCounter)}
      returning ${leaseColumnList()}`.execute(db);
  const row = rows[0];
  return row === undefined ? { updated: false, exists: undefined } : { updated: true, row };
}
