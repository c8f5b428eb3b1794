import { LeaseStoreError, LeaseStoreSchemaMissingError } from '@kcl/core';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import type { SqlErrorKind } from './sql-errors.js';
import { classifySqlError, isDuplicateKeyError, isWriteConflict, toLeaseStoreError } from './sql-errors.js';
import { sqlLeaseTableNames } from './sql-table-names.js';

/** Errors shaped as pg, mysql2 and Node raise them (the integration tests raise the real ones). */
function postgresError(code: string, message = 'error'): Error {
  return Object.assign(new Error(message), { code, severity: 'ERROR' });
}

function mysqlError(errno: number, code: string, sqlState = 'HY000'): Error {
  return Object.assign(new Error(`${code}: error`), { errno, code, sqlState, fatal: false });
}

function networkError(code: string): Error {
  return Object.assign(new Error(`connect ${code} 127.0.0.1:1`), { code, errno: -111, syscall: 'connect' });
}

function sqliteError(statement: string, prepare?: (database: Database.Database) => void): unknown {
  const database = new Database(':memory:');
  prepare?.(database);
  try {
    database.exec(statement);
  } catch (error) {
    return error;
  } finally {
    database.close();
  }
  throw new Error(`${statement} did not fail`);
}

const context = {
  store: '@kcl/store-sql (test)',
  operation: 'renewing lease "k"',
  tables: sqlLeaseTableNames('kcl_leases'),
};

describe('classifySqlError', () => {
  it.each<[string, unknown, SqlErrorKind]>([
    ['pg: serialization failure', postgresError('40001'), 'conflict'],
    ['pg: deadlock', postgresError('40P01'), 'conflict'],
    ['pg: lock not available', postgresError('55P03'), 'timeout'],
    ['pg: statement timeout', postgresError('57014'), 'timeout'],
    ['pg: admin shutdown', postgresError('57P01'), 'unavailable'],
    ['pg: cannot connect now', postgresError('57P03'), 'unavailable'],
    ['pg: too many connections', postgresError('53300'), 'unavailable'],
    ['pg: connection failure', postgresError('08006'), 'unavailable'],
    ['pg: disk full', postgresError('53100'), 'storage'],
    ['pg: undefined table', postgresError('42P01'), 'missing-table'],
    ['pg: undefined column', postgresError('42703'), 'missing-column'],
    ['pg: insufficient privilege', postgresError('42501'), 'permission'],
    ['pg: password failed', postgresError('28P01'), 'permission'],
    ['pg: unique violation', postgresError('23505'), 'duplicate-key'],
    ['pg: duplicate column', postgresError('42701'), 'duplicate-column'],
    ['pg: syntax error', postgresError('42601'), 'other'],
    ['pg: pool timeout', new Error('timeout exceeded when trying to connect'), 'unavailable'],
    ['pg: connection terminated', new Error('Connection terminated unexpectedly'), 'unavailable'],
    ['mysql: deadlock', mysqlError(1213, 'ER_LOCK_DEADLOCK', '40001'), 'conflict'],
    ['mysql: lock wait timeout', mysqlError(1205, 'ER_LOCK_WAIT_TIMEOUT'), 'timeout'],
    ['mysql: too many connections', mysqlError(1040, 'ER_CON_COUNT_ERROR', '08004'), 'unavailable'],
    ['mysql: no such table', mysqlError(1146, 'ER_NO_SUCH_TABLE', '42S02'), 'missing-table'],
    ['mysql: unknown column', mysqlError(1054, 'ER_BAD_FIELD_ERROR', '42S22'), 'missing-column'],
    ['mysql: table access denied', mysqlError(1142, 'ER_TABLEACCESS_DENIED_ERROR', '42000'), 'permission'],
    ['mysql: duplicate entry', mysqlError(1062, 'ER_DUP_ENTRY', '23000'), 'duplicate-key'],
    ['mysql: duplicate column', mysqlError(1060, 'ER_DUP_FIELDNAME', '42S21'), 'duplicate-column'],
    [
      'mysql: connection lost',
      Object.assign(new Error('lost'), { code: 'PROTOCOL_CONNECTION_LOST', fatal: true }),
      'unavailable',
    ],
    ['node: connection refused', networkError('ECONNREFUSED'), 'unavailable'],
    ['node: timeout', networkError('ETIMEDOUT'), 'unavailable'],
    ['node: refused on every address', new AggregateError([networkError('ECONNREFUSED')], ''), 'unavailable'],
    [
      'a refused connection as a cause',
      new Error('wrapped', { cause: networkError('ECONNREFUSED') }),
      'unavailable',
    ],
    ['sqlite: busy', Object.assign(new Error('database is locked'), { code: 'SQLITE_BUSY' }), 'busy'],
    [
      'sqlite: busy snapshot',
      Object.assign(new Error('database is locked'), { code: 'SQLITE_BUSY_SNAPSHOT' }),
      'busy',
    ],
    ['sqlite: no such table', sqliteError('select * from kcl_leases'), 'missing-table'],
    [
      'sqlite: no such column',
      sqliteError('select nope from t', (db) => db.exec('create table t (a)')),
      'missing-column',
    ],
    [
      'sqlite: primary key',
      sqliteError("insert into t values ('a')", (db) =>
        db.exec("create table t (a primary key) without rowid; insert into t values ('a')"),
      ),
      'duplicate-key',
    ],
    [
      'sqlite: duplicate column',
      sqliteError('alter table t add column a text', (db) => db.exec('create table t (a)')),
      'duplicate-column',
    ],
    ['sqlite: syntax error', sqliteError('selec 1'), 'other'],
    ['anything else', new TypeError('x is not a function'), 'other'],
    ['not an error at all', 'boom', 'other'],
  ])('%s', (_label, error, kind) => {
    expect(classifySqlError(error)).toBe(kind);
  });
});

