import type { Clock } from '@kcl/core';
import { ConfigurationError, systemClock } from '@kcl/core';
import type { Kysely } from 'kysely';
import type { SqlFlavorName } from './sql-flavor.js';
import { detectSqlFlavor, SQL_FLAVOR_NAMES } from './sql-flavor.js';
import type { SqlLeaseTableNames } from './sql-table-names.js';
import { MAX_TABLE_NAME_LENGTH, sqlLeaseTableNames, TABLE_NAME_PATTERN } from './sql-table-names.js';

/** The package name, which every message of this package starts with. */
export const PACKAGE_NAME = '@kcl/store-sql';

export const DEFAULT_TABLE_NAME = 'kcl_leases';

/** Longest application name, in characters: the column is `varchar(255)`. */
export const MAX_APPLICATION_NAME_LENGTH = 255;

/**
 * Any Kysely instance, whatever its database type: the store only runs its own SQL on it.
 */
// biome-ignore lint/suspicious/noExplicitAny: the store accepts a Kysely of any user schema.
export type AnyKysely = Kysely<any>;

export interface SqlLeaseStoreOptions {
  /**
   * The Kysely instance to run on (PostgresDialect with `pg`, MysqlDialect with `mysql2`, or
   * SqliteDialect with `better-sqlite3`). The store never creates, configures or destroys it, and
   * ignores its plugins (its own SQL names every column).
   */
  readonly db: AnyKysely;
  /** The application (consumer group) whose leases this store reads and writes. */
  readonly applicationName: string;
  /**
   * The lease table (default `kcl_leases`): a lowercase plain identifier of at most 45 characters.
   * The other tables are named after it: `<tableName>_workers`, `<tableName>_applications`,
   * `<tableName>_migration` and `<tableName>_migration_lock`.
   */
  readonly tableName?: string;
  /** The SQL dialect. Detected from the Kysely adapter when absent. */
  readonly flavor?: SqlFlavorName;
  /** The wall clock for worker heartbeat timestamps (default: the system clock). */
  readonly clock?: Clock;
}

/** Options with every default filled in. */
export interface ResolvedSqlLeaseStoreOptions {
  readonly db: AnyKysely;
  readonly applicationName: string;
  readonly tableNames: SqlLeaseTableNames;
  readonly flavor: SqlFlavorName;
  readonly clock: Clock;
}

/** Checks the options and fills in defaults; lists every problem at once in one `ConfigurationError`. */
export function resolveSqlLeaseStoreOptions(options: SqlLeaseStoreOptions): ResolvedSqlLeaseStoreOptions {
  const problems: string[] = [];
  const input = (options ?? {}) as Partial<SqlLeaseStoreOptions>;

  const db = input.db;
  const isKysely =
    db !== null &&
    typeof db === 'object' &&
    typeof (db as { getExecutor?: unknown }).getExecutor === 'function' &&
    typeof (db as { withoutPlugins?: unknown }).withoutPlugins === 'function';
  if (!isKysely) {
    problems.push('db must be a Kysely instance (new Kysely({ dialect }))');
  } else if (db.isTransaction) {
    problems.push('db must be a Kysely instance, not a transaction: the store runs its own transactions');
  }

  const applicationName = input.applicationName;
  if (typeof applicationName !== 'string' || applicationName.length === 0) {
    problems.push('applicationName must be a non-empty string');
  } else {
    if (codePointLength(applicationName) > MAX_APPLICATION_NAME_LENGTH) {
      problems.push(`applicationName must be at most ${MAX_APPLICATION_NAME_LENGTH} characters`);
    }
    if (applicationName.includes('\u0000')) {
      problems.push('applicationName must not contain the NUL character (PostgreSQL cannot store it)');
    }
  }

  const tableName = input.tableName ?? DEFAULT_TABLE_NAME;
  if (typeof tableName !== 'string' || !TABLE_NAME_PATTERN.test(tableName)) {
    problems.push(
      `tableName ${JSON.stringify(tableName)} is not a plain identifier: use 1-${MAX_TABLE_NAME_LENGTH} characters of a-z, 0-9 and '_', starting with a letter or '_'`,
    );
  }

  let flavor = input.flavor;
  if (flavor !== undefined) {
    if (!SQL_FLAVOR_NAMES.includes(flavor)) {
      problems.push(
        `flavor must be one of ${SQL_FLAVOR_NAMES.map((name) => `'${name}'`).join(', ')}, got ${JSON.stringify(flavor)}`,
      );
    }
  } else if (isKysely) {
    const detected = detectSqlFlavor(db);
    if (detected.flavor === null) {
      problems.push(
        `flavor could not be detected from the Kysely adapter (${detected.adapterName}); pass flavor: 'postgres', 'mysql' or 'sqlite'`,
      );
    } else {
      flavor = detected.flavor;
    }
  }

  const clock = input.clock ?? systemClock;
  if (clock === null || typeof clock !== 'object' || typeof clock.now !== 'function') {
    problems.push('clock must be a Clock from @kcl/core (an object with a now method)');
  }

  if (problems.length > 0) throw new ConfigurationError(PACKAGE_NAME, problems);

  return Object.freeze({
    db: db as AnyKysely,
    applicationName: applicationName as string,
    tableNames: sqlLeaseTableNames(tableName),
    flavor: flavor as SqlFlavorName,
    clock,
  });
}

/** The length in Unicode code points, which is what `varchar(n)` counts on PostgreSQL and MySQL. */
export function codePointLength(value: string): number {
  let length = 0;
  for (const _ of value) length += 1;
  return length;
}
