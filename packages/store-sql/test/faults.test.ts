import type { Socket } from 'node:net';
import { createServer } from 'node:net';
import type { LeaseStore } from '@kcl/core';
import {
  ExtendedSequenceNumber,
  LeaseDataError,
  LeaseStoreError,
  LeaseStoreSchemaMissingError,
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
    ensureSchema: () => store.ensureSchema(),
    createLeaseIfAbsent: () => store.createLeaseIfAbsent({ leaseKey: 'k', checkpoint: TRIM_HORIZON }),
    getLease: () => store.getLease('k'),
    listLeases: () => store.listLeases(),
    renewLease: () => store.renewLease('k', 0),
    renewLeases: () => store.renewLeases([{ leaseKey: 'k', leaseCounter: 0 }]),
    takeLease: () => store.takeLease('k', 0, 'w'),
    releaseLease: () => store.releaseLease('k', 0),
    updateCheckpoint: () => store.updateCheckpoint('k', 0, { checkpoint: TRIM_HORIZON }),
    updateLeaseMeta: () => store.updateLeaseMeta('k', { childShardIds: ['c'] }),
    deleteLease: () => store.deleteLease('k'),
    heartbeatWorker: () => store.heartbeatWorker('w'),
    listWorkers: () => store.listWorkers(),
    removeWorker: () => store.removeWorker('w'),
    getMigrationMarker: () => store.getMigrationMarker(),
    setMigrationMarker: () => store.setMigrationMarker({ migratedTo: 'x', migratedAt: new Date(0) }),
  };
}

async function rejectionOf(run: () => Promise<unknown>): Promise<LeaseStoreError> {
  try {
    await run();
  } catch (error) {
    expect(error).toBeInstanceOf(LeaseStoreError);
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
        const error = await rejectionOf(() => store.renewLease('k', 0));
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
      await createSqlLeaseStore({ db, applicationName: 'setup' }).ensureSchema();
    });

    afterAll(async () => {
      await database?.drop();
    });

    it('reports missing tables with what to run, from every operation but ensureSchema', async () => {
      const store = createSqlLeaseStore({ db, applicationName: 'no-schema', tableName: 'never_created' });
      const { ensureSchema: _ensureSchema, ...operations } = everyOperation(store);
      for (const [operation, run] of Object.entries(operations)) {
        const error = await rejectionOf(run);
        expect([operation, error instanceof LeaseStoreSchemaMissingError]).toEqual([operation, true]);
        expect(error.code).toBe('LEASE_STORE_SCHEMA_MISSING');
        expect(error.retryable).toBe(false);
        expect(error.message).toContain('run `await store.ensureSchema()`');
        expect(error.message).toContain(
          '"never_created", "never_created_workers", "never_created_applications"',
        );
      }
      await store.ensureSchema();
      expect(await store.listLeases()).toEqual([]);
    });

    it('reports a corrupted lease row by its key from getLease and listLeases, never skipping it', async () => {
      const store = createSqlLeaseStore({ db, applicationName: 'corrupted' });
      await store.createLeaseIfAbsent({ leaseKey: 'fine-shard', checkpoint: TRIM_HORIZON });
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
        const error = await rejectionOf(() => store.getLease(leaseKey));
        expect(error).toBeInstanceOf(LeaseDataError);
        expect((error as LeaseDataError).leaseKey).toBe(leaseKey);
        expect([error.code, error.retryable]).toEqual(['LEASE_DATA_INVALID', false]);
        expect(error.message).toContain(`lease "${leaseKey}" cannot be read`);
        expect(error.message).toMatch(problem);
      }
      const listed = await rejectionOf(() => store.listLeases());
      expect(listed).toBeInstanceOf(LeaseDataError);
      expect((listed as LeaseDataError).leaseKey).toBe('bad-json-shard');
      expect((await store.getLease('fine-shard'))?.leaseKey).toBe('fine-shard');
      // Other applications sharing the table are unaffected.
      expect(await createSqlLeaseStore({ db, applicationName: 'neighbour' }).listLeases()).toEqual([]);
    });

    it('reports a corrupted worker row instead of dropping it', async () => {
      const store = createSqlLeaseStore({ db, applicationName: 'corrupted-workers' });
      await sql`insert into kcl_leases_workers (application_name, worker_id, heartbeat, last_heartbeat_at_ms, metadata)
        values (${'corrupted-workers'}, ${'w-1'}, 1, 0, ${'{not json'})`.execute(db);
      const error = await rejectionOf(() => store.listWorkers());
      expect([error.code, error.retryable]).toEqual(['LEASE_DATA_INVALID', false]);
      expect(error.message).toContain('worker "w-1" cannot be read: metadata is not JSON');
    });

    it(`keeps lease keys of up to ${MAX_LEASE_KEY_LENGTH} characters and refuses longer ones before sending`, async () => {
      const store = createSqlLeaseStore({ db, applicationName: 'a'.repeat(255) });
      const longest = '😀'.repeat(MAX_LEASE_KEY_LENGTH);
      const created = await store.createLeaseIfAbsent({
        leaseKey: longest,
        checkpoint: TRIM_HORIZON,
        owner: 'w'.repeat(512),
      });
      expect(created.ok).toBe(true);
      expect((await store.getLease(longest))?.leaseKey).toBe(longest);
      const error = await rejectionOf(() =>
        store.createLeaseIfAbsent({ leaseKey: `${longest}x`, checkpoint: TRIM_HORIZON }),
      );
      expect([error.code, error.retryable]).toEqual(['LEASE_STORE_FAILURE', false]);
      expect(error.message).toContain(`longer than ${MAX_LEASE_KEY_LENGTH} characters`);
      expect(await rejectionOf(() => store.heartbeatWorker('w'.repeat(513)))).toBeInstanceOf(LeaseStoreError);
    });
  });
}

describe.skipIf(checks.get('sqlite')?.reason !== null)('sqlite: a database locked by another process', () => {
  let database: TestDatabase;

  beforeAll(async () => {
    database = await TEST_DIALECTS[2]!.createDatabase();
    await createSqlLeaseStore({ db: database.db, applicationName: 'busy' }).ensureSchema();
  });

  afterAll(async () => {
    await database?.drop();
  });

  it('turns SQLITE_BUSY into a retryable error, and the same call succeeds once the lock is gone', async () => {
    const db = sqliteKysely(database.location, { timeoutMs: 50 });
    const store = createSqlLeaseStore({ db, applicationName: 'busy' });
    const created = await store.createLeaseIfAbsent({ leaseKey: 'k', checkpoint: TRIM_HORIZON });
    expect(created.ok).toBe(true);
    // Another connection (as another process would) takes the write lock and keeps it.
    const blocker = new Database(database.location);
    blocker.exec('begin immediate');
    try {
      const error = await rejectionOf(() => store.takeLease('k', 0, 'w'));
      expect([error.code, error.retryable]).toEqual(['LEASE_STORE_UNAVAILABLE', true]);
      expect(error.message).toContain('SQLITE_BUSY');
      // Readers are not blocked in WAL mode.
      expect((await store.getLease('k'))?.leaseCounter).toBe(0);
    } finally {
      blocker.exec('rollback');
      blocker.close();
    }
    const taken = await store.takeLease('k', 0, 'w');
    expect(taken.ok).toBe(true);
    await db.destroy();
  });
});
