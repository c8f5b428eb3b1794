import {
  LeaseDataError,
  LeaseStoreError,
  LeaseStoreSchemaMissingError,
  NETWORK_ERROR_CODES,
} from '@kcl/core';
import { PACKAGE_NAME } from './sql-package-name.js';
import type { SqlLeaseTableNames } from './sql-table-names.js';

/**
 * Every native error of pg, mysql2, better-sqlite3 and Kysely becomes a kcl error here, and nowhere
 * else. A lost race never reaches this file: the store reports it as a value.
 */

/** What a native error means for the caller. */
export type SqlErrorKind =
  /** The server cannot be reached, refused or dropped the connection, or has no connection to give. */
  | 'unavailable'
  /** SQLite: another connection holds the lock for longer than the busy timeout. */
  | 'busy'
  /** A deadlock or serialization failure: the statement was rolled back and may simply run again. */
  | 'conflict'
  /** A lock wait or statement timeout. */
  | 'timeout'
  /** Disk full or an I/O error: may pass. */
  | 'storage'
  | 'missing-table'
  | 'missing-column'
  | 'permission'
  | 'duplicate-key'
  /** `ALTER TABLE … ADD COLUMN` of a column that exists. */
  | 'duplicate-column'
  | 'other';

/** What a failed call was doing, for the message of the error it becomes. */
export interface SqlErrorContext {
  /** Names the store in messages: `@kcl/store-sql (PostgreSQL table "kcl_leases", application "x")`. */
  readonly store: string;
  /** E.g. `renewing lease "shardId-000000000001"`. */
  readonly operation: string;
  readonly tables: SqlLeaseTableNames;
}

/**
 * mysql2's own codes for a connection that broke or could not be had, on top of core's
 * `NETWORK_ERROR_CODES` (Node's socket and DNS errors, which every driver shares).
 */
const MYSQL2_CONNECTION_CODES = new Set([
  'PROTOCOL_CONNECTION_LOST',
  'PROTOCOL_SEQUENCE_TIMEOUT',
  'PROTOCOL_ENQUEUE_AFTER_FATAL_ERROR',
  'PROTOCOL_ENQUEUE_AFTER_QUIT',
  'ER_CON_COUNT_ERROR',
  'ER_TOO_MANY_USER_CONNECTIONS',
  'ER_SERVER_SHUTDOWN',
  'ER_CONNECTION_KILLED',
  'ER_NET_READ_ERROR',
  'ER_NET_READ_INTERRUPTED',
  'ER_NET_ERROR_ON_WRITE',
  'ER_NET_WRITE_INTERRUPTED',
]);

/** pg reports these connection failures by message only. */
const PG_CONNECTION_MESSAGES = [
  'Connection terminated',
  'timeout exceeded when trying to connect',
  'Query read timeout',
  'Client has encountered a connection error',
  'Connection ended',
];

/** MySQL/MariaDB error numbers. */
const MYSQL = {
  conflict: new Set([1213 /* ER_LOCK_DEADLOCK */, 1020 /* ER_CHECKREAD */]),
  timeout: new Set([
    1205 /* ER_LOCK_WAIT_TIMEOUT */, 3024 /* ER_QUERY_TIMEOUT */, 1969 /* MariaDB statement timeout */,
  ]),
  unavailable: new Set([1040, 1053, 1203, 1927, 2002, 2003, 2006, 2013]),
  storage: new Set([1021 /* ER_DISK_FULL */, 1114 /* ER_RECORD_FILE_FULL */]),
  missingTable: new Set([1146 /* ER_NO_SUCH_TABLE */]),
  missingColumn: new Set([1054 /* ER_BAD_FIELD_ERROR */]),
  permission: new Set([1044, 1045, 1142, 1143, 1227]),
  duplicateKey: new Set([1062 /* ER_DUP_ENTRY */]),
  duplicateColumn: new Set([1060 /* ER_DUP_FIELDNAME */]),
};

/**
 * SQLITE_BUSY_SNAPSHOT: a transaction holding a read snapshot tried to write after another connection
 * committed. Not a lock held too long (the busy timeout does not apply): the transaction must start over.
 */
function isBusySnapshot(error: unknown): boolean {
  return causeChain(error).some((candidate) => candidate.code === 'SQLITE_BUSY_SNAPSHOT');
}

