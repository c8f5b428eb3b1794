import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { ExtendedSequenceNumber } from '@kcl/core';
import { configureSqliteLeaseDatabase, createSqlLeaseStore } from '@kcl/store-sql';
import Database from 'better-sqlite3';
import { Kysely, SqliteDialect } from 'kysely';
import { afterAll, describe, expect, it } from 'vitest';
import { ProgressReporter } from './cli-output.js';
import { runKclMigrate } from './kcl-migrate.js';
import { openStore } from './store-connection.js';

const directory = mkdtempSync(join(tmpdir(), 'kcl-migrate-cli-'));
afterAll(() => rmSync(directory, { recursive: true, force: true }));

async function run(args: readonly string[], signal = new AbortController().signal) {
  let stdout = '';
  let stderr = '';
  const code = await runKclMigrate(
    ['node', 'kcl-migrate', ...args],
    {
      stdout: { write: (text: string) => (stdout += text) },
      stderr: { write: (text: string) => (stderr += text), isTTY: false },
      stdin: Readable.from([]),
      env: {},
    },
    signal,
  );
  return { code, stdout, stderr };
}

async function sqliteSource(file: string, applicationName: string, count: number): Promise<void> {
  const db = new Kysely({
    dialect: new SqliteDialect({ database: configureSqliteLeaseDatabase(new Database(file)) }),
  });
  const store = createSqlLeaseStore({ db, applicationName });
  await store.admin.ensureSchema();
  for (let index = 0; index < count; index++) {
    await store.leases.create({
      leaseKey: `shardId-${index}`,
      checkpoint: ExtendedSequenceNumber.of(String(100 + index)),
      owner: 'old-worker',
    });
  }
  await db.destroy();
}

describe('kcl-migrate options', () => {
  it('prints help with examples, environment and exit codes', async () => {
    const help = await run(['--help']);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain('Examples:');
    expect(help.stdout).toContain('KCL_POSTGRES_URL');
    expect(help.stdout).toContain('130  interrupted');
    expect((await run(['cutover', '--help'])).stdout).toContain('--phase-refresh-ms');
  });

  it('lists every problem at once and exits 2', async () => {
    const result = await run(['--from', 'oracle', '--to', 'postgres']);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('--app is required');
    expect(result.stderr).toContain('--from "oracle" is not a store: use one of dynamo, postgres');
    const misspelt = await run(['--from', 'postgress', '--to', 'sqlit', '--app', 'a', '--dry-run']);
    expect(misspelt.code).toBe(2);
    expect(misspelt.stderr).toContain('--from "postgress" is not a store: did you mean postgres?');
    expect(misspelt.stderr).toContain('--to "sqlit" is not a store: did you mean sqlite?');
    expect(result.stderr).toContain('pass --yes');
    const conflicting = await run([
      '--from',
      'sqlite',
      '--to',
      'postgres',
      '--app',
      'a',
      '--dry-run',
      '--verify',
    ]);
    expect(conflicting.code).toBe(2);
    expect(conflicting.stderr).toContain('choose one of --verify, --dry-run');
    expect(
      (await run(['--from', 'dynamo', '--to', 'postgres', '--app', 'a', '--watch-ms', 'soon'])).code,
    ).toBe(2);
  });

  it('names missing connection settings and refuses a store migrated onto itself', async () => {
    const missing = await run(['--from', 'postgres', '--to', 'mysql', '--app', 'a', '--dry-run']);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain(
      '--from postgres needs --postgres-url (or --from-postgres-url) or KCL_POSTGRES_URL',
    );
    expect(missing.stderr).toContain('--to mysql needs --mysql-url');
    const file = join(directory, 'same.db');
    await sqliteSource(file, 'a', 1);
    const same = await run([
      '--from',
      'sqlite',
      '--to',
      'sqlite',
      '--sqlite-file',
      file,
      '--app',
      'a',
      '--dry-run',
    ]);
    expect(same.code).toBe(2);
    expect(same.stderr).toContain('the source and the target are the same store');
  });

  it('refuses a store URL or endpoint that is no URL before connecting, naming the flag', async () => {
    const source = join(directory, 'url-check.db');
    await sqliteSource(source, 'a', 1);
    const started = performance.now();
    const result = await run([
      '--from',
      'sqlite',
      '--sqlite-file',
      source,
      '--to',
      'postgres',
      '--postgres-url',
      'not-a-url',
      '--app',
      'a',
      '--dry-run',
    ]);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain(
      '--postgres-url (or --to-postgres-url) "not-a-url" is not a URL: use postgres://user:password@host:5432/database',
    );
    expect(result.stderr).not.toMatch(/ENOTFOUND|getaddrinfo/);
    // a usage error, not a failed connection attempt
    expect(performance.now() - started).toBeLessThan(2_000);

    const both = await run([
      '--from',
      'dynamo',
      '--dynamo-endpoint',
      'localhost:4567',
      '--to',
      'mysql',
      '--to-mysql-url',
      'db.internal:3306/kcl',
      '--app',
      'a',
      '--verify',
    ]);
    expect(both.code).toBe(2);
    expect(both.stderr).toContain(
      '--dynamo-endpoint (or --from-dynamo-endpoint) "localhost:4567" is not an http(s) URL',
    );
    expect(both.stderr).toContain(
      '--mysql-url (or --to-mysql-url) "db.internal:3306/kcl" is not a MySQL or MariaDB URL',
    );
  });
});

