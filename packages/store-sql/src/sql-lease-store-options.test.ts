import { ConfigurationError, guardLeaseStore, noopLogger, systemClock } from '@kcl/core';
import type { DialectAdapter } from 'kysely';
import {
  DummyDriver,
  Kysely,
  MssqlAdapter,
  MssqlIntrospector,
  MssqlQueryCompiler,
  MysqlAdapter,
  MysqlIntrospector,
  MysqlQueryCompiler,
  PostgresAdapter,
  PostgresIntrospector,
  PostgresQueryCompiler,
  SqliteAdapter,
  SqliteIntrospector,
  SqliteQueryCompiler,
} from 'kysely';
import { describe, expect, it } from 'vitest';
import { detectSqlFlavor } from './sql-flavor.js';
import { createSqlLeaseStore } from './sql-lease-store.js';
import type { SqlLeaseStoreOptions } from './sql-lease-store-options.js';
import { resolveSqlLeaseStoreOptions } from './sql-lease-store-options.js';
import type { AnyKysely } from './sql-types.js';

/** A Kysely that compiles for a dialect but never connects (Kysely's documented "cold" setup). */
function coldKysely(flavor: 'postgres' | 'mysql' | 'sqlite' | 'mssql'): AnyKysely {
  const parts = {
    postgres: [PostgresAdapter, PostgresIntrospector, PostgresQueryCompiler],
    mysql: [MysqlAdapter, MysqlIntrospector, MysqlQueryCompiler],
    sqlite: [SqliteAdapter, SqliteIntrospector, SqliteQueryCompiler],
    mssql: [MssqlAdapter, MssqlIntrospector, MssqlQueryCompiler],
  } as const;
  const [Adapter, Introspector, Compiler] = parts[flavor];
  return new Kysely({
    dialect: {
      createAdapter: (): DialectAdapter => new Adapter(),
      createDriver: () => new DummyDriver(),
      createIntrospector: (db) => new Introspector(db),
      createQueryCompiler: () => new Compiler(),
    },
  });
}

function problemsOf(options: unknown): readonly string[] {
  try {
    resolveSqlLeaseStoreOptions(options as SqlLeaseStoreOptions);
  } catch (error) {
    expect(ConfigurationError.is(error)).toBe(true);
    const configurationError = error as ConfigurationError;
    expect(
      configurationError.message.startsWith('@kcl/store-sql createSqlLeaseStore: invalid configuration'),
    ).toBe(true);
    return configurationError.problems;
  }
  return [];
}

