import { sql } from 'kysely';
import type { SqlFlavor } from '../sql-flavor.js';
import type { SqlRow } from '../sql-lease-row.js';
import { insertLeaseReturning, updateLeaseReturning } from '../sql-returning-writes.js';
import type { SqlColumnTypes } from '../sql-schema.js';
import { createLeaseTables } from '../sql-schema.js';
import { leaseColumnList, leaseKeysIn } from '../sql-statements.js';

/**
 * SQLite (3.35 or later): `RETURNING` and `ON CONFLICT` upserts, so each lease operation is one
 * statement. Text compares with SQLite's default BINARY collation, which is UTF-8 byte order; the
 * declared lengths are not enforced by SQLite, so the store checks them itself. Tables are
 * `WITHOUT ROWID`: the primary key is the clustered index.
 */
const COLUMN_TYPES: SqlColumnTypes = {
  applicationName: 'text',
  key: 'text',
  sequenceNumber: 'text',
  hashKey: 'text',
  text: 'text',
  counter: 'integer',
  tableOptions: sql`without rowid`,
};

export const sqliteFlavor: SqlFlavor = {
  name: 'sqlite',
  label: 'SQLite',

  createTables: (db, tables) => createLeaseTables(db, tables, COLUMN_TYPES),

  insertLease: insertLeaseReturning,

  updateLease: updateLeaseReturning,

  async renewLeases(db, tables, applicationName, renewals) {
    // `lease_key in (…)` lets SQLite search the primary key; the row values are the counter fence.
    const fence = sql.join(renewals.map((renewal) => sql`(${renewal.leaseKey}, ${renewal.leaseCounter})`));
    const { rows } = await sql<SqlRow>`update ${sql.table(tables.leases)}
      set ${sql.ref('lease_counter')} = ${sql.ref('lease_counter')} + 1
      where ${sql.ref('application_name')} = ${applicationName}
        and ${leaseKeysIn(renewals.map((renewal) => renewal.leaseKey))}
        and (${sql.ref('lease_key')}, ${sql.ref('lease_counter')}) in (values ${fence})
      returning ${leaseColumnList()}`.execute(db);
    return { renewed: rows, existingKeys: undefined };
  },

  async heartbeatWorker(db, tables, values) {
    const { rows } = await sql<{ heartbeat: number }>`insert into ${sql.table(tables.workers)}
        (${sql.ref('application_name')}, ${sql.ref('worker_id')}, ${sql.ref('heartbeat')}, ${sql.ref('last_heartbeat_at_ms')}, ${sql.ref('metadata')})
      values (${values.application_name}, ${values.worker_id}, 1, ${values.last_heartbeat_at_ms}, ${values.metadata})
      on conflict (${sql.ref('application_name')}, ${sql.ref('worker_id')}) do update set
        ${sql.ref('heartbeat')} = ${sql.ref('heartbeat')} + 1,
        ${sql.ref('last_heartbeat_at_ms')} = ${sql.ref('excluded.last_heartbeat_at_ms')},
        ${sql.ref('metadata')} = ${sql.ref('excluded.metadata')}
      returning ${sql.ref('heartbeat')}`.execute(db);
    return Number(rows[0]?.heartbeat);
  },

  async setMigrationMarker(db, tables, applicationName, migratedTo, migratedAtMs) {
    await sql`insert into ${sql.table(tables.applications)}
        (${sql.ref('application_name')}, ${sql.ref('migrated_to')}, ${sql.ref('migrated_at_ms')})
      values (${applicationName}, ${migratedTo}, ${migratedAtMs})
      on conflict (${sql.ref('application_name')}) do update set
        ${sql.ref('migrated_to')} = ${sql.ref('excluded.migrated_to')},
        ${sql.ref('migrated_at_ms')} = ${sql.ref('excluded.migrated_at_ms')}`.execute(db);
  },
};
