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
    mode = switchToWal(database);
  } catch (error) {
    throw sqliteJournalModeError({ error });
  }
  // An in-memory database answers "memory": it has one connection and needs no WAL.
  if (mode !== 'wal' && mode !== 'memory') throw sqliteJournalModeError({ mode });
  return database;
}

/** How long, at most, the switch to WAL waits for other processes opening the same file. */
const WAL_SWITCH_WAIT_MS = 2_000;
const WAL_SWITCH_RETRY_MS = 25;

/**
 * A file already in WAL mode is left as it is (reading the mode takes no lock). The switch itself
 * needs the file to itself, and SQLite answers SQLITE_BUSY at once, without its busy timeout, while
 * another process holds it (workers starting together on a new file): tried again for a moment.
 */
function switchToWal(database: SqlitePragmaDatabase): unknown {
  const current = database.pragma('journal_mode', { simple: true });
  if (current === 'wal' || current === 'memory') return current;
  const pause = new Int32Array(new SharedArrayBuffer(4));
  for (let waited = 0; ; waited += WAL_SWITCH_RETRY_MS) {
    try {
      return database.pragma('journal_mode = WAL', { simple: true });
    } catch (error) {
      const busy = (error as { code?: unknown }).code === 'SQLITE_BUSY';
      if (!busy || waited >= WAL_SWITCH_WAIT_MS) throw error;
      Atomics.wait(pause, 0, 0, WAL_SWITCH_RETRY_MS);
    }
  }
}