describe('resolveSqlLeaseStoreOptions', () => {
  it('fills in the defaults and detects the flavor', () => {
    const resolved = resolveSqlLeaseStoreOptions({ db: coldKysely('postgres'), applicationName: 'billing' });
    expect(resolved.flavor).toBe('postgres');
    expect(resolved.clock).toBe(systemClock);
    expect(resolved.logger).toBe(noopLogger);
    expect(resolved.destroyDbOnClose).toBe(false);
    expect(resolved.tableNames).toEqual({
      leases: 'kcl_leases',
      workers: 'kcl_leases_workers',
      applications: 'kcl_leases_applications',
      migration: 'kcl_leases_migration',
      migrationLock: 'kcl_leases_migration_lock',
    });
  });

  it('derives every table name from the lease table name', () => {
    const resolved = resolveSqlLeaseStoreOptions({
      db: coldKysely('sqlite'),
      applicationName: 'a',
      tableName: 'orders_leases',
    });
    expect(Object.values(resolved.tableNames)).toEqual([
      'orders_leases',
      'orders_leases_workers',
      'orders_leases_applications',
      'orders_leases_migration',
      'orders_leases_migration_lock',
    ]);
  });

  it('lists every problem at once', () => {
    const problems = problemsOf({
      db: {},
      applicationName: '',
      tableName: 'kcl-leases',
      flavor: 'oracle',
      clock: 3,
      logger: { warn: () => {} },
      destroyDbOnClose: 'yes',
    });
    expect(problems).toHaveLength(7);
    expect(problems[0]).toMatch(/db must be a Kysely instance/);
    expect(problems[1]).toMatch(/applicationName must be a non-empty string/);
    expect(problems[2]).toMatch(/tableName "kcl-leases" is not a plain identifier/);
    expect(problems[3]).toBe('flavor must be one of postgres, mysql, sqlite, got "oracle"');
    expect(problems[4]).toBe(
      'clock must be a Clock from @kcl/core (an object with now, monotonicNow, sleep)',
    );
    expect(problems[5]).toBe(
      'logger must be a Logger from @kcl/core (an object with debug, info, warn, error)',
    );
    expect(problems[6]).toBe('destroyDbOnClose must be true or false, got "yes"');
  });

  it.each([
    ['a hyphen', 'kcl-leases'],
    ['a quote and a statement', 'leases"; drop table x; --'],
    ['a schema prefix', 'public.leases'],
    ['upper case', 'KclLeases'],
    ['a leading digit', '1leases'],
    ['a space', 'kcl leases'],
    ['the empty string', ''],
    ['46 characters', 'x'.repeat(46)],
    ['a non-ASCII letter', 'lëases'],
  ])('rejects a table name with %s', (_label, tableName) => {
    const problems = problemsOf({ db: coldKysely('postgres'), applicationName: 'a', tableName });
    expect(problems).toEqual([expect.stringMatching(/^tableName .* is not a plain identifier/)]);
  });

  it.each(['kcl_leases', '_private', 'a', 'x'.repeat(45), 'leases_2'])(
    'accepts the table name %s',
    (tableName) => {
      expect(problemsOf({ db: coldKysely('mysql'), applicationName: 'a', tableName })).toEqual([]);
    },
  );

  it('accepts odd application names up to 255 characters and refuses longer ones and NUL', () => {
    expect(problemsOf({ db: coldKysely('sqlite'), applicationName: `it's "x" %_\\ 😀` })).toEqual([]);
    expect(problemsOf({ db: coldKysely('sqlite'), applicationName: '😀'.repeat(255) })).toEqual([]);
    expect(problemsOf({ db: coldKysely('sqlite'), applicationName: 'x'.repeat(256) })).toEqual([
      'applicationName must be at most 255 characters',
    ]);
    expect(problemsOf({ db: coldKysely('sqlite'), applicationName: 'a\u0000b' })).toEqual([
      'applicationName must not contain the NUL character (PostgreSQL cannot store it)',
    ]);
  });

  it('refuses a transaction as db', async () => {
    const db = new Kysely({
      dialect: {
        createAdapter: () => new SqliteAdapter(),
        createDriver: () => new DummyDriver(),
        createIntrospector: (kysely) => new SqliteIntrospector(kysely),
        createQueryCompiler: () => new SqliteQueryCompiler(),
      },
    });
    const problems = await db
      .transaction()
      .execute(async (transaction) => problemsOf({ db: transaction, applicationName: 'a' }));
    expect(problems).toEqual([expect.stringMatching(/not a transaction/)]);
  });

  it('asks for the flavor when the adapter is not one it knows', () => {
    expect(problemsOf({ db: coldKysely('mssql'), applicationName: 'a' })).toEqual([
      "flavor could not be detected from the Kysely adapter (MssqlAdapter); pass flavor: 'postgres', 'mysql' or 'sqlite'",
    ]);
    expect(problemsOf({ db: coldKysely('mssql'), applicationName: 'a', flavor: 'postgres' })).toEqual([]);
  });

  it('lets an explicit flavor win over detection', () => {
    expect(
      resolveSqlLeaseStoreOptions({ db: coldKysely('postgres'), applicationName: 'a', flavor: 'sqlite' })
        .flavor,
    ).toBe('sqlite');
  });
});

describe('detectSqlFlavor', () => {
  it.each(['postgres', 'mysql', 'sqlite'] as const)('detects %s from its adapter', (flavor) => {
    expect(detectSqlFlavor(coldKysely(flavor)).flavor).toBe(flavor);
  });

  it('detects a subclass of a known adapter (a third-party dialect)', () => {
    class NeonAdapter extends PostgresAdapter {}
    const db = new Kysely({
      dialect: {
        createAdapter: () => new NeonAdapter(),
        createDriver: () => new DummyDriver(),
        createIntrospector: (kysely) => new PostgresIntrospector(kysely),
        createQueryCompiler: () => new PostgresQueryCompiler(),
      },
    });
    expect(detectSqlFlavor(db)).toEqual({ flavor: 'postgres', adapterName: 'NeonAdapter' });
  });
});

