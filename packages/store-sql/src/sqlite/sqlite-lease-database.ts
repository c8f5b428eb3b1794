import { sqliteJournalModeError } from '../sql-errors.js';

/** The part of a better-sqlite3 `Database` this helper uses. */
export interface SqlitePragmaDatabase {
  pragma(source: string, options?: { simple?: boolean }): unknown;
}

/**
 * Prepares a better-sqlite3 database file for leases shared by several processes: switches it to
 * write-ahead logging, so readers never block the writer and a writer blocks other writers only
 * for the length of one statement. WAL is a property of the file; setting it again is harmless.
 *
 * The busy timeout (how long a statement waits for another process's write lock before failing with
 * SQLITE_BUSY, which the store reports as a retryable error) is better-sqlite3's `timeout` option,
 * 5,000 ms unless the caller passes another: `new Database(path, { timeout: 5_000 })`. While it waits,
 * better-sqlite3 blocks the event loop, so keep it at a few seconds.
 *
 * Returns the database, so it can wrap the constructor:
 * `new SqliteDialect({ database: configureSqliteLeaseDatabase(new Database(path)) })`.
 */
export function configureSqliteLeaseDatabase<T extends SqlitePragmaDatabase>(database: T): T {
  let mode: unknown;
  try {
    mode = database.pragma('journal_mode = WAL', { simple: true });
  } catch (error) {
    throw sqliteJournalModeError({ error });
  }
  // An in-memory database answers "memory": it has one connection and needs no WAL.
  if (mode !== 'wal' && mode !== 'memory') throw sqliteJournalModeError({ mode });
  return database;
}
