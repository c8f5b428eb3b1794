import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, statfsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { LeaseStore } from '@kcl/core';
import type { DynamoLeaseTableLayout } from '@kcl/store-dynamo';
import { createDynamoLeaseStore } from '@kcl/store-dynamo';
import type { AnyKysely } from '@kcl/store-sql';
import { configureSqliteLeaseDatabase, createSqlLeaseStore } from '@kcl/store-sql';
import { redactUrl } from '@kcl/stores';
import { createMemoryLeaseStore, startDynalite } from '@kcl/testkit';
import { NodeHttpHandler } from '@smithy/node-http-handler';
import Database from 'better-sqlite3';
import type { LogEvent } from 'kysely';
import { Kysely, MysqlDialect, PostgresDialect, SqliteDialect, sql } from 'kysely';
import { createConnection, createPool } from 'mysql2';
import pg from 'pg';

const require = createRequire(import.meta.url);

export type StoreName = 'memory' | 'sqlite' | 'postgres' | 'mariadb' | 'dynamo-java' | 'dynamo-shared';

export const STORE_NAMES: readonly StoreName[] = [
  'memory',
  'sqlite',
  'postgres',
  'mariadb',
  'dynamo-java',
  'dynamo-shared',
];

export const STORE_LABELS: Readonly<Record<StoreName, string>> = {
  memory: 'memory (reference)',
  sqlite: 'SQLite',
  postgres: 'PostgreSQL',
  mariadb: 'MariaDB',
  'dynamo-java': 'DynamoDB (dynalite), java layout',
  'dynamo-shared': 'DynamoDB (dynalite), shared layout',
};

/** What one counted round trip is for a store. */
export type RoundTripUnit = 'statement' | 'request' | 'call';

export const APPLICATION_NAME = 'bench-store-ops';

/** Connections per pool, as in the store-sql README's examples. */
export const SQL_POOL_SIZE = 10;

/** Override with `KCL_POSTGRES_URL` / `KCL_MYSQL_URL`, as the store-sql tests do. */
export const POSTGRES_URL = process.env.KCL_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
export const MYSQL_URL = process.env.KCL_MYSQL_URL ?? 'mysql://root@127.0.0.1:3306/';

/** A lease store ready to measure, with its round-trip counter. */
export interface BenchStore {
  readonly name: StoreName;
  readonly label: string;
  readonly store: LeaseStore;
  readonly unit: RoundTripUnit;
  /** Round trips so far: SQL statements executed, HTTP requests sent (each SDK attempt), or store calls. */
  roundTrips(): number;
  /** DynamoDB commands issued so far (fewer than requests only when the SDK retried); null elsewhere. */
  commands(): number | null;
  /** The server and its settings, for the machine-conditions paragraph. */
  readonly details: string;
  /** Closes connections and removes the throwaway database, file or emulator. Idempotent. */
  close(): Promise<void>;
}

export type OpenedStore =
  | { readonly status: 'ready'; readonly bench: BenchStore }
  | { readonly status: 'skipped'; readonly name: StoreName; readonly reason: string };

/** Opens one store on a fresh, empty namespace; a server that does not answer gives `skipped`. */
export async function openBenchStore(name: StoreName): Promise<OpenedStore> {
  const cleanups: Array<() => Promise<void>> = [];
  const closeAll = once(async () => {
    for (const cleanup of cleanups.reverse()) {
      try {
        await cleanup();
      } catch (error) {
        console.error(`bench: cleaning up ${name} failed: ${describeError(error)}`);
      }
    }
  });
  try {
    const bench = await OPENERS[name](cleanups, closeAll);
    await bench.store.admin.ensureSchema();
    return { status: 'ready', bench };
  } catch (error) {
    await closeAll();
    return { status: 'skipped', name, reason: describeError(error) };
  }
}

