import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LeaseStoreError } from '@kcl/core';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { configureSqliteLeaseDatabase } from './sqlite-lease-database.js';

const directories: string[] = [];

afterEach(() => {
  for (const directory of directories.splice(0)) rmSync(directory, { recursive: true, force: true });
});

function temporaryFile(): string {
  const directory = mkdtempSync(join(tmpdir(), 'kcl-sqlite-'));
  directories.push(directory);
  return join(directory, 'leases.db');
}

describe('configureSqliteLeaseDatabase', () => {
  it('switches a file to WAL, which every later connection sees', () => {
    const file = temporaryFile();
    const database = new Database(file);
    expect(database.pragma('journal_mode', { simple: true })).toBe('delete');
    expect(configureSqliteLeaseDatabase(database)).toBe(database);
    database.close();
    const other = new Database(file);
    expect(other.pragma('journal_mode', { simple: true })).toBe('wal');
    expect(configureSqliteLeaseDatabase(other).pragma('journal_mode', { simple: true })).toBe('wal');
    other.close();
  });

  it('accepts an in-memory database', () => {
    const database = configureSqliteLeaseDatabase(new Database(':memory:'));
    expect(database.pragma('journal_mode', { simple: true })).toBe('memory');
    database.close();
  });

  it('refuses a database that cannot switch to WAL', () => {
    const file = temporaryFile();
    new Database(file).close();
    const readOnly = new Database(file, { readonly: true });
    expect(() => configureSqliteLeaseDatabase(readOnly)).toThrow(LeaseStoreError);
    expect(() => configureSqliteLeaseDatabase(readOnly)).toThrow(
      /could not switch to WAL \(SQLITE_READONLY: attempt to write a readonly database\)/,
    );
    readOnly.close();
  });
});
