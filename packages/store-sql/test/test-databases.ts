import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ServiceCheck } from '@kcl/testkit';
import { checkService } from '@kcl/testkit';
import Database from 'better-sqlite3';
import type { LogConfig } from 'kysely';
import { Kysely, MysqlDialect, PostgresDialect, SqliteDialect, sql } from 'kysely';
import { createConnection, createPool } from 'mysql2';
import pg from 'pg';
import type { AnyKysely, SqlFlavorName } from '../src/index.js';
import { configureSqliteLeaseDatabase } from '../src/index.js';

/** Override with `KCL_POSTGRES_URL` / `KCL_MYSQL_URL`; each run creates (and drops) its own database. */
export const POSTGRES_URL = process.env.KCL_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
export const MYSQL_URL = process.env.KCL_MYSQL_URL ?? 'mysql://root@127.0.0.1:3306/test';

export interface ConnectOptions {
  readonly log?: LogConfig;
  /** Connections in the pool (PostgreSQL, MySQL); default 10. */
  readonly poolSize?: number;
  /** How long opening a connection may take (PostgreSQL, MySQL); default 5,000 ms. */
  readonly connectTimeoutMs?: number;
}

/** A database created for one test file, dropped by `drop`. */
export interface TestDatabase {
  readonly flavor: SqlFlavorName;
  /** A shared Kysely instance on the database. */
  readonly db: AnyKysely;
  /** Where it is: a connection URL or, for SQLite, the file. */
  readonly location: string;
  /** Another Kysely instance with its own pool (or, for SQLite, its own connection to the file). */
  connect(options?: ConnectOptions): AnyKysely;
  /** Destroys every instance `connect` made and drops the database. */
  drop(): Promise<void>;
}

export interface TestDialect {
  readonly flavor: SqlFlavorName;
  /** For skip messages: `PostgreSQL at postgres://…`. */
  readonly service: string;
  probe(): Promise<void>;
  createDatabase(): Promise<TestDatabase>;
}

function uniqueDatabaseName(): string {
  return `kcl_test_${randomBytes(6).toString('hex')}`;
}

function withDatabase(url: string, database: string): string {
  const parsed = new URL(url);
  parsed.pathname = `/${database}`;
  return parsed.toString();
}

function tracked(make: (options: ConnectOptions) => AnyKysely) {
  const instances: AnyKysely[] = [];
  return {
    connect: (options: ConnectOptions = {}): AnyKysely => {
      const instance = make(options);
      instances.push(instance);
      return instance;
    },
    destroyAll: async (): Promise<void> => {
      await Promise.all(instances.splice(0).map((instance) => instance.destroy()));
    },
  };
}

export const postgresDialect: TestDialect = {
  flavor: 'postgres',
  service: `PostgreSQL at ${POSTGRES_URL}`,
  async probe() {
    const client = new pg.Client({ connectionString: POSTGRES_URL, connectionTimeoutMillis: 3_000 });
    await client.connect();
    try {
      await client.query('select 1');
    } finally {
      await client.end();
    }
  },
  async createDatabase() {
    const name = uniqueDatabaseName();
    const admin = postgresKysely(POSTGRES_URL, { poolSize: 1 });
    await sql`create database ${sql.id(name)}`.execute(admin);
    const location = withDatabase(POSTGRES_URL, name);
    const instances = tracked((options) => postgresKysely(location, options));
    return {
      flavor: 'postgres',
      db: instances.connect(),
      location,
      connect: instances.connect,
      async drop() {
        await instances.destroyAll();
        await sql`drop database if exists ${sql.id(name)} with (force)`.execute(admin);
        await admin.destroy();
      },
    };
  },
};