// The stores are built with the adapters' factories, not with `openLeaseStore` from @kcl/stores: the
// benchmark counts round trips through Kysely's `log` callback and middleware on the DynamoDB client,
// and reads server settings through the same connection, so it must hold the db and the client.
type Opener = (cleanups: Array<() => Promise<void>>, close: () => Promise<void>) => Promise<BenchStore>;

const OPENERS: Readonly<Record<StoreName, Opener>> = {
  memory: async (_cleanups, close) => {
    let calls = 0;
    const store = countingCalls(createMemoryLeaseStore({ applicationName: APPLICATION_NAME }), () => {
      calls += 1;
    });
    return {
      name: 'memory',
      label: STORE_LABELS.memory,
      store,
      unit: 'call',
      roundTrips: () => calls,
      commands: () => null,
      details: 'memory: the @kcl/testkit reference store (each call yields to the event loop once)',
      close,
    };
  },

  sqlite: async (cleanups, close) => {
    const directory = mkdtempSync(join(tmpdir(), 'kcl-bench-store-ops-'));
    cleanups.push(async () => rmSync(directory, { recursive: true, force: true }));
    const file = join(directory, 'leases.db');
    const database = configureSqliteLeaseDatabase(new Database(file, { timeout: 5_000 }));
    const counter = statementCounter();
    const db = new Kysely({ dialect: new SqliteDialect({ database }), log: counter.log });
    cleanups.push(() => db.destroy());
    const version = database.prepare('select sqlite_version()').pluck().get() as string;
    const synchronous = database.pragma('synchronous', { simple: true }) as number;
    const betterSqlite = require('better-sqlite3/package.json') as { version: string };
    return {
      name: 'sqlite',
      label: STORE_LABELS.sqlite,
      store: createSqlLeaseStore({ db, applicationName: APPLICATION_NAME }),
      unit: 'statement',
      roundTrips: counter.count,
      commands: () => null,
      details: `SQLite ${version} through better-sqlite3 ${betterSqlite.version}: a file under ${tmpdir()} (${fileSystemOf(directory)}), WAL (configureSqliteLeaseDatabase), synchronous=${SQLITE_SYNCHRONOUS[synchronous] ?? synchronous}`,
      close,
    };
  },

  postgres: async (cleanups, close) => {
    await probe(`PostgreSQL at ${redactUrl(POSTGRES_URL)}`, async () => {
      const client = new pg.Client({ connectionString: POSTGRES_URL, connectionTimeoutMillis: 3_000 });
      await client.connect();
      await client.end();
    });
    const databaseName = throwawayDatabaseName();
    await withPostgresAdmin((admin) => admin.query(`create database "${databaseName}"`));
    cleanups.push(() =>
      withPostgresAdmin((admin) => admin.query(`drop database if exists "${databaseName}" with (force)`)),
    );
    const pool = new pg.Pool({
      connectionString: withDatabase(POSTGRES_URL, databaseName),
      max: SQL_POOL_SIZE,
      connectionTimeoutMillis: 5_000,
    });
    pool.on('error', () => undefined); // an idle connection closed by the final drop must not crash the run
    const counter = statementCounter();
    const db = new Kysely({ dialect: new PostgresDialect({ pool }), log: counter.log });
    cleanups.push(() => db.destroy());
    const settings = await settingsOf(db, [
      'select version() as value',
      'show synchronous_commit',
      'show fsync',
    ]);
    return {
      name: 'postgres',
      label: STORE_LABELS.postgres,
      store: createSqlLeaseStore({ db, applicationName: APPLICATION_NAME }),
      unit: 'statement',
      roundTrips: counter.count,
      commands: () => null,
      details: `${shortVersion(settings[0])} on 127.0.0.1 (synchronous_commit=${settings[1]}, fsync=${settings[2]}), pg pool of ${SQL_POOL_SIZE}`,
      close,
    };
  },

  mariadb: async (cleanups, close) => {
    await probe(`MariaDB at ${redactUrl(MYSQL_URL)}`, async () => {
      const connection = createConnection({ uri: MYSQL_URL, connectTimeout: 3_000 });
      try {
        await connection.promise().query('select 1');
      } finally {
        connection.destroy();
      }
    });
    const databaseName = throwawayDatabaseName();
    await withMysqlAdmin((admin) => admin.query(`create database \`${databaseName}\` character set utf8mb4`));
    cleanups.push(() =>
      withMysqlAdmin((admin) => admin.query(`drop database if exists \`${databaseName}\``)),
    );
    const counter = statementCounter();
    const db = new Kysely({
      dialect: new MysqlDialect({
        pool: createPool({
          uri: withDatabase(MYSQL_URL, databaseName),
          connectionLimit: SQL_POOL_SIZE,
          connectTimeout: 5_000,
        }),
      }),
      log: counter.log,
    });
    cleanups.push(() => db.destroy());
    const settings = await settingsOf(db, [
      'select version() as value',
      'select @@innodb_flush_log_at_trx_commit as value',
      'select @@log_bin as value',
    ]);
    return {
      name: 'mariadb',
      label: STORE_LABELS.mariadb,
      store: createSqlLeaseStore({ db, applicationName: APPLICATION_NAME }),
      unit: 'statement',
      roundTrips: counter.count,
      commands: () => null,
      details: `MariaDB ${settings[0]?.split('-')[0]} on 127.0.0.1 (InnoDB, innodb_flush_log_at_trx_commit=${settings[1]}, log_bin=${settings[2]}), mysql2 pool of ${SQL_POOL_SIZE}`,
      close,
    };
  },

  'dynamo-java': (cleanups, close) => openDynamo('java', cleanups, close),
  'dynamo-shared': (cleanups, close) => openDynamo('shared', cleanups, close),
};

