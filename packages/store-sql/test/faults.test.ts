import type { Socket } from 'node:net';
import { createServer } from 'node:net';
import type { LeaseStore, LogFields, Logger } from '@kcl/core';
import {
  ExtendedSequenceNumber,
  LeaseDataError,
  LeaseStoreError,
  LeaseStoreSchemaMissingError,
  noopLogger,
} from '@kcl/core';
import { freePort } from '@kcl/testkit';
import Database from 'better-sqlite3';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AnyKysely } from '../src/index.js';
import { createSqlLeaseStore, MAX_LEASE_KEY_LENGTH } from '../src/index.js';
import type { TestDatabase } from './test-databases.js';
import { checkDialects, mysqlKysely, postgresKysely, sqliteKysely, TEST_DIALECTS } from './test-databases.js';

const checks = await checkDialects();
const TRIM_HORIZON = ExtendedSequenceNumber.TRIM_HORIZON;

/** Every call a runtime makes, each of which must fail the same typed way when the database does. */
function everyOperation(store: LeaseStore): Record<string, () => Promise<unknown>> {
  return {
    'admin.ensureSchema': () => store.admin.ensureSchema(),
    'leases.create': () => store.leases.create({ leaseKey: 'k', checkpoint: TRIM_HORIZON }),
    'leases.get': () => store.leases.get('k'),
    'leases.list': () => store.leases.list(),
    'leases.renew': () => store.leases.renew('k', 0),
    'leases.renewMany': () => store.leases.renewMany([{ leaseKey: 'k', leaseCounter: 0 }]),
    'leases.take': () => store.leases.take('k', 0, 'w'),
    'leases.release': () => store.leases.release('k', 0),
    'leases.requestHandoff': () =>
      store.leases.requestHandoff('k', 0, { from: 'w', to: 'v', deadline: null }),
    'leases.completeHandoff': () => store.leases.completeHandoff('k', 0),
    'leases.checkpoint': () => store.leases.checkpoint('k', 0, { checkpoint: TRIM_HORIZON }),
    'leases.updateMeta': () => store.leases.updateMeta('k', { childShardIds: ['c'] }),
    'leases.delete': () => store.leases.delete('k'),
    'workers.heartbeat': () => store.workers.heartbeat('w'),
    'workers.heartbeat (with metadata)': () => store.workers.heartbeat('w', { host: 'h' }),
    'workers.list': () => store.workers.list(),
    'workers.remove': () => store.workers.remove('w'),
    'admin.getMigrationMarker': () => store.admin.getMigrationMarker(),
    'admin.setMigrationMarker': () =>
      store.admin.setMigrationMarker({ migratedTo: 'x', migratedAt: new Date(0) }),
    'admin.scan': () => store.admin.scan(),
  };
}

async function rejectionOf(run: () => Promise<unknown>): Promise<LeaseStoreError> {
  try {
    await run();
  } catch (error) {
    expect(LeaseStoreError.is(error)).toBe(true);
    return error as LeaseStoreError;
  }
  throw new Error('the call did not fail');
}