/** Classifies a native error of any of the three drivers (or of Node's network stack). */
export function classifySqlError(error: unknown): SqlErrorKind {
  for (const candidate of causeChain(error)) {
    const kind = classifyOne(candidate);
    if (kind !== 'other') return kind;
  }
  return 'other';
}

function classifyOne(error: Record<string, unknown>): SqlErrorKind {
  const code = typeof error.code === 'string' ? error.code : '';
  const message = typeof error.message === 'string' ? error.message : '';

  if (code.startsWith('SQLITE_')) return classifySqlite(code, message);

  // PostgreSQL: a five-character SQLSTATE in `code`.
  if (/^[0-9A-Z]{5}$/.test(code) && typeof error.severity === 'string') return classifyPostgres(code);

  // MySQL/MariaDB: the server's error number in `errno`, its name in `code`.
  if (typeof error.errno === 'number' && typeof error.sqlState === 'string') {
    const errno = error.errno;
    if (MYSQL.conflict.has(errno)) return 'conflict';
    if (MYSQL.timeout.has(errno)) return 'timeout';
    if (MYSQL.unavailable.has(errno)) return 'unavailable';
    if (MYSQL.storage.has(errno)) return 'storage';
    if (MYSQL.missingTable.has(errno)) return 'missing-table';
    if (MYSQL.missingColumn.has(errno)) return 'missing-column';
    if (MYSQL.permission.has(errno)) return 'permission';
    if (MYSQL.duplicateKey.has(errno)) return 'duplicate-key';
    if (MYSQL.duplicateColumn.has(errno)) return 'duplicate-column';
  }

  if (NETWORK_ERROR_CODES.has(code) || MYSQL2_CONNECTION_CODES.has(code)) return 'unavailable';
  // mysql2 marks errors that broke the connection as fatal.
  if (error.fatal === true) return 'unavailable';
  if (PG_CONNECTION_MESSAGES.some((text) => message.startsWith(text))) return 'unavailable';
  return 'other';
}

function classifyPostgres(sqlState: string): SqlErrorKind {
  if (sqlState === '40001' || sqlState === '40P01') return 'conflict';
  if (sqlState === '55P03' || sqlState === '57014') return 'timeout';
  if (sqlState.startsWith('08') || sqlState.startsWith('57P') || sqlState === '53300') return 'unavailable';
  if (sqlState.startsWith('53') || sqlState.startsWith('58')) return 'storage';
  if (sqlState === '42P01') return 'missing-table';
  if (sqlState === '42703') return 'missing-column';
  if (sqlState === '42501' || sqlState.startsWith('28')) return 'permission';
  if (sqlState === '23505') return 'duplicate-key';
  if (sqlState === '42701') return 'duplicate-column';
  return 'other';
}

function classifySqlite(code: string, message: string): SqlErrorKind {
  if (code.startsWith('SQLITE_BUSY') || code.startsWith('SQLITE_LOCKED')) return 'busy';
  if (code.startsWith('SQLITE_IOERR') || code === 'SQLITE_FULL') return 'storage';
  if (
    code.startsWith('SQLITE_READONLY') ||
    code.startsWith('SQLITE_CANTOPEN') ||
    code === 'SQLITE_PERM' ||
    code === 'SQLITE_AUTH'
  ) {
    return 'permission';
  }
  if (code === 'SQLITE_CONSTRAINT_PRIMARYKEY' || code === 'SQLITE_CONSTRAINT_UNIQUE') return 'duplicate-key';
  if (message.startsWith('duplicate column name')) return 'duplicate-column';
  if (message.startsWith('no such table')) return 'missing-table';
  if (message.startsWith('no such column') || message.includes('has no column named'))
    return 'missing-column';
  return 'other';
}

/** The error and its causes (and the members of an AggregateError), as plain records. */
function causeChain(error: unknown): Record<string, unknown>[] {
  const chain: Record<string, unknown>[] = [];
  const visit = (value: unknown, depth: number): void => {
    if (value === null || typeof value !== 'object' || depth > 4 || chain.includes(value as never)) return;
    const record = value as Record<string, unknown>;
    chain.push(record);
    if (Array.isArray(record.errors)) for (const member of record.errors) visit(member, depth + 1);
    visit(record.cause, depth + 1);
  };
  visit(error, 0);
  return chain;
}

/** Deadlocks and serialization failures: the statement was rolled back whole, so the store runs it again. */
export function isWriteConflict(error: unknown): boolean {
  return classifySqlError(error) === 'conflict';
}

