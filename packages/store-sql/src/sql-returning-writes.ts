import { sql } from 'kysely';
import type { LeaseUpdate, LeaseUpdateOutcome } from './sql-flavor.js';
import type { LeaseRowValues, WorkerRowValues } from './sql-lease-row.js';
import { EMPTY_METADATA_JSON } from './sql-lease-row.js';
import { leaseColumnList, leaseInsertColumnsAndValues, leaseMatch } from './sql-statements.js';
import type { SqlLeaseTableNames } from './sql-table-names.js';
import type { AnyKysely, SqlRow } from './sql-types.js';

/**
 * The writes of dialects with `RETURNING` and `ON CONFLICT` (PostgreSQL, SQLite): each is one
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
      where ${leaseMatch(update.applicationName, update.leaseKey, update.leaseCounter, update.condition)}
      returning ${leaseColumnList()}`.execute(db);
  const row = rows[0];
  return row === undefined ? { updated: false, exists: undefined } : { updated: true, row };
}

/**
 * The heartbeat upsert with `ON CONFLICT … DO UPDATE … RETURNING` (PostgreSQL, SQLite): one statement
 * that reports the heartbeat and metadata as stored.
 */
export async function heartbeatReturning(
  db: AnyKysely,
  tables: SqlLeaseTableNames,
  values: WorkerRowValues,
): Promise<SqlRow> {
  // The table's own name qualifies the column: PostgreSQL would find `heartbeat` ambiguous beside
  // `excluded.heartbeat`.
  const assignments = [
    sql`${sql.ref('heartbeat')} = ${sql.ref(`${tables.workers}.heartbeat`)} + 1`,
    sql`${sql.ref('last_heartbeat_at_ms')} = ${sql.ref('excluded.last_heartbeat_at_ms')}`,
    ...(values.metadata === null ? [] : [sql`${sql.ref('metadata')} = ${sql.ref('excluded.metadata')}`]),
  ];
  const { rows } = await sql<SqlRow>`insert into ${sql.table(tables.workers)}
      (${sql.ref('application_name')}, ${sql.ref('worker_id')}, ${sql.ref('heartbeat')}, ${sql.ref('last_heartbeat_at_ms')}, ${sql.ref('metadata')})
    values (${values.application_name}, ${values.worker_id}, 1, ${values.last_heartbeat_at_ms}, ${values.metadata ?? EMPTY_METADATA_JSON})
    on conflict (${sql.ref('application_name')}, ${sql.ref('worker_id')}) do update set ${sql.join(assignments)}
    returning ${sql.ref('heartbeat')}, ${sql.ref('metadata')}`.execute(db);
  const row = rows[0];
  if (row === undefined) throw new Error('the heartbeat upsert returned no row');
  return row;
}
