import { resolve } from 'node:path';
import type { LeaseStore } from '@kcl/core';
import { ConfigurationError } from '@kcl/core';
import type { AnyKysely } from '@kcl/store-sql';
import { configureSqliteLeaseDatabase, createSqlLeaseStore } from '@kcl/store-sql';
import { Kysely, MysqlDialect, PostgresDialect, SqliteDialect } from 'kysely';

export interface SqlLeaseStoreSettings {
  /** `postgres://…`, `postgresql://…`, `mysql://…`, `mariadb://…`, `sqlite:<file>` or `sqlite://<file>`. */
  readonly url: string;
  readonly applicationName: string;
  /** Default: the store's own (`kcl_leases`). */
  readonly tableName: string | null;
  /** Relative SQLite paths resolve here. */
  readonly workingDirectory: string;
  /** Told about idle connection errors of the PostgreSQL pool. */
  readonly onPoolError?: (error: unknown) => void;
}

export interface OwnedLeaseStore {
  readonly store: LeaseStore;
  /** A description without secrets, for the log. */
  readonly description: string;
  /** Closes what was opened for the store (the connection pool). */
  close(): Promise<void>;
}

export type SqlFlavorOfUrl = 'postgres' | 'mysql' | 'sqlite';

/** Which database a URL names, and what the driver is given (a redacted form goes to the log). */
export function parseSqlUrl(
  url: string,
  workingDirectory: string,
): { readonly flavor: SqlFlavorOfUrl; readonly target: string; readonly redacted: string } {
  const scheme = url.slice(0, url.indexOf(':')).toLowerCase();
  if (scheme === 'postgres' || scheme === 'postgresql') {
    return { flavor: 'postgres', target: url, redacted: redact(url) };
  }
  if (scheme === 'mysql' || scheme === 'mariadb') {
    const target = scheme === 'mariadb' ? `mysql${url.slice(scheme.length)}` : url;
    return { flavor: 'mysql', target, redacted: redact(target) };
  }
  if (scheme === 'sqlite') {
    let path = url.slice('sqlite:'.length);
    if (path.startsWith('//')) path = path.slice(2);
    if (path === '' || path === ':memory:') {
      throw new ConfigurationError('@kcl/multilang (properties)', [
        'kcl.sqlUrl names an in-memory SQLite database; leases must outlive the process: give a file, e.g. sqlite:/var/lib/app/leases.db',
      ]);
    }
    const file = resolve(workingDirectory, path);
    return { flavor: 'sqlite', target: file, redacted: `sqlite:${file}` };
  }
  throw new ConfigurationError('@kcl/multilang (properties)', [
    'kcl.sqlUrl must start with postgres://, postgresql://, mysql://, mariadb:// or sqlite:',
  ]);
}

/**
 * Opens the database a URL names and builds `@kcl/store-sql`'s lease store on it. The drivers are
 * loaded only when used, so a DynamoDB deployment never loads a native SQLite module.
 */
export async function openSqlLeaseStore(settings: SqlLeaseStoreSettings): Promise<OwnedLeaseStore> {
  const { flavor, target, redacted } = parseSqlUrl(settings.url, settings.workingDirectory);
  let db: AnyKysely;
  if (flavor === 'postgres') {
    const pg = (await import('pg')).default;
    const pool = new pg.Pool({ connectionString: target, max: 5, connectionTimeoutMillis: 10_000 });
    pool.on('error', (error) => settings.onPoolError?.(error));
    db = new Kysely<Record<string, never>>({ dialect: new PostgresDialect({ pool }) });
  } else if (flavor === 'mysql') {
    const { createPool } = await import('mysql2');
    db = new Kysely<Record<string, never>>({
      dialect: new MysqlDialect({
        pool: createPool({ uri: target, connectionLimit: 5, connectTimeout: 10_000 }),
      }),
    });
  } else {
    const Database = (await import('better-sqlite3')).default;
    db = new Kysely<Record<string, never>>({
      dialect: new SqliteDialect({
        database: configureSqliteLeaseDatabase(new Database(target, { timeout: 5_000 })),
      }),
    });
  }
  try {
    const store = createSqlLeaseStore({
      db,
      applicationName: settings.applicationName,
      ...(settings.tableName === null ? {} : { tableName: settings.tableName }),
    });
    return { store, description: `SQL lease store at ${redacted}`, close: () => db.destroy() };
  } catch (error) {
    await db.destroy();
    throw error;
  }
}

function redact(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password !== '') parsed.password = '***';
    return parsed.toString();
  } catch {
    return url.replace(/:[^:@/]*@/, ':***@');
  }
}