describe('kcl-migrate against a store that cannot be reached', () => {
  it('fails at once, naming the store and the flag, before it watches the source', async () => {
    const source = join(directory, 'unreachable-target.db');
    await sqliteSource(source, 'a', 1);
    const started = performance.now();
    // Nothing listens on port 1: the connection is refused at once.
    const result = await run([
      '--from',
      'sqlite',
      '--sqlite-file',
      source,
      '--to',
      'postgres',
      '--postgres-url',
      'postgres://kcl:secret@127.0.0.1:1/kcl',
      '--app',
      'a',
      '--yes',
    ]);
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(
      /cannot reach the target store .*127\.0\.0\.1:1.*; check --postgres-url \(or --to-postgres-url\) and that the server is up/,
    );
    expect(result.stderr).not.toContain('secret');
    expect(result.stderr).not.toContain('watching the source');
    expect(performance.now() - started).toBeLessThan(10_000);
  }, 30_000);
});

describe('kcl-migrate between two SQLite files', () => {
  it('copies with per-side flags and prints JSON', async () => {
    const from = join(directory, 'from.db');
    const to = join(directory, 'to.db');
    await sqliteSource(from, 'billing', 3);
    const args = [
      '--from',
      'sqlite',
      '--from-sqlite-file',
      from,
      '--to',
      'sqlite',
      '--to-sqlite-file',
      to,
      '--app',
      'billing',
    ];
    const result = await run([...args, '--yes', '--watch-ms', '50', '--json', '--to-sql-table', 'moved']);
    expect(result.code, result.stderr).toBe(0);
    const report = JSON.parse(result.stdout);
    expect(report).toMatchObject({
      command: 'copy',
      outcome: 'completed',
      exitCode: 0,
      counts: { created: 3 },
      source: { owners: { 'old-worker': 3 } },
      verification: { compared: 3, matching: 3, differences: [] },
      marked: true,
    });
    expect(report.to.name).toContain('SQLite table "moved"');
    const unmark = await run([
      '--unmark',
      '--from',
      'sqlite',
      '--sqlite-file',
      from,
      '--app',
      'billing',
      '--json',
    ]);
    expect(JSON.parse(unmark.stdout)).toMatchObject({ command: 'unmark', cleared: true });
  });

  it('stops when interrupted and finishes when run again', async () => {
    const from = join(directory, 'interrupted-from.db');
    const to = join(directory, 'interrupted-to.db');
    await sqliteSource(from, 'billing', 2);
    const args = [
      '--from',
      'sqlite',
      '--from-sqlite-file',
      from,
      '--to',
      'sqlite',
      '--to-sqlite-file',
      to,
      '--app',
      'billing',
      '--yes',
      '--watch-ms',
      '20',
    ];
    const interrupt = new AbortController();
    interrupt.abort();
    const stopped = await run(args, interrupt.signal);
    expect(stopped.code).toBe(130);
    expect(stopped.stderr).toContain('run the same command again to finish');
    const finished = await run(args);
    expect(finished.code, finished.stderr).toBe(0);
    expect(finished.stdout).toMatch(/created\s+2/);
  });

  it('refuses a missing source file instead of creating it', async () => {
    const result = await run([
      '--from',
      'sqlite',
      '--from-sqlite-file',
      join(directory, 'nope.db'),
      '--to',
      'sqlite',
      '--to-sqlite-file',
      join(directory, 'x.db'),
      '--app',
      'a',
      '--dry-run',
    ]);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('does not exist');
  });
});

describe('openStore', () => {
  it('returns a store whose close() also closes the connection the CLI opened, once', async () => {
    const file = join(directory, 'opened.db');
    const opened = await openStore('to', 'sqlite', { sqliteFile: file }, 'billing', {}, 2);
    await opened.store.admin.ensureSchema();
    expect(await opened.store.leases.list()).toEqual([]);
    await opened.store.close();
    await opened.store.close();
    // The database is closed: the store cannot reach it any more.
    await expect(opened.store.leases.list()).rejects.toThrow();
    expect(opened.name).toContain(file);
  });
});

describe('ProgressReporter', () => {
  it('redraws one bar on a terminal and prints a line per 10% otherwise', () => {
    let tty = '';
    const onTerminal = new ProgressReporter(
      {
        stdout: { write: () => true },
        stderr: { write: (text: string) => (tty += text), isTTY: true },
        stdin: Readable.from([]),
        env: {},
      },
      true,
    );
    for (let done = 0; done <= 4; done++) onTerminal.update('copying', done, 4);
    onTerminal.finish();
    expect(tty.split('\r\x1b[2K')).toHaveLength(6);
    expect(tty).toContain('████████████████████████████ 4/4 leases 100%');
    expect(tty.endsWith('\n')).toBe(true);

    let plain = '';
    const inLog = new ProgressReporter(
      {
        stdout: { write: () => true },
        stderr: { write: (text: string) => (plain += text) },
        stdin: Readable.from([]),
        env: {},
      },
      true,
    );
    for (let done = 0; done <= 100; done++) inLog.update('copying', done, 100);
    expect(plain.trim().split('\n')).toHaveLength(11);
  });
});