/** MySQL reports an INSERT of an existing key as an error; the store turns it into `already-exists`. */
export function isDuplicateKeyError(error: unknown): boolean {
  return classifySqlError(error) === 'duplicate-key';
}

/** Another process added the column first (SQLite has no migration lock across processes). */
export function isDuplicateColumnError(error: unknown): boolean {
  return classifySqlError(error) === 'duplicate-column';
}

export function isMissingTableError(error: unknown): boolean {
  const kind = classifySqlError(error);
  return kind === 'missing-table' || kind === 'missing-column';
}

/** The kcl error for a native error raised while the store was doing `context.operation`. */
export function toLeaseStoreError(error: unknown, context: SqlErrorContext): LeaseStoreError {
  if (LeaseStoreError.is(error)) return error;
  const { store, operation, tables } = context;
  const detail = nativeDetail(error);
  const kind = classifySqlError(error);
  switch (kind) {
    case 'unavailable':
      return new LeaseStoreError(
        store,
        `${store}: the database is unreachable while ${operation} (${detail}); retry later, and check that the server runs and accepts connections`,
        { code: 'LEASE_STORE_UNAVAILABLE', retryable: true, cause: error },
      );
    case 'busy':
      return new LeaseStoreError(
        store,
        isBusySnapshot(error)
          ? `${store}: a SQLite transaction that had read could not write while ${operation}, because another connection committed after its read (${detail}); nothing was written, retry`
          : `${store}: the SQLite database stayed locked by another connection while ${operation} (${detail}); retry later, or raise busy_timeout (see configureSqliteLeaseDatabase)`,
        { code: 'LEASE_STORE_UNAVAILABLE', retryable: true, cause: error },
      );
    case 'conflict':
      return new LeaseStoreError(
        store,
        `${store}: a deadlock or serialization failure persisted while ${operation} (${detail}); retry`,
        { code: 'LEASE_STORE_FAILURE', retryable: true, cause: error },
      );
    case 'timeout':
      return new LeaseStoreError(
        store,
        `${store}: a lock wait or statement timeout while ${operation} (${detail}); retry`,
        { code: 'LEASE_STORE_FAILURE', retryable: true, cause: error },
      );
    case 'storage':
      return new LeaseStoreError(
        store,
        `${store}: the database could not write while ${operation} (${detail}); retry once the disk or server has room`,
        { code: 'LEASE_STORE_FAILURE', retryable: true, cause: error },
      );
    case 'missing-table':
    case 'missing-column':
      return new LeaseStoreSchemaMissingError(
        store,
        `${store}: the lease tables ${kind === 'missing-table' ? 'do not exist' : 'are not at the current version'} (${detail}) while ${operation}: run \`await store.admin.ensureSchema()\` once (it is idempotent and needs the CREATE and ALTER privileges), or create the tables ${tableList(tables)} with the DDL in the @kcl/store-sql README`,
        { cause: error },
      );
    case 'permission':
      return new LeaseStoreError(
        store,
        `${store}: the database refused access while ${operation} (${detail}); grant the user SELECT, INSERT, UPDATE and DELETE on ${tableList(tables)} (see "Grants" in the @kcl/store-sql README), or check the credentials or file permissions`,
        { code: 'LEASE_STORE_FAILURE', retryable: false, cause: error },
      );
    default:
      return new LeaseStoreError(store, `${store}: ${operation} failed: ${detail}`, {
        code: 'LEASE_STORE_FAILURE',
        retryable: false,
        cause: error,
      });
  }
}

/** `ensureSchema` could not bring the tables to the current version. */
export function schemaCreationError(
  error: unknown,
  context: Omit<SqlErrorContext, 'operation'>,
): LeaseStoreError {
  const { store, tables } = context;
  const kind = classifySqlError(error);
  if (kind === 'permission') {
    // Typically workers whose user has only the worker grants, started on tables of an older version.
    return new LeaseStoreError(
      store,
      `${store}: the database refused to create or upgrade the lease tables ${tableList(tables)} (${nativeDetail(error)}); run admin.ensureSchema() once as a user that may create and alter tables (on PostgreSQL, the owner of the tables; see "Upgrading" in the @kcl/store-sql README), then start the workers again`,
      { code: 'LEASE_STORE_FAILURE', retryable: false, cause: error },
    );
  }
  if (kind !== 'other' && kind !== 'missing-table' && kind !== 'missing-column') {
    return toLeaseStoreError(error, { ...context, operation: 'creating or upgrading the lease tables' });
  }
  return new LeaseStoreError(
    store,
    `${store}: ensureSchema could not create or upgrade the lease tables ${tableList(tables)} (${nativeDetail(error)}); check that the user may create and alter tables, or create them with the DDL in the @kcl/store-sql README`,
    { code: 'LEASE_STORE_FAILURE', retryable: false, cause: error },
  );
}