export function postgresKysely(connectionString: string, options: ConnectOptions = {}): AnyKysely {
  const pool = new pg.Pool({
    connectionString,
    max: options.poolSize ?? 10,
    connectionTimeoutMillis: options.connectTimeoutMs ?? 5_000,
  });
  // pg's advice for every pool: an idle connection the server closes (here: dropping the test
  // database) raises an error event that would otherwise crash the process; so does a connection out
  // of the pool (a worker session's, ended from outside), on the client itself.
  pool.on('error', () => undefined);
  pool.on('connect', (client) => client.on('error', () => undefined));
  return new Kysely({
    dialect: new PostgresDialect({ pool }),
    ...(options.log === undefined ? {} : { log: options.log }),
  });
}

export const mysqlDialect: TestDialect = {
  flavor: 'mysql',
  service: `MariaDB/MySQL at ${MYSQL_URL}`,
  async probe() {
    const connection = createConnection({ uri: MYSQL_URL, connectTimeout: 3_000 });
    try {
      await connection.promise().query('select 1');
    } finally {
      connection.destroy();
    }
  },
  async createDatabase() {
    const name = uniqueDatabaseName();
    const admin = mysqlKysely(MYSQL_URL, { poolSize: 1 });
    await sql`create database ${sql.id(name)} character set utf8mb4`.execute(admin);
    const location = withDatabase(MYSQL_URL, name);
    const instances = tracked((options) => mysqlKysely(location, options));
    return {
      flavor: 'mysql',
      db: instances.connect(),
      location,
      connect: instances.connect,
      async drop() {
        await instances.destroyAll();
        await sql`drop database if exists ${sql.id(name)}`.execute(admin);
        await admin.destroy();
      },
    };
  },
};

export function mysqlKysely(uri: string, options: ConnectOptions = {}): AnyKysely {
  return new Kysely({
    dialect: new MysqlDialect({
      pool: createPool({
        uri,
        connectionLimit: options.poolSize ?? 10,
        connectTimeout: options.connectTimeoutMs ?? 5_000,
      }),
    }),
    ...(options.log === undefined ? {} : { log: options.log }),
  });
}

export const sqliteDialect: TestDialect = {
  flavor: 'sqlite',
  service: 'SQLite (better-sqlite3)',
  async probe() {
    new Database(':memory:').close();
  },
  async createDatabase() {
    const directory = mkdtempSync(join(tmpdir(), 'kcl-store-sql-'));
    const file = join(directory, 'leases.db');
    const instances = tracked((options) => sqliteKysely(file, options));
    return {
      flavor: 'sqlite',
      db: instances.connect(),
      location: file,
      connect: instances.connect,
      async drop() {
        await instances.destroyAll();
        rmSync(directory, { recursive: true, force: true });
      },
    };
  },
};

export function sqliteKysely(file: string, options: ConnectOptions & { timeoutMs?: number } = {}): AnyKysely {
  return new Kysely({
    dialect: new SqliteDialect({
      database: configureSqliteLeaseDatabase(new Database(file, { timeout: options.timeoutMs ?? 5_000 })),
    }),
    ...(options.log === undefined ? {} : { log: options.log }),
  });
}

export const TEST_DIALECTS: readonly TestDialect[] = [postgresDialect, mysqlDialect, sqliteDialect];

/** Probes every dialect's server once per file: a visible skip locally, a failure in CI. */
export async function checkDialects(): Promise<Map<SqlFlavorName, ServiceCheck>> {
  const checks = new Map<SqlFlavorName, ServiceCheck>();
  for (const dialect of TEST_DIALECTS) {
    checks.set(
      dialect.flavor,
      await checkService(dialect.service, () => dialect.probe(), { timeoutMs: 5_000 }),
    );
  }
  return checks;
}

/** The stored lease row, read with plain SQL: the conformance suite's backdoor. */
export async function readRawLease(
  db: AnyKysely,
  applicationName: string,
  leaseKey: string,
  tableName = 'kcl_leases',
): Promise<Record<string, unknown> | null> {
  const { rows } = await sql<Record<string, unknown>>`select * from ${sql.table(tableName)}
    where application_name = ${applicationName} and lease_key = ${leaseKey}`.execute(db);
  return rows[0] ?? null;
}
