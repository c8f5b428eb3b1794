import { isKclError } from '@kcl/core';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AnyKysely, SqlLeaseStore } from '../src/index.js';
import { createSqlLeaseStore } from '../src/index.js';
import { mysqlSessionLockName } from '../src/mysql/mysql-sessions.js';
import { postgresSessionKeys } from '../src/postgres/postgres-sessions.js';
import type { TestDatabase } from './test-databases.js';
import { checkDialects, mysqlDialect, postgresDialect } from './test-databases.js';

/** Worker sessions beyond the conformance suite: the pool, aborts, closing, lock keys. */
const checks = await checkDialects();

for (const dialect of [postgresDialect, mysqlDialect]) {
  const skip = checks.get(dialect.flavor)?.reason ?? null;

  describe.skipIf(skip !== null)(`${dialect.flavor}: worker sessions`, () => {
    let database: TestDatabase;

    beforeAll(async () => {
      database = await dialect.createDatabase();
      await createSqlLeaseStore({ db: database.db, applicationName: 'sessions' }).admin.ensureSchema();
    });

    afterAll(async () => {
      await database?.drop();
    });

    /** The id of the database session a query on `db` runs in. */
    const sessionIdOf = async (db: AnyKysely): Promise<number> => {
      const { rows } = await (dialect.flavor === 'postgres'
        ? sql<{ id: number }>`select pg_backend_pid() as id`
        : sql<{ id: number }>`select connection_id() as id`
      ).execute(db);
      return Number(rows[0]?.id);
    };

    const storeOn = (db: AnyKysely, applicationName = 'sessions', destroyDbOnClose = false): SqlLeaseStore =>
      createSqlLeaseStore({ db, applicationName, sessionLiveness: true, destroyDbOnClose });

    it('holds a connection of its own, out of the pool, and gives it back when closed', async () => {
      // A pool of two: the session takes one; every other call of the store shares the second.
      const db = database.connect({ poolSize: 2 });
      const store = storeOn(db);
      const session = await store.workers.attachSession?.('pool-worker');
      const shared = new Set<number>();
      for (let round = 0; round < 5; round++) {
        await Promise.all([store.workers.heartbeat('pool-worker'), store.leases.list()]);
        shared.add(await sessionIdOf(db));
      }
      expect(shared.size).toBe(1);
      expect(await session?.check()).toBe(true);
      await session?.close();
      // Both connections serve the store again, and neither keeps the worker's lock.
      const both = await Promise.all([
        db.connection().execute(async (connection) => {
          await new Promise((resolve) => setTimeout(resolve, 50));
          return sessionIdOf(connection);
        }),
        db.connection().execute(async (connection) => {
          await new Promise((resolve) => setTimeout(resolve, 50));
          return sessionIdOf(connection);
        }),
      ]);
      expect(new Set(both).size).toBe(2);
      expect(await store.workers.liveSessions?.(['pool-worker'])).toEqual(new Set());
      const again = await store.workers.attachSession?.('pool-worker');
      expect(await again?.check()).toBe(true);
      await store.close();
      expect(await store.workers.liveSessions?.(['pool-worker'])).toEqual(new Set());
      await expect(store.workers.attachSession?.('pool-worker')).rejects.toThrow(
        /after the store was closed/,
      );
    });

    it('gives back no broken connection when the server ended the session', async () => {
      const db = database.connect({ poolSize: 2 });
      const store = storeOn(db, 'ended');
      for (let round = 0; round < 20; round++) {
        const session = await store.workers.attachSession?.('ended-worker');
        const scope = { tables: store.tableNames, applicationName: 'ended' };
        const kill = async (): Promise<void> => {
          if (dialect.flavor === 'postgres') {
            const { classId, objectId } = postgresSessionKeys(scope, 'ended-worker');
            await sql`select pg_terminate_backend(pid) from pg_locks where locktype = 'advisory'
              and classid = ${classId}::int8::oid and objid = ${objectId}::int8::oid and objsubid = 2`.execute(
              database.db,
            );
            return;
          }
          const name = mysqlSessionLockName(
            new URL(database.location).pathname.slice(1),
            scope,
            'ended-worker',
          );
          const { rows } = await sql<{ id: number }>`select is_used_lock(${name}) as id`.execute(database.db);
          await sql`kill ${sql.lit(Number(rows[0]?.id))}`.execute(database.db);
        };
        // check() runs back to back while the server ends the session, so one is in flight then.
        const killed = kill();
        let checks = 0;
        while ((await session?.check()) === true) checks += 1;
        await killed;
        expect(checks).toBeLessThan(1_000);
        // Straight away, on the same pool of two: every call finds a working connection.
        for (let call = 0; call < 4; call++) {
          expect(await store.workers.liveSessions?.(['ended-worker'])).toEqual(new Set());
        }
      }
      await store.close();
    });

    it('leaves no session behind when the call was aborted while it attached', async () => {
      const store = storeOn(database.db);
      const controller = new AbortController();
      const attaching = store.workers.attachSession?.('aborted-worker', { signal: controller.signal });
      controller.abort(new Error('the deadline passed'));
      await expect(attaching).rejects.toThrow('the deadline passed');
      expect(await store.workers.liveSessions?.(['aborted-worker'])).toEqual(new Set());
      await expect(
        store.workers.attachSession?.('aborted-worker', { signal: AbortSignal.abort() }),
      ).rejects.toThrow();
      const session = await store.workers.attachSession?.('aborted-worker');
      expect(await session?.check()).toBe(true);
      await session?.close();
    });

    it("closes its sessions before destroying a db it owns, so the pool's end does not wait for them", async () => {
      const store = storeOn(database.connect({ poolSize: 1 }), 'sessions', true);
      await store.workers.attachSession?.('owned-worker');
      await store.close();
      expect(await storeOn(database.db).workers.liveSessions?.(['owned-worker'])).toEqual(new Set());
    });

    it('reports a lost session once, and keeps refusing a worker id that runs twice', async () => {
      const store = storeOn(database.db, 'twice');
      const other = storeOn(database.connect({ poolSize: 1 }), 'twice', true);
      const first = await store.workers.attachSession?.('twin');
      const refused = await other.workers.attachSession?.('twin').catch((error: unknown) => error);
      expect(isKclError(refused, 'WORKER_SESSION_HELD')).toBe(true);
      expect((refused as Error).message).toMatch(/already has a session holding its lock.*try again later/);
      // The refused attach gave its connection back: the other store still works on its pool of one.
      expect(await other.workers.liveSessions?.(['twin'])).toEqual(new Set(['twin']));
      await first?.close();
      const second = await other.workers.attachSession?.('twin');
      expect(await second?.check()).toBe(true);
      await other.close();
      await store.close();
    });

    it('refuses worker ids its columns cannot hold, before sending them', async () => {
      const store = storeOn(database.db);
      await expect(store.workers.attachSession?.('w'.repeat(513))).rejects.toThrow(/longer than 512/);
      await expect(store.workers.liveSessions?.(['ok', 'w'.repeat(513)])).rejects.toThrow(/longer than 512/);
      expect(await store.workers.liveSessions?.([])).toEqual(new Set());
    });
  });
}