async function openDynamo(
  layout: DynamoLeaseTableLayout,
  cleanups: Array<() => Promise<void>>,
  close: () => Promise<void>,
): Promise<BenchStore> {
  const emulator = await startDynalite({ createTableMs: 5, deleteTableMs: 5, updateTableMs: 5 });
  cleanups.push(() => emulator.stop());
  const client = new DynamoDBClient({
    endpoint: emulator.endpoint,
    region: emulator.region,
    credentials: emulator.credentials,
    requestHandler: new NodeHttpHandler({ requestTimeout: 10_000 }),
  });
  cleanups.push(async () => client.destroy());
  let commands = 0;
  let requests = 0;
  client.middlewareStack.add(
    (next) => async (args) => {
      commands += 1;
      return next(args);
    },
    { step: 'initialize', name: 'benchCommandCounter' },
  );
  // Below the SDK's retry middleware (finalizeRequest step), so every attempt on the wire is counted.
  client.middlewareStack.add(
    (next) => async (args) => {
      requests += 1;
      return next(args);
    },
    { step: 'deserialize', name: 'benchRequestCounter' },
  );
  const store = createDynamoLeaseStore({
    client,
    applicationName: APPLICATION_NAME,
    layout,
    ...(layout === 'shared' ? { tableName: 'kcl-leases' } : {}),
    schemaPollIntervalMs: 20,
  });
  const dynalite = createRequire(require.resolve('@kcl/testkit'))('dynalite/package.json') as {
    version: string;
  };
  const name: StoreName = layout === 'java' ? 'dynamo-java' : 'dynamo-shared';
  return {
    name,
    label: STORE_LABELS[name],
    store,
    unit: 'request',
    roundTrips: () => requests,
    commands: () => commands,
    details: `DynamoDB ${layout} layout: dynalite ${dynalite.version} in memory, inside the benchmark process (its CPU time counts in the figures), AWS SDK v3 client, renewConcurrency 10 (the default), strongly consistent reads`,
    close,
  };
}