describe('toLeaseStoreError', () => {
  it('makes unreachable servers retryable and unavailable', () => {
    const error = toLeaseStoreError(networkError('ECONNREFUSED'), context);
    expect(LeaseStoreError.is(error)).toBe(true);
    expect([error.code, error.retryable]).toEqual(['LEASE_STORE_UNAVAILABLE', true]);
    expect(error.message).toMatch(
      /^@kcl\/store-sql \(test\): the database is unreachable while renewing lease "k"/,
    );
    expect(error.message).toContain('ECONNREFUSED');
    expect(error.cause).toBeInstanceOf(Error);
  });

  it('makes SQLITE_BUSY retryable', () => {
    const error = toLeaseStoreError(
      Object.assign(new Error('database is locked'), { code: 'SQLITE_BUSY' }),
      context,
    );
    expect([error.code, error.retryable]).toEqual(['LEASE_STORE_UNAVAILABLE', true]);
    expect(error.message).toContain('busy_timeout');
  });

  it('says that SQLITE_BUSY_SNAPSHOT is a commit after the read, not a lock held too long', () => {
    const error = toLeaseStoreError(
      Object.assign(new Error('database is locked'), { code: 'SQLITE_BUSY_SNAPSHOT' }),
      context,
    );
    expect([error.code, error.retryable]).toEqual(['LEASE_STORE_UNAVAILABLE', true]);
    expect(error.message).toContain('another connection committed after its read');
    expect(error.message).not.toContain('stayed locked');
  });

  it.each([postgresError('40P01'), postgresError('57014'), mysqlError(1213, 'ER_LOCK_DEADLOCK', '40001')])(
    'makes deadlocks and timeouts retryable failures',
    (native) => {
      const error = toLeaseStoreError(native, context);
      expect([error.code, error.retryable]).toEqual(['LEASE_STORE_FAILURE', true]);
    },
  );

  it('says exactly what to run when the tables are missing', () => {
    const error = toLeaseStoreError(postgresError('42P01', 'relation "kcl_leases" does not exist'), context);
    expect(LeaseStoreSchemaMissingError.is(error)).toBe(true);
    expect([error.code, error.retryable]).toEqual(['LEASE_STORE_SCHEMA_MISSING', false]);
    expect(error.message).toContain('run `await store.admin.ensureSchema()`');
    expect(error.message).toContain('"kcl_leases", "kcl_leases_workers", "kcl_leases_applications"');
  });

  it('names the grants when access is refused', () => {
    const error = toLeaseStoreError(mysqlError(1142, 'ER_TABLEACCESS_DENIED_ERROR', '42000'), context);
    expect(error.retryable).toBe(false);
    expect(error.message).toContain('grant the user SELECT, INSERT, UPDATE and DELETE');
  });

  it('keeps other failures non-retryable, with the native message', () => {
    const error = toLeaseStoreError(postgresError('42601', 'syntax error at or near "x"'), context);
    expect([error.code, error.retryable]).toEqual(['LEASE_STORE_FAILURE', false]);
    expect(error.message).toBe(
      '@kcl/store-sql (test): renewing lease "k" failed: 42601: syntax error at or near "x"',
    );
  });

  it('passes kcl errors through unchanged', () => {
    const original = new LeaseStoreError('s', 'already mapped');
    expect(toLeaseStoreError(original, context)).toBe(original);
  });
});

describe('the store-internal predicates', () => {
  it('retries only deadlocks and serialization failures', () => {
    expect(isWriteConflict(postgresError('40001'))).toBe(true);
    expect(isWriteConflict(mysqlError(1213, 'ER_LOCK_DEADLOCK', '40001'))).toBe(true);
    expect(isWriteConflict(mysqlError(1205, 'ER_LOCK_WAIT_TIMEOUT'))).toBe(false);
    expect(isWriteConflict(Object.assign(new Error('locked'), { code: 'SQLITE_BUSY' }))).toBe(false);
  });

  it('recognizes a duplicate key on every dialect', () => {
    expect(isDuplicateKeyError(mysqlError(1062, 'ER_DUP_ENTRY', '23000'))).toBe(true);
    expect(isDuplicateKeyError(postgresError('23505'))).toBe(true);
    expect(isDuplicateKeyError(mysqlError(1146, 'ER_NO_SUCH_TABLE', '42S02'))).toBe(false);
  });
});
