import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AnyKysely } from '@kcl/store-sql';
import { configureSqliteLeaseDatabase } from '@kcl/store-sql';
import type { ServiceCheck } from '@kcl/testkit';
import { checkService } from '@kcl/testkit';
import Database from 'better-sqlite3';
import { Kysely, MysqlDialect, PostgresDialect, SqliteDialect, sql } from 'kysely';
import { createConnection, createPool } from 'mysql2';
import pg from 'pg';

export const POSTGRES_URL = process.env.KCL_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
export const MYSQL_URL = process.env.KCL_MYSQL_URL ?? 'mysql://root@127.0.0.1:3306/test';

/** A database created for one test file and dropped by `drop`. */
export interface TestDatabase {
  /** The connection URL (or, for SQLite, the file). */
  readonly url: string;
  /** A Kysely instance on it (more with `connect`). */
  readonly db: AnyKysely;
  connect(): AnyKysely;
  drop(): Promise<void>;
}

function databaseName(): string {
  return `kcl_migrate_${randomBytes(5).toString('hex')}`;
}

function withDatabase(url: string, database: string): string {
  const parsed = new URL(url);
  parsed.pathname = `/${database}`;
  return parsed.toString();
}

export function checkPostgres(): Promise<ServiceCheck> {
  return checkService(
    `PostgreSQL at ${POSTGRES_URL}`,
    async () => {
      const client = new pg.Client({ connectionString: POSTGRES_URL, connectionTimeoutMillis: 3_000 });
      await client.connect();
      await client.end();
    },
    { timeoutMs: 5_000 },
  );
}

export function checkMysql(): Promise<ServiceCheck> {
  return checkService(
    `MariaDB/MySQL at ${MYSQL_URL}`,
    async () => {
      const connection = createConnection({ uri: MYSQL_URL, connectTimeout: 3_000 });
      try {
        await connection.promise().query('select 1');
      } finally {
        connection.destroy();
      }
    },
    { timeoutMs: 5_000 },
  );
}

export function postgresKysely(url: string): AnyKysely {
  const pool = new pg.Pool({ connectionString: url, max: 8, connectionTimeoutMillis: 5_000 });
  pool.on('error', () => undefined);
  return new Kysely({ dialect: new PostgresDialect({ pool }) });
}

export function mysqlKysely(url: string): AnyKysely {
  return new Kysely({ dialect: new MysqlDialect({ pool: createPool({ uri: url, connectionLimit: 8 }) }) });
}

export function sqliteKysely(file: string): AnyKysely {
  return new Kysely({
    dialect: new SqliteDialect({
      database: configureSqliteLeaseDatabase(new Database(file, { timeout: 5_000 })),
    }),
  });
}

function tracked(url: string, make: (url: string) => AnyKysely, cleanup: () => Promise<void>): TestDatabase {
  const instances: AnyKysely[] = [];
  const connect = (): AnyKysely => {
    const instance = make(url);
    instances.push(instance);
    return instance;
  };
  return {
    url,
    db: connect(),
    connect,
    async drop() {
      await Promise.allSettled(instances.map((instance) => instance.destroy()));
      await cleanup();
    },
  };
}

/** `CREATE DATABASE kcl_migrate_<random>` on the PostgreSQL server; dropped (with force) by `drop`. */
export async function createPostgresDatabase(): Promise<TestDatabase> {
  const name = databaseName();
  const admin = postgresKysely(POSTGRES_URL);
  await sql`create database ${sql.id(name)}`.execute(admin);
  return tracked(withDatabase(POSTGRES_URL, name), postgresKysely, async () => {
    await sql`drop database if exists ${sql.id(name)} with (force)`.execute(admin);
    await admin.destroy();
  });
}

/** A fresh MariaDB database; dropped by `drop`. */
export async function createMysqlDatabase(): Promise<TestDatabase> {
  const name = databaseName();
  const admin = mysqlKysely(MYSQL_URL);
  await sql`create database ${sql.id(name)} character set utf8mb4`.execute(admin);
  return tracked(withDatabase(MYSQL_URL, name), mysqlKysely, async () => {
    await sql`drop database if exists ${sql.id(name)}`.execute(admin);
    await admin.destroy();
  });
}

/** A SQLite file in a new temporary directory; removed by `drop`. */
export function createSqliteDatabase(): TestDatabase {
  const directory = mkdtempSync(join(tmpdir(), 'kcl-migrate-'));
  return tracked(join(directory, 'leases.db'), sqliteKysely, async () => {
    rmSync(directory, { recursive: true, force: true });
  });
}
