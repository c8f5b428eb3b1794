import type { Clock, Logger } from '@kcl/core';
import { noopLogger, OptionProblems, systemClock } from '@kcl/core';
import type { SqlFlavorName } from './sql-flavor.js';
import { detectSqlFlavor, SQL_FLAVOR_NAMES } from './sql-flavor.js';
import { PACKAGE_NAME } from './sql-package-name.js';
import type { SqlLeaseTableNames } from './sql-table-names.js';
import { MAX_TABLE_NAME_LENGTH, sqlLeaseTableNames, TABLE_NAME_PATTERN } from './sql-table-names.js';
import type { AnyKysely } from './sql-types.js';

export const DEFAULT_TABLE_NAME = 'kcl_leases';

/**
 * `transactionTimeoutMs` by default: the consumer's time budget for a transaction with its default
 * timings (`leaseExpiryMs` 45 001 − `leaseRenewIntervalMs` 30 000, rounded down).
 */
export const DEFAULT_TRANSACTION_TIMEOUT_MS = 15_000;

/** Longest application name, in characters: the column is `varchar(255)`. */
export const MAX_APPLICATION_NAME_LENGTH = 255;

export interface SqlLeaseStoreOptions {
  /**
   * The Kysely instance to run on (PostgresDialect with `pg`, MysqlDialect with `mysql2`, or
   * SqliteDialect with `better-sqlite3`). The store never creates or configures it, ignores its
   * plugins (its own SQL names every column), and leaves it open on `close()` unless
   * `destroyDbOnClose` says otherwise.
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
  /** Where the store reports what it skipped, e.g. a lease row `leases.list()` cannot read (default: nothing). */
  readonly logger?: Logger;
  /**
   * `store.close()` also destroys `db` (default false: the caller's database stays the caller's).
   * For code that opens a database only to build this store on it, so the store is all it must close.
   */
  readonly destroyDbOnClose?: boolean;
  /**
   * Session liveness (`capabilities.sessionLiveness`, `workers.attachSession`, `workers.liveSessions`):
   * each attached worker holds one connection of `db`'s pool for as long as its session is open.
   * Default: true on MySQL/MariaDB; false on PostgreSQL, where you turn it on once `db`'s pool gives
   * every client an `error` listener (`pool.on('connect', (client) => client.on('error', …))`): pg ends
   * the process when the server closes a connection that is out of the pool without one (a database
   * restart, say), and a session's connection is out of the pool for the worker's whole life. SQLite
   * has no sessions (true is refused).
   */
  readonly sessionLiveness?: boolean;
  /**
   * PostgreSQL: bounds each `checkpointInTransaction` (exactly-once) transaction on the server, with
   * `SET LOCAL idle_in_transaction_session_timeout` and `lock_timeout` of this many milliseconds, so a
   * transaction whose work stalls (a query on the outer `db` inside the work waiting for a row the
   * transaction locked, say) does not hold its locks forever: a statement waiting longer for a lock
   * fails, and a transaction idle that long has its session ended by the server (pg then emits
   * `error` on the connection: give `db`'s pool clients an `error` listener, as for `sessionLiveness`).
   * Set it to the consumer's `leaseExpiryMs − leaseRenewIntervalMs`, the transaction's time budget.
   * Default 15 000 (that budget with the consumer's defaults); 0 turns it off. MySQL/MariaDB and
   * SQLite ignore it.
   */
  readonly transactionTimeoutMs?: number;
}

/** Options with every default filled in. */
export interface ResolvedSqlLeaseStoreOptions {
  readonly db: AnyKysely;
  readonly applicationName: string;
  readonly tableNames: SqlLeaseTableNames;
  readonly flavor: SqlFlavorName;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly destroyDbOnClose: boolean;
  readonly sessionLiveness: boolean;
  readonly transactionTimeoutMs: number;
}

/** Names the call in every configuration error, as the package's messages start. */
const COMPONENT = `${PACKAGE_NAME} createSqlLeaseStore`;

