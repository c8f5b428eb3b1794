import { sql } from 'kysely';
import type { SqlFlavor } from '../sql-flavor.js';
import { LEASE_COLUMNS } from '../sql-lease-row.js';
import { MAX_APPLICATION_NAME_LENGTH } from '../sql-lease-store-options.js';
import { heartbeatReturning, insertLeaseReturning, updateLeaseReturning } from '../sql-returning-writes.js';
import {
  addLeaseColumns,
  createLeaseTables,
  MAX_LEASE_KEY_LENGTH,
  MAX_SEQUENCE_NUMBER_LENGTH,
  type SqlColumnTypes,
} from '../sql-schema.js';
import type { SqlRow } from '../sql-types.js';
import { postgresSessions } from './postgres-sessions.js';

/**
 * PostgreSQL: `RETURNING` on every write, so each lease operation is one statement and one round
 * trip. Keys use `COLLATE "C"`, which compares and sorts UTF-8 text byte by byte.
 */
const COLUMN_TYPES: SqlColumnTypes = {
  applicationName: sql`varchar(${sql.lit(MAX_APPLICATION_NAME_LENGTH)}) collate "C"`,
  key: sql`varchar(${sql.lit(MAX_LEASE_KEY_LENGTH)}) collate "C"`,
  sequenceNumber: sql`varchar(${sql.lit(MAX_SEQUENCE_NUMBER_LENGTH)})`,
  hashKey: 'varchar(39)',
  text: 'text',
  counter: 'bigint',
  tableOptions: null,
};

export const postgresFlavor: SqlFlavor = {
  name: 'postgres',
  label: 'PostgreSQL',

  createTables: (db, tables) => createLeaseTables(db, tables, COLUMN_TYPES),

  // `add column if not exists`, in the transaction and under the advisory lock the Migrator holds.
  upgradeTables: (db, tables) => addLeaseColumns(db, tables, COLUMN_TYPES, null),

  insertLease: insertLeaseReturning,

  updateLease: updateLeaseReturning,

  async renewLeases(db, tables, applicationName, renewals) {
    // Two array parameters whatever the number of leases: the statement text never changes.
    const { rows } = await sql<SqlRow>`update ${sql.table(tables.leases)} as ${sql.id('lease')}
      set ${sql.ref('lease_counter')} = ${sql.ref('lease.lease_counter')} + 1
      from unnest(${renewals.map((renewal) => renewal.leaseKey)}::varchar[], ${renewals.map((renewal) => renewal.leaseCounter)}::bigint[])
        as ${sql.id('renewal')} (${sql.ref('lease_key')}, ${sql.ref('lease_counter')})
      where ${sql.ref('lease.application_name')} = ${applicationName}
        and ${sql.ref('lease.lease_key')} = ${sql.ref('renewal.lease_key')}
        and ${sql.ref('lease.lease_counter')} = ${sql.ref('renewal.lease_counter')}
      returning ${sql.join(LEASE_COLUMNS.map((column) => sql.ref(`lease.${column}`)))}`.execute(db);
    return { renewed: rows, existingKeys: undefined };
  },

  heartbeatWorker: heartbeatReturning,

  sessions: postgresSessions,

  async setMigrationMarker(db, tables, applicationName, migratedTo, migratedAtMs) {
    await sql`insert into ${sql.table(tables.applications)}
        (${sql.ref('application_name')}, ${sql.ref('migrated_to')}, ${sql.ref('migrated_at_ms')})
      values (${applicationName}, ${migratedTo}, ${migratedAtMs})
      on conflict (${sql.ref('application_name')}) do update set
        ${sql.ref('migrated_to')} = ${sql.ref('excluded.migrated_to')},
        ${sql.ref('migrated_at_ms')} = ${sql.ref('excluded.migrated_at_ms')}`.execute(db);
  },
};
