import { sql } from 'kysely';
import type { SqlFlavor } from '../sql-flavor.js';
import { heartbeatReturning, insertLeaseReturning, updateLeaseReturning } from '../sql-returning-writes.js';
import type { SqlColumnTypes } from '../sql-schema.js';
import { addLeaseColumns, createLeaseTables } from '../sql-schema.js';
import { leaseColumnList, leaseKeysIn } from '../sql-statements.js';
import type { SqlRow } from '../sql-types.js';

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

  async upgradeTables(db, tables) {
    // SQLite adds one column per statement, and processes share no migration lock: a column another
    // process adds first is taken as added (see addLeaseColumns).
    const { rows } = await sql<{
      name: string;
    }>`select ${sql.ref('name')} from pragma_table_info(${tables.leases})`.execute(db);
    await addLeaseColumns(db, tables, COLUMN_TYPES, new Set(rows.map((row) => row.name)));
  },

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

  heartbeatWorker: heartbeatReturning,

  // One file, no server and no sessions: a dead worker's leases are taken when they expire.
  sessions: null,

  async setMigrationMarker(db, tables, applicationName, migratedTo, migratedAtMs) {
    await sql`insert into ${sql.table(tables.applications)}
        (${sql.ref('application_name')}, ${sql.ref('migrated_to')}, ${sql.ref('migrated_at_ms')})
      values (${applicationName}, ${migratedTo}, ${migratedAtMs})
      on conflict (${sql.ref('application_name')}) do update set
        ${sql.ref('migrated_to')} = ${sql.ref('excluded.migrated_to')},
        ${sql.ref('migrated_at_ms')} = ${sql.ref('excluded.migrated_at_ms')}`.execute(db);
  },
};