/** `statfs` magic numbers of the file systems a temporary directory is likely to be on. */
const FILE_SYSTEMS: Readonly<Record<number, string>> = {
  61267: 'ext4',
  16914836: 'tmpfs',
  1481003842: 'xfs',
  2435016766: 'btrfs',
  2035054128: 'overlayfs',
};

function fileSystemOf(directory: string): string {
  const magic = statfsSync(directory).type;
  return FILE_SYSTEMS[magic] ?? `file system 0x${magic.toString(16)}`;
}

const SQLITE_SYNCHRONOUS: Readonly<Record<number, string>> = { 0: 'OFF', 1: 'NORMAL', 2: 'FULL', 3: 'EXTRA' };

/** Counts every statement Kysely runs, failed ones included, through its `log` callback. */
function statementCounter(): { log: (event: LogEvent) => void; count: () => number } {
  let statements = 0;
  return {
    log: () => {
      statements += 1;
    },
    count: () => statements,
  };
}

/** Counts every method call made on the store, the memory store's round trips. */
function countingCalls<T extends object>(target: T, onCall: () => void): T {
  return new Proxy(target, {
    get(object, property, receiver) {
      const value: unknown = Reflect.get(object, property, receiver);
      if (typeof value !== 'function') return value;
      return (...parameters: unknown[]) => {
        onCall();
        return (value as (...inner: unknown[]) => unknown).apply(object, parameters);
      };
    },
  });
}

async function probe(service: string, attempt: () => Promise<void>): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      attempt(),
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error('no answer within 5,000 ms')), 5_000);
      }),
    ]);
  } catch (error) {
    throw new Error(`${service} is not reachable: ${describeError(error)}`, { cause: error });
  } finally {
    clearTimeout(timer);
  }
}

async function withPostgresAdmin(run: (client: pg.Client) => Promise<unknown>): Promise<void> {
  const client = new pg.Client({ connectionString: POSTGRES_URL, connectionTimeoutMillis: 5_000 });
  await client.connect();
  try {
    await run(client);
  } finally {
    await client.end();
  }
}

async function withMysqlAdmin(
  run: (connection: ReturnType<ReturnType<typeof createConnection>['promise']>) => Promise<unknown>,
): Promise<void> {
  const connection = createConnection({ uri: MYSQL_URL, connectTimeout: 5_000 });
  try {
    await run(connection.promise());
  } finally {
    connection.destroy();
  }
}

async function settingsOf(db: AnyKysely, queries: readonly string[]): Promise<string[]> {
  const values: string[] = [];
  for (const query of queries) {
    const { rows } = await sql<Record<string, unknown>>`${sql.raw(query)}`.execute(db);
    const row = rows[0] ?? {};
    values.push(String(Object.values(row)[0] ?? '?'));
  }
  return values;
}

/** `PostgreSQL 15.20 (Debian …) on x86_64…` → `PostgreSQL 15.20`. */
function shortVersion(version: string | undefined): string {
  return (version ?? 'PostgreSQL ?').split(' ').slice(0, 2).join(' ');
}

function throwawayDatabaseName(): string {
  return `kcl_bench_${randomBytes(6).toString('hex')}`;
}

function withDatabase(url: string, database: string): string {
  const parsed = new URL(url);
  parsed.pathname = `/${database}`;
  return parsed.toString();
}

export function describeError(error: unknown): string {
  if (error instanceof AggregateError && error.errors.length > 0) {
    return [...new Set(error.errors.map((inner) => describeError(inner)))].join('; ');
  }
  if (error instanceof Error) {
    const code = (error as { code?: unknown }).code;
    const message = error.message === '' && typeof code === 'string' ? code : error.message;
    return message.split('\n')[0] ?? message;
  }
  return String(error);
}

function once(run: () => Promise<void>): () => Promise<void> {
  let done: Promise<void> | undefined;
  return () => {
    done ??= run();
    return done;
  };
}
