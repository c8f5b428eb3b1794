import { sql } from 'kysely';
import { isDuplicateKeyError } from '../sql-errors.js';
import type { SqlFlavor } from '../sql-flavor.js';
import { EMPTY_METADATA_JSON } from '../sql-lease-row.js';
import { MAX_APPLICATION_NAME_LENGTH } from '../sql-lease-store-options.js';
import {
  addLeaseColumns,
  createLeaseTables,
  MAX_LEASE_KEY_LENGTH,
  MAX_SEQUENCE_NUMBER_LENGTH,
  type SqlColumnTypes,
} from '../sql-schema.js';
import {
  leaseColumnList,
  leaseInsertColumnsAndValues,
  leaseKeysIn,
  leaseMatch,
  selectLease,
} from '../sql-statements.js';
import type { AnyKysely, SqlRow } from '../sql-types.js';
import { mysqlSessions } from './mysql-sessions.js';

/**
 * MySQL 8 and MariaDB 10.5+. Neither has `UPDATE … RETURNING` (MariaDB 10.11 has `RETURNING` for
 * INSERT and DELETE only), so a lease update runs the fenced UPDATE and then reads the row inside one
 * transaction: the row lock the UPDATE took keeps anyone else from changing the row before the read.
 * That is four round trips (begin, update, select, commit) instead of one. Inserts and heartbeats
 * need no read and stay at one statement.
 *
 * Text uses a binary collation without trailing-space padding: `utf8mb4_nopad_bin` (MariaDB) or
 * `utf8mb4_0900_bin` (MySQL 8). The older `utf8mb4_bin` pads with spaces, so it would treat "a" and
 * "a " as the same key and sort "a" after "a\t"; it is used only when neither exists.
 */
const PREFERRED_COLLATIONS = ['utf8mb4_nopad_bin', 'utf8mb4_0900_bin'] as const;
const FALLBACK_COLLATION = 'utf8mb4_bin';

/** Text columns take the table's default collation, also when `ALTER TABLE` adds them later. */
const COLUMN_TYPES: Omit<SqlColumnTypes, 'tableOptions'> = {
  applicationName: sql`varchar(${sql.lit(MAX_APPLICATION_NAME_LENGTH)})`,
  key: sql`varchar(${sql.lit(MAX_LEASE_KEY_LENGTH)})`,
  sequenceNumber: sql`varchar(${sql.lit(MAX_SEQUENCE_NUMBER_LENGTH)})`,
  hashKey: 'varchar(39)',
  text: 'text',
  counter: 'bigint',
};

function columnTypes(collation: string): SqlColumnTypes {
  return {
    ...COLUMN_TYPES,
    // The collation comes from the fixed list above, never from input. The composite keys use
    // (255 + 512) × 4 = 3,068 bytes, inside InnoDB's 3,072-byte limit for DYNAMIC rows.
    tableOptions: sql`engine = InnoDB default charset = utf8mb4 collate = ${sql.raw(collation)} row_format = dynamic`,
  };
}