/** A lease row that cannot be read: names the key, so an operator can repair or delete the row. */
export function invalidLeaseRow(
  store: string,
  leaseKey: string,
  problem: string,
  cause?: unknown,
): LeaseDataError {
  return new LeaseDataError(
    store,
    leaseKey,
    `${problem}; repair the row or delete the lease`,
    cause === undefined ? {} : { cause },
  );
}

/** A stored value other than a lease (a worker, a marker) that cannot be read. */
export function invalidStoredValue(store: string, problem: string, cause?: unknown): LeaseStoreError {
  return new LeaseStoreError(store, `${store}: ${problem}; repair or delete the row`, {
    code: 'LEASE_DATA_INVALID',
    retryable: false,
    ...(cause === undefined ? {} : { cause }),
  });
}

/** A call the store refuses before sending it (a key longer than its column, say). */
export function invalidArgument(store: string, problem: string): LeaseStoreError {
  return new LeaseStoreError(store, `${store}: ${problem}`, {
    code: 'LEASE_STORE_FAILURE',
    retryable: false,
  });
}

/**
 * Another database session holds the worker's session lock. Retryable: a restarted worker's previous
 * session ends once the server notices its connection is gone.
 */
export function sessionHeldError(store: string, workerId: string): LeaseStoreError {
  return new LeaseStoreError(
    store,
    `${store}: worker ${JSON.stringify(workerId)} already has a session holding its lock: the same worker id runs twice, or its previous process's session has not ended on the server yet (or, rarely, another worker id of this application has the same lock key); try again later, and give every worker its own id`,
    { code: 'WORKER_SESSION_HELD', retryable: true },
  );
}

/** A call that needs the store open, after `close()`. */
export function storeClosedError(store: string, operation: string): LeaseStoreError {
  return new LeaseStoreError(store, `${store}: ${operation} after the store was closed`, {
    code: 'LEASE_STORE_FAILURE',
    retryable: false,
  });
}

/** A lease the store refuses to create because it breaks a rule of the contract (named in `problem`). */
export function unstorableLease(store: string, leaseKey: string, problem: string): LeaseStoreError {
  return new LeaseStoreError(
    store,
    `${store}: lease ${JSON.stringify(leaseKey)} cannot be stored: ${problem}`,
    {
      code: 'LEASE_DATA_INVALID',
      retryable: false,
    },
  );
}

/** `configureSqliteLeaseDatabase` could not switch the file to write-ahead logging. */
export function sqliteJournalModeError(
  outcome: { readonly mode: unknown } | { readonly error: unknown },
): LeaseStoreError {
  const what =
    'mode' in outcome
      ? `the SQLite database stayed in journal mode ${JSON.stringify(outcome.mode)} instead of WAL`
      : `the SQLite database could not switch to WAL (${nativeDetail(outcome.error)})`;
  return new LeaseStoreError(
    PACKAGE_NAME,
    `${PACKAGE_NAME}: ${what}; open it read-write on a local file system (WAL does not work over network file systems)`,
    {
      code: 'LEASE_STORE_FAILURE',
      retryable: false,
      ...('error' in outcome ? { cause: outcome.error } : {}),
    },
  );
}

function tableList(tables: SqlLeaseTableNames): string {
  return [tables.leases, tables.workers, tables.applications].map((name) => `"${name}"`).join(', ');
}

function nativeDetail(error: unknown): string {
  const chain = causeChain(error);
  const first = chain[0];
  if (first === undefined) return String(error);
  const code = chain.map((item) => item.code).find((value) => typeof value === 'string' && value.length > 0);
  const messages = chain
    .map((item) => item.message)
    .filter((value): value is string => typeof value === 'string' && value.length > 0);
  const message = messages[0] ?? String(error);
  const text = message.length > 300 ? `${message.slice(0, 297)}...` : message;
  return code === undefined || text.includes(String(code)) ? text : `${String(code)}: ${text}`;
}