describe('createSqlLeaseStore', () => {
  it('declares the contract version, capabilities and a description without secrets', () => {
    const store = createSqlLeaseStore({
      db: coldKysely('mysql'),
      applicationName: 'billing',
      tableName: 'leases',
    });
    expect(store.specificationVersion).toBe('v2');
    expect(store.applicationName).toBe('billing');
    expect(store.capabilities).toEqual({
      batchRenew: true,
      consistentReads: true,
      sessionLiveness: true,
      transactionalCheckpoint: true,
    });
    expect(store.flavor).toBe('mysql');
    expect(store.description).toBe('MySQL/MariaDB table "leases" (application "billing")');
  });

  it('offers sessions on MySQL by default, on PostgreSQL when asked, never on SQLite', () => {
    const offered = (flavor: 'postgres' | 'mysql' | 'sqlite', sessionLiveness?: boolean) => {
      const store = createSqlLeaseStore({
        db: coldKysely(flavor),
        applicationName: 'billing',
        ...(sessionLiveness === undefined ? {} : { sessionLiveness }),
      });
      return [
        store.capabilities.sessionLiveness,
        typeof store.workers.attachSession,
        typeof store.workers.liveSessions,
      ];
    };
    expect(offered('mysql')).toEqual([true, 'function', 'function']);
    expect(offered('mysql', false)).toEqual([false, 'undefined', 'undefined']);
    expect(offered('postgres')).toEqual([false, 'undefined', 'undefined']);
    expect(offered('postgres', true)).toEqual([true, 'function', 'function']);
    expect(offered('sqlite')).toEqual([false, 'undefined', 'undefined']);
    expect(() => offered('sqlite', true)).toThrow(/sessionLiveness: SQLite has no database sessions/);
    expect(() => offered('postgres', 'yes' as never)).toThrow(/sessionLiveness/);
  });

  it('leaves an injected db open on close(), and destroys it only when told to', async () => {
    const destroyed: string[] = [];
    const tracked = (name: string): AnyKysely => {
      const db = coldKysely('sqlite');
      const destroy = db.destroy.bind(db);
      db.destroy = async () => {
        destroyed.push(name);
        await destroy();
      };
      return db;
    };
    const borrowed = createSqlLeaseStore({ db: tracked('borrowed'), applicationName: 'a' });
    await borrowed.close();
    await borrowed.close();
    const owned = createSqlLeaseStore({ db: tracked('owned'), applicationName: 'a', destroyDbOnClose: true });
    await owned.close();
    await owned.close();
    expect(destroyed).toEqual(['owned']);
  });

  it('passes the guard of @kcl/core: every role and method of the v2 contract', () => {
    const store = createSqlLeaseStore({ db: coldKysely('postgres'), applicationName: 'a' });
    const guarded = guardLeaseStore(store, 'test');
    expect(guarded.specificationVersion).toBe('v2');
    expect(Object.keys(store.leases).sort()).toEqual(
      [
        'checkpoint',
        'checkpointInTransaction',
        'completeHandoff',
        'create',
        'delete',
        'get',
        'list',
        'release',
        'renew',
        'renewMany',
        'requestHandoff',
        'take',
        'updateMeta',
      ].sort(),
    );
    expect(typeof guarded.leases.checkpointInTransaction).toBe('function');
    expect(Object.keys(store.workers).sort()).toEqual(['heartbeat', 'list', 'remove']);
    expect(Object.keys(store.admin).sort()).toEqual(
      ['ensureSchema', 'getMigrationMarker', 'scan', 'setMigrationMarker'].sort(),
    );
  });

  it('throws the ConfigurationError at construction', () => {
    expect(() =>
      createSqlLeaseStore({ db: coldKysely('sqlite'), applicationName: '', tableName: 'a b' }),
    ).toThrow(/2 problems/);
  });
});