export const mysqlFlavor: SqlFlavor = {
  name: 'mysql',
  label: 'MySQL/MariaDB',

  async createTables(db, tables) {
    const { rows } = await sql<{ name: string }>`select ${sql.ref('COLLATION_NAME')} as ${sql.ref('name')}
      from ${sql.table('information_schema.COLLATIONS')}
      where ${sql.ref('COLLATION_NAME')} in (${sql.join([...PREFERRED_COLLATIONS])})`.execute(db);
    const available = new Set(rows.map((row) => row.name));
    const collation = PREFERRED_COLLATIONS.find((name) => available.has(name)) ?? FALLBACK_COLLATION;
    await createLeaseTables(db, tables, columnTypes(collation));
  },

  async upgradeTables(db, tables) {
    // MySQL 8 has no `add column if not exists` (MariaDB has): look first. The Migrator's GET_LOCK
    // keeps other workers out meanwhile; each ALTER commits on its own, so a run that stopped
    // half-way resumes with the columns still missing. Adding a nullable column at the end is an
    // instant change on InnoDB (MySQL 8.0.12+, MariaDB 10.3+), but it waits for a metadata lock.
    const { rows } = await sql<{ name: string }>`select ${sql.ref('COLUMN_NAME')} as ${sql.ref('name')}
      from ${sql.table('information_schema.COLUMNS')}
      where ${sql.ref('TABLE_SCHEMA')} = database() and ${sql.ref('TABLE_NAME')} = ${tables.leases}`.execute(
      db,
    );
    await addLeaseColumns(db, tables, COLUMN_TYPES, new Set(rows.map((row) => row.name)));
  },

  async insertLease(db, tables, values) {
    try {
      await sql`insert into ${sql.table(tables.leases)} ${leaseInsertColumnsAndValues(values)}`.execute(db);
      // The row holds exactly the values written: the store checks every length before writing.
      return values;
    } catch (error) {
      if (isDuplicateKeyError(error)) return null;
      throw error;
    }
  },

  updateLease(db, tables, update) {
    // Inside a transaction already (a transactional checkpoint), the row lock lasts until its commit.
    const inTransaction = <T>(body: (transaction: AnyKysely) => Promise<T>): Promise<T> =>
      db.isTransaction ? body(db) : db.transaction().execute(body);
    return inTransaction(async (transaction) => {
      const result = await sql`update ${sql.table(tables.leases)} set ${sql.join(update.assignments)}
        where ${leaseMatch(update.applicationName, update.leaseKey, update.leaseCounter, update.condition)}`.execute(
        transaction,
      );
      const { rows } = await selectLease(tables, update.applicationName, update.leaseKey).execute(
        transaction,
      );
      const row = rows[0];
      // A conditional update always changes a column (the counter, or the hand-off a request records
      // where there was none), so matched and changed rows agree. An unconditional one may change
      // nothing (same values); it applied when the row exists.
      const applied = update.leaseCounter === null || (result.numAffectedRows ?? 0n) > 0n;
      if (applied && row !== undefined) return { updated: true, row };
      return { updated: false, exists: row !== undefined, current: row ?? null };
    });
  },

  renewLeases(db, tables, applicationName, renewals) {
    // Lock the rows first, then update exactly the ones whose counters match: reading after the
    // update could not tell a row renewed now from one whose counter already was one higher.
    return db.transaction().execute(async (transaction) => {
      const leaseKeys = renewals.map((renewal) => renewal.leaseKey);
      const { rows } = await sql<SqlRow>`select ${leaseColumnList()} from ${sql.table(tables.leases)}
        where ${sql.ref('application_name')} = ${applicationName} and ${leaseKeysIn(leaseKeys)}
        for update`.execute(transaction);
      const current = new Map(rows.map((row) => [row.lease_key as string, row]));
      const matching: SqlRow[] = [];
      const seen = new Set<string>();
      for (const renewal of renewals) {
        const row = current.get(renewal.leaseKey);
        if (row === undefined || seen.has(renewal.leaseKey)) continue;
        if (Number(row.lease_counter) !== renewal.leaseCounter) continue;
        seen.add(renewal.leaseKey);
        matching.push(row);
      }
      if (matching.length > 0) {
        const fence = sql.join(matching.map((row) => sql`(${row.lease_key}, ${row.lease_counter})`));
        const result = await sql`update ${sql.table(tables.leases)}
          set ${sql.ref('lease_counter')} = ${sql.ref('lease_counter')} + 1
          where ${sql.ref('application_name')} = ${applicationName}
            and ${leaseKeysIn(matching.map((row) => row.lease_key as string))}
            and (${sql.ref('lease_key')}, ${sql.ref('lease_counter')}) in (${fence})`.execute(transaction);
        if (result.numAffectedRows !== BigInt(matching.length)) {
          throw new Error(
            `renewed ${String(result.numAffectedRows)} of ${matching.length} locked leases; the transaction was rolled back`,
          );
        }
      }
      return {
        renewed: matching.map((row) => ({ ...row, lease_counter: Number(row.lease_counter) + 1 })),
        existingKeys: new Set(current.keys()),
      };
    });
  },

  async heartbeatWorker(db, tables, values) {
    const upsert = (metadata: string | null) => sql`insert into ${sql.table(tables.workers)}
        (${sql.ref('application_name')}, ${sql.ref('worker_id')}, ${sql.ref('heartbeat')}, ${sql.ref('last_heartbeat_at_ms')}, ${sql.ref('metadata')})
      values (${values.application_name}, ${values.worker_id}, 1, ${values.last_heartbeat_at_ms}, ${metadata ?? EMPTY_METADATA_JSON})
      on duplicate key update
        ${sql.ref('heartbeat')} = last_insert_id(${sql.ref('heartbeat')} + 1),
        ${sql.ref('last_heartbeat_at_ms')} = ${values.last_heartbeat_at_ms}
        ${metadata === null ? sql`` : sql`, ${sql.ref('metadata')} = ${metadata}`}`;
    const metadata = values.metadata;
    if (metadata === null) {
      // The metadata kept must be read back, inside the transaction so the row lock the upsert took
      // keeps another heartbeat from changing it first: begin, upsert, select, commit.
      return db.transaction().execute(async (transaction) => {
        await upsert(null).execute(transaction);
        const { rows } = await sql<SqlRow>`select ${sql.ref('heartbeat')}, ${sql.ref('metadata')}
          from ${sql.table(tables.workers)}
          where ${sql.ref('application_name')} = ${values.application_name} and ${sql.ref('worker_id')} = ${values.worker_id}`.execute(
          transaction,
        );
        const row = rows[0];
        if (row === undefined) throw new Error('the worker row was not found after its heartbeat upsert');
        return row;
      });
    }
    // LAST_INSERT_ID(expr) hands the incremented value back in the OK packet: one statement, no read.
    const result = await upsert(metadata).execute(db);
    // One affected row: inserted (heartbeat 1). Two: an existing row was updated.
    if (result.numAffectedRows === 1n) return { heartbeat: 1, metadata };
    if (result.numAffectedRows === 2n && result.insertId !== undefined) {
      return { heartbeat: Number(result.insertId), metadata };
    }
    throw new Error(
      `unexpected result of the heartbeat upsert: ${String(result.numAffectedRows)} affected rows, insert id ${String(result.insertId)}`,
    );
  },

  sessions: mysqlSessions,

  async setMigrationMarker(db, tables, applicationName, migratedTo, migratedAtMs) {
    await sql`insert into ${sql.table(tables.applications)}
        (${sql.ref('application_name')}, ${sql.ref('migrated_to')}, ${sql.ref('migrated_at_ms')})
      values (${applicationName}, ${migratedTo}, ${migratedAtMs})
      on duplicate key update
        ${sql.ref('migrated_to')} = ${migratedTo},
        ${sql.ref('migrated_at_ms')} = ${migratedAtMs}`.execute(db);
  },
};
