import { createHash } from 'node:crypto';
import { sql } from 'kysely';
import type { SqlSessionFlavor, SqlSessionScope } from '../sql-flavor.js';
import type { AnyKysely } from '../sql-types.js';

/**
 * A worker's session lock on PostgreSQL: a session-level advisory lock on two 32-bit keys, the first
 * 32 bits of SHA-256 of the lease table's name and the application name (NUL between them), and of the
 * worker id. `pg_locks` shows it as `locktype = 'advisory'`, `classid` and `objid` the two keys (as
 * unsigned numbers) and `objsubid = 2`, in the current database. Two worker ids of one application
 * whose hashes agree (about one chance in 8,600 among 1,000 workers) share a lock: the second to attach
 * is refused, and `live` lists both while either holds it — the workers fall back to lease expiry.
 */
export interface PostgresSessionKeys {
  /** The application's key, as `pg_locks.classid` shows it (0 … 2^32 − 1). */
  readonly classId: number;
  /** The worker's key, as `pg_locks.objid` shows it (0 … 2^32 − 1). */
  readonly objectId: number;
}

export function postgresSessionKeys(scope: SqlSessionScope, workerId: string): PostgresSessionKeys {
  return {
    classId: applicationKey(scope),
    objectId: hash32(workerId),
  };
}

function applicationKey(scope: SqlSessionScope): number {
  return hash32(`${scope.tables.leases}\u0000${scope.applicationName}`);
}

function hash32(text: string): number {
  return createHash('sha256').update(text, 'utf8').digest().readUInt32BE(0);
}

/** The `int4` argument of `pg_try_advisory_lock(int4, int4)` whose lock shows `unsigned` in `pg_locks`. */
function int4(unsigned: number): number {
  return unsigned > 0x7fff_ffff ? unsigned - 0x1_0000_0000 : unsigned;
}

/** The advisory locks of this database, as `pg_locks` lists them, for the application's key. */
function applicationLocks(classId: number) {
  return sql`${sql.table('pg_locks')}
    where ${sql.ref('locktype')} = 'advisory'
      and ${sql.ref('database')} = (select ${sql.ref('oid')} from ${sql.table('pg_database')}
        where ${sql.ref('datname')} = current_database())
      and ${sql.ref('classid')} = ${classId}::int8::oid
      and ${sql.ref('objsubid')} = 2
      and ${sql.ref('granted')}`;
}

export const postgresSessions: SqlSessionFlavor = {
  async lock(connection, scope, workerId) {
    const { classId, objectId } = postgresSessionKeys(scope, workerId);
    const { rows } = await sql<{ locked: boolean; pid: number }>`select
        pg_try_advisory_lock(${int4(classId)}::int4, ${int4(objectId)}::int4) as ${sql.id('locked')},
        pg_backend_pid() as ${sql.id('pid')}`.execute(connection);
    const row = rows[0];
    if (row === undefined) throw new Error('pg_try_advisory_lock returned no row');
    if (row.locked !== true) return null;
    return {
      label: `advisory lock (classid ${classId}, objid ${objectId}) of backend ${row.pid}`,
      holds: () => holds(connection, classId, objectId),
      async unlock() {
        const { rows: released } = await sql<{ released: boolean }>`select
            pg_advisory_unlock(${int4(classId)}::int4, ${int4(objectId)}::int4) as ${sql.id('released')}`.execute(
          connection,
        );
        return released[0]?.released === true;
      },
      async endSession() {
        await sql`select pg_terminate_backend(pg_backend_pid())`.execute(connection);
      },
    };
  },

  async live(db, scope, workerIds) {
    const classId = applicationKey(scope);
    const keys = new Map(workerIds.map((workerId) => [workerId, hash32(workerId)]));
    // One statement however many workers: the keys travel as one array parameter.
    const { rows } = await sql<{
      object_id: string | number;
    }>`select ${sql.ref('objid')}::int8 as ${sql.id('object_id')}
      from ${applicationLocks(classId)}
        and ${sql.ref('objid')}::int8 = any(${[...new Set(keys.values())]}::int8[])`.execute(db);
    const held = new Set(rows.map((row) => Number(row.object_id)));
    return new Set(workerIds.filter((workerId) => held.has(keys.get(workerId) as number)));
  },
};

async function holds(connection: AnyKysely, classId: number, objectId: number): Promise<boolean> {
  const { rows } = await sql<{ held: boolean }>`select exists(select 1 from ${applicationLocks(classId)}
      and ${sql.ref('objid')} = ${objectId}::int8::oid
      and ${sql.ref('pid')} = pg_backend_pid()) as ${sql.id('held')}`.execute(connection);
  return rows[0]?.held === true;
}