describe.skipIf(checks.get('postgres')?.reason != null)('postgres: worker session lock keys', () => {
  let database: TestDatabase;

  beforeAll(async () => {
    database = await postgresDialect.createDatabase();
  });

  afterAll(async () => {
    await database?.drop();
  });

  it('shows in pg_locks as two 32-bit keys, objsubid 2', async () => {
    const store = createSqlLeaseStore({ db: database.db, applicationName: 'keys', sessionLiveness: true });
    const session = await store.workers.attachSession?.('worker-a');
    const { classId, objectId } = postgresSessionKeys(
      { tables: store.tableNames, applicationName: 'keys' },
      'worker-a',
    );
    const { rows } = await sql<{ classid: string; objid: string; objsubid: number }>`select
        classid::int8::text as classid, objid::int8::text as objid, objsubid
      from pg_locks where locktype = 'advisory' and database = (select oid from pg_database
        where datname = current_database())`.execute(database.db);
    expect(rows).toEqual([{ classid: String(classId), objid: String(objectId), objsubid: 2 }]);
    await session?.close();
  });

  it('lets two worker ids whose keys agree share a lock: the second is refused, both read as live', async () => {
    // Found by search: the first 32 bits of SHA-256 of these two ids are equal.
    const [first, second] = ['worker-62661', 'worker-112079'];
    const scope = { tables: { leases: 'kcl_leases' }, applicationName: 'collisions' } as const;
    expect(postgresSessionKeys(scope as never, first).objectId).toBe(
      postgresSessionKeys(scope as never, second).objectId,
    );
    const store = createSqlLeaseStore({
      db: database.db,
      applicationName: 'collisions',
      sessionLiveness: true,
    });
    const session = await store.workers.attachSession?.(first);
    await expect(store.workers.attachSession?.(second)).rejects.toMatchObject({
      code: 'WORKER_SESSION_HELD',
    });
    expect(await store.workers.liveSessions?.([first, second, 'worker-0'])).toEqual(new Set([first, second]));
    await session?.close();
  });
});