/** Checks the options and fills in defaults; lists every problem at once in one `ConfigurationError`. */
export function resolveSqlLeaseStoreOptions(options: SqlLeaseStoreOptions): ResolvedSqlLeaseStoreOptions {
  const check = new OptionProblems(COMPONENT);
  const input = (options ?? {}) as Partial<SqlLeaseStoreOptions>;

  const db = checkDb(check, input.db);
  const applicationName = checkApplicationName(check, input.applicationName);

  const tableName = input.tableName ?? DEFAULT_TABLE_NAME;
  if (typeof tableName !== 'string' || !TABLE_NAME_PATTERN.test(tableName)) {
    check.add(
      `tableName ${JSON.stringify(tableName)} is not a plain identifier: use 1-${MAX_TABLE_NAME_LENGTH} characters of a-z, 0-9 and '_', starting with a letter or '_'`,
    );
  }

  const flavor =
    input.flavor !== undefined
      ? check.oneOf('flavor', input.flavor, SQL_FLAVOR_NAMES, 'postgres')
      : db === null
        ? 'postgres'
        : detectedFlavor(check, db);

  const clock = check.clock('clock', input.clock, systemClock);
  const logger = check.logger('logger', input.logger, noopLogger);
  const destroyDbOnClose = check.boolean('destroyDbOnClose', input.destroyDbOnClose, false);
  const sessionLiveness = check.boolean('sessionLiveness', input.sessionLiveness, flavor === 'mysql');
  if (sessionLiveness && flavor === 'sqlite') {
    check.add('sessionLiveness: SQLite has no database sessions to tie a worker to; leave it unset');
  }
  const transactionTimeoutMs = check.integer(
    'transactionTimeoutMs',
    input.transactionTimeoutMs,
    DEFAULT_TRANSACTION_TIMEOUT_MS,
    { min: 0 },
  );
  check.throwIfAny();

  return Object.freeze({
    db: db as AnyKysely,
    applicationName,
    tableNames: sqlLeaseTableNames(tableName),
    flavor,
    clock,
    logger,
    destroyDbOnClose,
    sessionLiveness,
    transactionTimeoutMs,
  });
}

/** The Kysely instance, or null (with the problem recorded) when `db` is not one the store can use. */
function checkDb(check: OptionProblems, db: unknown): AnyKysely | null {
  const isKysely =
    db !== null &&
    typeof db === 'object' &&
    typeof (db as { getExecutor?: unknown }).getExecutor === 'function' &&
    typeof (db as { withoutPlugins?: unknown }).withoutPlugins === 'function';
  if (!isKysely) {
    check.add('db must be a Kysely instance (new Kysely({ dialect }))');
    return null;
  }
  if ((db as AnyKysely).isTransaction) {
    check.add('db must be a Kysely instance, not a transaction: the store runs its own transactions');
    return null;
  }
  return db as AnyKysely;
}

/** The application name must fit the `varchar(255)` column and be storable on every dialect. */
function checkApplicationName(check: OptionProblems, value: unknown): string {
  const applicationName = check.string(
    'applicationName',
    value,
    undefined,
    'the application whose leases the store holds',
  );
  if (codePointLength(applicationName) > MAX_APPLICATION_NAME_LENGTH) {
    check.add(`applicationName must be at most ${MAX_APPLICATION_NAME_LENGTH} characters`);
  }
  if (applicationName.includes('\u0000')) {
    check.add('applicationName must not contain the NUL character (PostgreSQL cannot store it)');
  }
  return applicationName;
}

function detectedFlavor(check: OptionProblems, db: AnyKysely): SqlFlavorName {
  const detected = detectSqlFlavor(db);
  if (detected.flavor !== null) return detected.flavor;
  check.add(
    `flavor could not be detected from the Kysely adapter (${detected.adapterName}); pass flavor: 'postgres', 'mysql' or 'sqlite'`,
  );
  return 'postgres';
}

/** The length in Unicode code points, which is what `varchar(n)` counts on PostgreSQL and MySQL. */
export function codePointLength(value: string): number {
  let length = 0;
  for (const _ of value) length += 1;
  return length;
}
