import type { RawBuilder } from 'kysely';
import { sql } from 'kysely';
import type { LeaseRowValues } from './sql-lease-row.js';
import { LEASE_COLUMNS } from './sql-lease-row.js';
import type { SqlLeaseTableNames } from './sql-table-names.js';
import type { SqlRow } from './sql-types.js';

/**
 * Statements and fragments every dialect writes the same way. Values are always parameters;
 * identifiers always go through Kysely's quoting (`sql.table`, `sql.ref`).
 */

/** `"application_name", "lease_key", …` */
export function leaseColumnList(): RawBuilder<unknown> {
  return sql.join(LEASE_COLUMNS.map((column) => sql.ref(column)));
}

/** `("application_name", …) values ($1, …)` for one lease row. */
export function leaseInsertColumnsAndValues(values: LeaseRowValues): RawBuilder<unknown> {
  return sql`(${leaseColumnList()}) values (${sql.join(LEASE_COLUMNS.map((column) => values[column]))})`;
}

/**
 * `application_name = $1 and lease_key = $2 [and lease_counter = $3] [and (condition)]`: one lease,
 * fenced or not.
 */
export function leaseMatch(
  applicationName: string,
  leaseKey: string,
  leaseCounter: number | null,
  condition?: RawBuilder<unknown>,
): RawBuilder<unknown> {
  const key = sql`${sql.ref('application_name')} = ${applicationName} and ${sql.ref('lease_key')} = ${leaseKey}`;
  const fenced = leaseCounter === null ? key : sql`${key} and ${sql.ref('lease_counter')} = ${leaseCounter}`;
  return condition === undefined ? fenced : sql`${fenced} and (${condition})`;
}

export function selectLease(
  tables: SqlLeaseTableNames,
  applicationName: string,
  leaseKey: string,
): RawBuilder<SqlRow> {
  return sql<SqlRow>`select ${leaseColumnList()} from ${sql.table(tables.leases)} where ${leaseMatch(applicationName, leaseKey, null)}`;
}

/** The keys among `leaseKeys` that exist: the read that tells `not-found` from `counter-mismatch`. */
export function selectExistingLeaseKeys(
  tables: SqlLeaseTableNames,
  applicationName: string,
  leaseKeys: readonly string[],
): RawBuilder<{ lease_key: string }> {
  return sql<{
    lease_key: string;
  }>`select ${sql.ref('lease_key')} from ${sql.table(tables.leases)} where ${sql.ref('application_name')} = ${applicationName} and ${sql.ref('lease_key')} in (${sql.join(leaseKeys)})`;
}

/** `lease_key in (…)` plus the row-value fence `(lease_key, lease_counter) in (…)` for a batch. */
export function leaseKeysIn(leaseKeys: readonly string[]): RawBuilder<unknown> {
  return sql`${sql.ref('lease_key')} in (${sql.join(leaseKeys)})`;
}
