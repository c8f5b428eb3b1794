import { createHash } from 'node:crypto';
import { sql } from 'kysely';
import type { SqlSessionFlavor, SqlSessionScope } from '../sql-flavor.js';
import { codePointLength } from '../sql-lease-store-options.js';
import type { AnyKysely } from '../sql-types.js';

/** MySQL refuses user lock names longer than this (MariaDB takes longer ones; the store never sends them). */
const MAX_LOCK_NAME_LENGTH = 64;
/** At most this many workers per `liveSessions` statement (one column each). */
const LIVE_CHUNK = 1_000;

/**
 * A worker's session lock on MySQL/MariaDB: a user-level lock (`GET_LOCK`), whose names are global to
 * the server, so the name carries the database as well as the lease table, the application and the
 * worker id: `kcl:<database>.<table>:<application>:<worker>` when that is at most 64 printable ASCII
 * characters without capitals (MySQL compares lock names without regard to case; MariaDB with it) and
 * the database and application hold no `:`, else `kcl#` and 60 hex digits of SHA-256 of the four
 * joined by NUL.
 */
export function mysqlSessionLockName(database: string, scope: SqlSessionScope, workerId: string): string {
  const readable = `kcl:${database}.${scope.tables.leases}:${scope.applicationName}:${workerId}`;
  if (
    codePointLength(readable) <= MAX_LOCK_NAME_LENGTH &&
    /^[\x21-\x40\x5b-\x7e]+$/.test(readable) &&
    !database.includes(':') &&
    !scope.applicationName.includes(':')
  ) {
    return readable;
  }
  const digest = createHash('sha256')
    .update([database, scope.tables.leases, scope.applicationName, workerId].join('\u0000'), 'utf8')
    .digest('hex');
  return `kcl#${digest.slice(0, MAX_LOCK_NAME_LENGTH - 4)}`;
}

/** The connection's default database, where the lease tables are. */
async function currentDatabase(executor: AnyKysely): Promise<string> {
  const { rows } = await sql<{ name: string | null }>`select database() as ${sql.id('name')}`.execute(
    executor,
  );
  const name = rows[0]?.name;
  if (typeof name !== 'string') {
    throw new Error(
      'the connection has no default database (select database() is NULL): name one in the URL',
    );
  }
  return name;
}

/** The default database of each store's Kysely instance, read once (its connections all share it). */
const databases = new WeakMap<AnyKysely, Promise<string>>();

function databaseOf(db: AnyKysely): Promise<string> {
  let known = databases.get(db);
  if (known === undefined) {
    known = currentDatabase(db);
    databases.set(db, known);
    known.catch(() => databases.delete(db));
  }
  return known;
}

export const mysqlSessions: SqlSessionFlavor = {
  async lock(connection, scope, workerId) {
    const { rows } = await sql<{ name: string | null; id: number | string }>`select
        database() as ${sql.id('name')}, connection_id() as ${sql.id('id')}`.execute(connection);
    const row = rows[0];
    if (typeof row?.name !== 'string') {
      throw new Error(
        'the connection has no default database (select database() is NULL): name one in the URL',
      );
    }
    const name = mysqlSessionLockName(row.name, scope, workerId);
    const connectionId = Number(row.id);
    // Timeout 0: answers at once, 1 when taken, 0 when another session holds it.
    const { rows: taken } = await sql<{ locked: number | null }>`select
        get_lock(${name}, 0) as ${sql.id('locked')}`.execute(connection);
    if (Number(taken[0]?.locked) !== 1) return null;
    return {
      label: `lock ${JSON.stringify(name)} of connection ${connectionId}`,
      async holds() {
        const { rows: held } = await sql<{ held: number | null }>`select
            is_used_lock(${name}) = connection_id() as ${sql.id('held')}`.execute(connection);
        return Number(held[0]?.held) === 1;
      },
      async unlock() {
        const { rows: released } = await sql<{ released: number | null }>`select
            release_lock(${name}) as ${sql.id('released')}`.execute(connection);
        return Number(released[0]?.released) === 1;
      },
      async endSession() {
        await sql`kill ${sql.lit(connectionId)}`.execute(connection);
      },
    };
  },

  async live(db, scope, workerIds) {
    const database = await databaseOf(db);
    const live = new Set<string>();
    for (let start = 0; start < workerIds.length; start += LIVE_CHUNK) {
      const chunk = workerIds.slice(start, start + LIVE_CHUNK);
      // One row, one column per worker: the id of the connection holding its lock, or NULL.
      const { rows } = await sql<Record<string, unknown>>`select ${sql.join(
        chunk.map(
          (workerId, index) =>
            sql`is_used_lock(${mysqlSessionLockName(database, scope, workerId)}) as ${sql.id(`w${index}`)}`,
        ),
      )}`.execute(db);
      const row = rows[0] ?? {};
      chunk.forEach((workerId, index) => {
        if (row[`w${index}`] !== null && row[`w${index}`] !== undefined) live.add(workerId);
      });
    }
    return live;
  },
};
