import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { configureSqliteLeaseDatabase } from '../src/index.js';

// Workers starting together on a new SQLite file each switch it to WAL; the switch needs the file to
// itself, and SQLite answers SQLITE_BUSY at once while another process holds it.

const directory = mkdtempSync(join(tmpdir(), 'kcl-wal-'));
afterAll(() => rmSync(directory, { recursive: true, force: true }));
const betterSqlite3 = createRequire(import.meta.url).resolve('better-sqlite3');

/** Another process that holds an exclusive lock on `file` for `ms`; resolves once it holds it. */
function holdExclusiveLock(file: string, ms: number): Promise<{ readonly released: Promise<void> }> {
  const script = `
    const Database = require(${JSON.stringify(betterSqlite3)});
    const db = new Database(${JSON.stringify(file)});
    db.exec('BEGIN EXCLUSIVE');
    db.exec('CREATE TABLE IF NOT EXISTS held (id INTEGER)');
    process.stdout.write('locked\\n');
    setTimeout(() => { db.exec('COMMIT'); db.close(); }, ${ms});
  `;
  const child = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  const released = new Promise<void>((resolve) => child.on('exit', () => resolve()));
  return new Promise((resolve, reject) => {
    child.stdout.on('data', (chunk: Buffer) => {
      if (chunk.toString().includes('locked')) resolve({ released });
    });
    child.on('exit', (code) => reject(new Error(`the lock holder exited (${code}) before locking`)));
  });
}

describe('configureSqliteLeaseDatabase', () => {
  it('waits for another process opening the same new file instead of failing with SQLITE_BUSY', async () => {
    const file = join(directory, 'new.db');
    const holder = await holdExclusiveLock(file, 300);
    const database = new Database(file);
    try {
      const startedAt = performance.now();
      configureSqliteLeaseDatabase(database);
      expect(database.pragma('journal_mode', { simple: true })).toBe('wal');
      // It did wait for the other process (the lock was held for 300 ms).
      expect(performance.now() - startedAt).toBeGreaterThan(100);
    } finally {
      database.close();
      await holder.released;
    }
  });

  it('leaves a file already in WAL mode as it is, even while another process writes to it', async () => {
    const file = join(directory, 'wal.db');
    const first = new Database(file);
    configureSqliteLeaseDatabase(first);
    first.close();
    const holder = await holdExclusiveLock(file, 300);
    const database = new Database(file);
    try {
      expect(() => configureSqliteLeaseDatabase(database)).not.toThrow();
      expect(database.pragma('journal_mode', { simple: true })).toBe('wal');
    } finally {
      database.close();
      await holder.released;
    }
  });
});