/** A TCP server that accepts connections and never says a word: a hung database. */
async function silentServer(): Promise<{ port: number; close: () => Promise<void> }> {
  const sockets = new Set<Socket>();
  const server = createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('no port');
  return {
    port: address.port,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

const NETWORK_DIALECTS = {
  postgres: (port: number, timeoutMs: number) =>
    postgresKysely(`postgres://postgres@127.0.0.1:${port}/postgres`, {
      poolSize: 2,
      connectTimeoutMs: timeoutMs,
    }),
  mysql: (port: number, timeoutMs: number) =>
    mysqlKysely(`mysql://root@127.0.0.1:${port}/test`, { poolSize: 2, connectTimeoutMs: timeoutMs }),
} as const;

for (const [flavor, connect] of Object.entries(NETWORK_DIALECTS)) {
  describe(`${flavor}: an unreachable server`, () => {
    it('fails every operation with a retryable LEASE_STORE_UNAVAILABLE and never crashes', async () => {
      const db = connect(await freePort(), 2_000);
      try {
        const store = createSqlLeaseStore({ db, applicationName: 'unreachable' });
        for (const [operation, run] of Object.entries(everyOperation(store))) {
          const error = await rejectionOf(run);
          expect([operation, error.code, error.retryable]).toEqual([
            operation,
            'LEASE_STORE_UNAVAILABLE',
            true,
          ]);
          expect(error.message).toMatch(/^@kcl\/store-sql \(.*\): the database is unreachable while/);
          expect(error.message).toContain('ECONNREFUSED');
        }
      } finally {
        await db.destroy();
      }
    });

    it('turns a server that accepts but never answers into a retryable error after the connect timeout', async () => {
      const server = await silentServer();
      const db = connect(server.port, 300);
      try {
        const store = createSqlLeaseStore({ db, applicationName: 'hung' });
        const error = await rejectionOf(() => store.leases.renew('k', 0));
        expect([error.code, error.retryable]).toEqual(['LEASE_STORE_UNAVAILABLE', true]);
      } finally {
        await db.destroy();
        await server.close();
      }
    });
  });
}

for (const dialect of TEST_DIALECTS) {
  const skip = checks.get(dialect.flavor)?.reason ?? null;

  describe.skipIf(skip !== null)(`${dialect.flavor}: faults`, () => {
    let database: TestDatabase;
    let db: AnyKysely;

    beforeAll(async () => {
      database = await dialect.createDatabase();
      db = database.db;
      await createSqlLeaseStore({ db, applicationName: 'setup' }).admin.ensureSchema();
    });

    afterAll(async () => {
      await database?.drop();
    });

    it('reports missing tables with what to run, from every operation but ensureSchema', async () => {
      const store = createSqlLeaseStore({ db, applicationName: 'no-schema', tableName: 'never_created' });
      const { 'admin.ensureSchema': _ensureSchema, ...operations } = everyOperation(store);
      for (const [operation, run] of Object.entries(operations)) {
        const error = await rejectionOf(run);
        expect([operation, LeaseStoreSchemaMissingError.is(error)]).toEqual([operation, true]);
        expect(error.code).toBe('LEASE_STORE_SCHEMA_MISSING');
        expect(error.retryable).toBe(false);
        expect(error.message).toContain('run `await store.admin.ensureSchema()`');
        expect(error.message).toContain(
          '"never_created", "never_created_workers", "never_created_applications"',
        );
      }
      await store.admin.ensureSchema();
      expect(await store.leases.list()).toEqual([]);
    });

    it('skips a corrupted lease row in leases.list() with a warning, reports it from admin.scan() and leases.get()', async () => {
      const warnings: { message: string; fields: LogFields | undefined }[] = [];
      const logger: Logger = {
        ...noopLogger,
        warn: (message, fields) => warnings.push({ message, fields }),
      };
      const store = createSqlLeaseStore({ db, applicationName: 'corrupted', logger });
      await store.leases.create({ leaseKey: 'fine-shard', checkpoint: TRIM_HORIZON });
      await sql`insert into kcl_leases (application_name, lease_key, lease_counter, checkpoint_sequence_number,
          checkpoint_sub_sequence_number, owner_switches_since_checkpoint, parent_shard_ids, child_shard_ids)
        values (${'corrupted'}, ${'broken-shard'}, 0, ${'not-a-number'}, 0, 0, ${'[]'}, ${'[]'})`.execute(db);
      await sql`insert into kcl_leases (application_name, lease_key, lease_counter, checkpoint_sequence_number,
          checkpoint_sub_sequence_number, owner_switches_since_checkpoint, parent_shard_ids, child_shard_ids)
        values (${'corrupted'}, ${'bad-json-shard'}, 0, ${'LATEST'}, 0, 0, ${'[shardId-1'}, ${'[]'})`.execute(
        db,
      );

      for (const [leaseKey, problem] of [
        ['broken-shard', /checkpoint "not-a-number"\/0 is not a position/],
        ['bad-json-shard', /parent_shard_ids is not JSON/],
      ] as const) {
        const error = await rejectionOf(() => store.leases.get(leaseKey));
        expect(LeaseDataError.is(error)).toBe(true);
        expect((error as LeaseDataError).leaseKey).toBe(leaseKey);
        expect([error.code, error.retryable]).toEqual(['LEASE_DATA_INVALID', false]);
        expect(error.message).toContain(`lease "${leaseKey}" cannot be read`);
        expect(error.message).toMatch(problem);
      }

      // One bad row must not stop a fleet: the list goes on without it, and says so.
      expect((await store.leases.list()).map((lease) => lease.leaseKey)).toEqual(['fine-shard']);
      expect(warnings.map((warning) => warning.fields?.leaseKey)).toEqual(['bad-json-shard', 'broken-shard']);
      expect(warnings[0]?.message).toMatch(
        /^@kcl\/store-sql: skipped lease "bad-json-shard", which cannot be read: parent_shard_ids is not JSON/,
      );
      expect(warnings[0]?.message).toContain('store.admin.scan()');
      expect(warnings[1]?.fields).toMatchObject({
        table: 'kcl_leases',
        applicationName: 'corrupted',
        problem: expect.stringMatching(/checkpoint "not-a-number"\/0 is not a position/),
      });

      const scan = await store.admin.scan();
      expect(scan.leases.map((lease) => lease.leaseKey)).toEqual(['fine-shard']);
      expect(scan.unreadable).toEqual([
        { leaseKey: 'bad-json-shard', problem: expect.stringMatching(/^parent_shard_ids is not JSON/) },
        { leaseKey: 'broken-shard', problem: expect.stringMatching(/not a position/) },
      ]);
      // A store without a logger skips the row all the same.
      const quiet = createSqlLeaseStore({ db, applicationName: 'corrupted' });
      expect((await quiet.leases.list()).map((lease) => lease.leaseKey)).toEqual(['fine-shard']);
      // Other applications sharing the table are unaffected.
      expect(await createSqlLeaseStore({ db, applicationName: 'neighbour' }).leases.list()).toEqual([]);
    });

    it('fails only the corrupted lease of a batch renewal; the others renew', async () => {
      const store = createSqlLeaseStore({ db, applicationName: 'corrupted-renewal' });
      const fine = await store.leases.create({ leaseKey: 'fine-shard', checkpoint: TRIM_HORIZON });
      const doomed = await store.leases.create({ leaseKey: 'doomed-shard', checkpoint: TRIM_HORIZON });
      expect([fine.ok, doomed.ok]).toEqual([true, true]);
      // Damaged after a worker took it: the renewal still finds the row by key and counter.
      await sql`update kcl_leases set parent_shard_ids = ${'{oops'}
        where application_name = ${'corrupted-renewal'} and lease_key = ${'doomed-shard'}`.execute(db);
      const results = await store.leases.renewMany([
        { leaseKey: 'doomed-shard', leaseCounter: 0 },
        { leaseKey: 'fine-shard', leaseCounter: 0 },
      ]);
      expect(results[0]).toMatchObject({ ok: false, reason: 'failed' });
      const failure = results[0] as { error: unknown };
      expect(LeaseDataError.is(failure.error)).toBe(true);
      expect((failure.error as LeaseDataError).leaseKey).toBe('doomed-shard');
      expect(results[1]).toMatchObject({ ok: true, lease: { leaseKey: 'fine-shard', leaseCounter: 1 } });
    });

    it('reports a corrupted worker row instead of dropping it', async () => {
      const store = createSqlLeaseStore({ db, applicationName: 'corrupted-workers' });
      await sql`insert into kcl_leases_workers (application_name, worker_id, heartbeat, last_heartbeat_at_ms, metadata)
        values (${'corrupted-workers'}, ${'w-1'}, 1, 0, ${'{not json'})`.execute(db);
      const error = await rejectionOf(() => store.workers.list());
      expect([error.code, error.retryable]).toEqual(['LEASE_DATA_INVALID', false]);
      expect(error.message).toContain('worker "w-1" cannot be read: metadata is not JSON');
    });

    it(`keeps lease keys of up to ${MAX_LEASE_KEY_LENGTH} characters and refuses longer ones before sending`, async () => {
      const store = createSqlLeaseStore({ db, applicationName: 'a'.repeat(255) });
      const longest = '😀'.repeat(MAX_LEASE_KEY_LENGTH);
      const created = await store.leases.create({
        leaseKey: longest,
        checkpoint: TRIM_HORIZON,
        owner: 'w'.repeat(512),
      });
      expect(created.ok).toBe(true);
      expect((await store.leases.get(longest))?.leaseKey).toBe(longest);
      const error = await rejectionOf(() =>
        store.leases.create({ leaseKey: `${longest}x`, checkpoint: TRIM_HORIZON }),
      );
      expect([error.code, error.retryable]).toEqual(['LEASE_STORE_FAILURE', false]);
      expect(error.message).toContain(`longer than ${MAX_LEASE_KEY_LENGTH} characters`);
      const tooLong = await rejectionOf(() => store.workers.heartbeat('w'.repeat(513)));
      expect(tooLong.message).toContain('longer than 512 characters');
    });
  });
}

describe.skipIf(checks.get('sqlite')?.reason !== null)('sqlite: a database locked by another process', () => {
  let database: TestDatabase;

  beforeAll(async () => {
    database = await TEST_DIALECTS[2]!.createDatabase();
    await createSqlLeaseStore({ db: database.db, applicationName: 'busy' }).admin.ensureSchema();
  });

  afterAll(async () => {
    await database?.drop();
  });

  it('turns SQLITE_BUSY into a retryable error, and the same call succeeds once the lock is gone', async () => {
    const db = sqliteKysely(database.location, { timeoutMs: 50 });
    const store = createSqlLeaseStore({ db, applicationName: 'busy' });
    const created = await store.leases.create({ leaseKey: 'k', checkpoint: TRIM_HORIZON });
    expect(created.ok).toBe(true);
    // Another connection (as another process would) takes the write lock and keeps it.
    const blocker = new Database(database.location);
    blocker.exec('begin immediate');
    try {
      const error = await rejectionOf(() => store.leases.take('k', 0, 'w'));
      expect([error.code, error.retryable]).toEqual(['LEASE_STORE_UNAVAILABLE', true]);
      expect(error.message).toContain('SQLITE_BUSY');
      // Readers are not blocked in WAL mode.
      expect((await store.leases.get('k'))?.leaseCounter).toBe(0);
    } finally {
      blocker.exec('rollback');
      blocker.close();
    }
    const taken = await store.leases.take('k', 0, 'w');
    expect(taken.ok).toBe(true);
    await db.destroy();
  });
});
