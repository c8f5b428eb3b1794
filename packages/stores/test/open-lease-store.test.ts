import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import type { Socket } from 'node:net';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import {
  ConfigurationError,
  ExtendedSequenceNumber,
  type LeaseStore,
  LeaseStoreSchemaMissingError,
} from '@kcl/core';
import { checkService, type RunningEmulator, startDynalite, waitUntil } from '@kcl/testkit';
import { createConnection } from 'mysql2/promise';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openLeaseStore } from '../src/index.js';

const POSTGRES_URL = process.env.KCL_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const MYSQL_URL = process.env.KCL_MYSQL_URL ?? 'mysql://root@127.0.0.1:3306/test';

// Probed once per file: a database that is not there is a visible skip (a failure in CI).
const postgres = await checkService('PostgreSQL', async () => {
  const client = new pg.Client({ connectionString: POSTGRES_URL });
  await client.connect();
  await client.end();
});
const mysql = await checkService('MariaDB', async () => {
  const store = await openLeaseStore(MYSQL_URL, { applicationName: 'probe' });
  try {
    await store.workers.list().catch((error: unknown) => {
      // The tables need not exist; a server that answers is enough.
      if (!LeaseStoreSchemaMissingError.is(error)) throw error;
    });
  } finally {
    await store.close();
  }
});

let dir: string;
let dynalite: RunningEmulator;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'kcl-stores-'));
  dynalite = await startDynalite();
});

afterAll(async () => {
  await dynalite?.stop();
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
});

/** Writes and reads a lease through the store, then closes it and checks the connection is gone. */
async function roundTrip(store: LeaseStore, closes = true): Promise<void> {
  await store.admin.ensureSchema();
  const created = await store.leases.create({
    leaseKey: 'shardId-000000000001',
    checkpoint: ExtendedSequenceNumber.TRIM_HORIZON,
  });
  expect(created.ok).toBe(true);
  expect((await store.leases.get('shardId-000000000001'))?.checkpoint.isSentinel).toBe(true);
  await store.close();
  await store.close();
  // A closed pool or file refuses work; a destroyed DynamoDB client only drops its sockets.
  if (closes) await expect(store.leases.list()).rejects.toThrow();
}

describe('openLeaseStore', () => {
  it('opens SQLite from a URL, and close() closes the file', async () => {
    const store = await openLeaseStore('sqlite:leases.db', {
      applicationName: 'sqlite-app',
      workingDirectory: dir,
    });
    expect(store.description).toContain('SQLite');
    await roundTrip(store);
    const again = await openLeaseStore(
      { kind: 'sqlite', file: join(dir, 'leases.db'), mustExist: true },
      { applicationName: 'sqlite-app' },
    );
    expect((await again.leases.list()).map((lease) => lease.leaseKey)).toEqual(['shardId-000000000001']);
    await again.close();
    // The options form resolves a relative file against workingDirectory too, as the URL form does.
    const relative = await openLeaseStore(
      { kind: 'sqlite', file: 'leases.db', mustExist: true },
      { applicationName: 'sqlite-app', workingDirectory: dir },
    );
    expect((await relative.leases.list()).map((lease) => lease.leaseKey)).toEqual(['shardId-000000000001']);
    await relative.close();
    await expect(
      openLeaseStore(
        { kind: 'sqlite', file: join(dir, 'absent.db'), mustExist: true },
        { applicationName: 'x' },
      ),
    ).rejects.toThrow(/absent\.db cannot be opened/);
  });

  it.skipIf(!postgres.available)('opens PostgreSQL from a URL, and close() ends the pool', async () => {
    const table = `kcl_stores_${Math.floor(Math.random() * 1e9)}`;
    await roundTrip(
      await openLeaseStore(`${POSTGRES_URL}?table=${table}&poolSize=2`, { applicationName: 'pg-app' }),
    );
  });

  it.skipIf(!mysql.available)('opens MariaDB/MySQL from a URL, and close() ends the pool', async () => {
    const table = `kcl_stores_${Math.floor(Math.random() * 1e9)}`;
    await roundTrip(
      await openLeaseStore(`${MYSQL_URL.replace('mysql:', 'mariadb:')}?table=${table}`, {
        applicationName: 'my-app',
      }),
    );
  });

  it.skipIf(!postgres.available)(
    'gives a PostgreSQL store sessions, and survives the server ending one',
    async () => {
      const applicationName = `pg-sessions-${Math.floor(Math.random() * 1e9)}`;
      const store = await openLeaseStore(`${POSTGRES_URL}?poolSize=2`, { applicationName });
      const admin = new pg.Client({ connectionString: POSTGRES_URL });
      await admin.connect();
      try {
        expect(store.capabilities.sessionLiveness).toBe(true);
        const session = await store.workers.attachSession?.('worker-a');
        // The lock's keys as the @kcl/store-sql README gives them.
        const key = (text: string) => createHash('sha256').update(text).digest().readUInt32BE(0);
        const { rows } = await admin.query(
          `select pg_terminate_backend(pid) as ended from pg_locks where locktype = 'advisory'
            and classid = $1::int8::oid and objid = $2::int8::oid and objsubid = 2 and granted`,
          [key(`kcl_leases\u0000${applicationName}`), key('worker-a')],
        );
        expect(rows).toEqual([{ ended: true }]);
        // A pool client without an error listener would have ended this process here.
        await waitUntil(async () => (await session?.check()) === false, 5_000, 'the session to be lost');
        expect(await store.workers.liveSessions?.(['worker-a'])).toEqual(new Set());
        const again = await store.workers.attachSession?.('worker-a');
        expect(await again?.check()).toBe(true);
      } finally {
        await admin.end();
        await store.close();
      }
    },
  );

  it.skipIf(!mysql.available)('gives a MariaDB/MySQL store sessions, which KILL ends', async () => {
    const applicationName = `my-sessions-${Math.floor(Math.random() * 1e9)}`;
    const store = await openLeaseStore(MYSQL_URL, { applicationName });
    const admin = await createConnection({ uri: MYSQL_URL });
    try {
      expect(store.capabilities.sessionLiveness).toBe(true);
      const session = await store.workers.attachSession?.('worker-a');
      const database = new URL(MYSQL_URL).pathname.slice(1);
      const [rows] = await admin.query('select is_used_lock(?) as id', [
        `kcl:${database}.kcl_leases:${applicationName}:worker-a`,
      ]);
      const id = (rows as Array<{ id: number | null }>)[0]?.id;
      expect(typeof id).toBe('number');
      await admin.query(`kill ${Number(id)}`);
      await waitUntil(async () => (await session?.check()) === false, 5_000, 'the session to be lost');
      const again = await store.workers.attachSession?.('worker-a');
      expect(await again?.check()).toBe(true);
    } finally {
      await admin.end();
      await store.close();
    }
  });

  it('opens DynamoDB (an emulator) from a URL, and close() destroys the client', async () => {
    const store = await openLeaseStore(
      `dynamo://stores-app-leases?endpoint=${encodeURIComponent(dynalite.endpoint)}`,
      {
        applicationName: 'stores-app',
      },
    );
    expect(store.description).toContain('stores-app-leases');
    await roundTrip(store, false);
  });

  it("uses the caller's DynamoDB client, and destroys it on close only when asked to", async () => {
    const client = new DynamoDBClient({
      endpoint: dynalite.endpoint,
      region: dynalite.region,
      credentials: dynalite.credentials,
    });
    let destroyed = 0;
    const destroy = client.destroy.bind(client);
    client.destroy = () => {
      destroyed += 1;
      destroy();
    };
    // The endpoint is only for messages here: the requests go where the client points.
    const location = {
      kind: 'dynamo',
      tableName: 'stores-given-client',
      endpoint: 'https://dynamodb.example.invalid',
      client,
    } as const;
    const store = await openLeaseStore(location, { applicationName: 'given', schemaPollIntervalMs: 50 });
    await roundTrip(store, false);
    expect(destroyed).toBe(0);
    const owning = await openLeaseStore(
      { ...location, destroyClientOnClose: true },
      { applicationName: 'given' },
    );
    expect((await owning.leases.get('shardId-000000000001'))?.leaseKey).toBe('shardId-000000000001');
    await owning.close();
    expect(destroyed).toBe(1);
  });

  it('gives up a DynamoDB request after requestTimeoutMs on an endpoint that accepts and never answers', async () => {
    const sockets = new Set<Socket>();
    const silent = createServer((socket) => {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
    });
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const { port } = silent.address() as { port: number };
    const store = await openLeaseStore(`dynamo://silent-leases?endpoint=http://127.0.0.1:${port}`, {
      applicationName: 'silent-app',
      requestTimeoutMs: 200,
      connectionTimeoutMs: 200,
    });
    try {
      const started = performance.now();
      await expect(store.leases.list()).rejects.toThrow(/silent-leases/);
      // The AWS SDK tries three times; without the timeout it would wait for the socket forever.
      expect(performance.now() - started).toBeLessThan(5_000);
    } finally {
      await store.close();
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => silent.close(resolve));
    }
  });

  it('names every problem with its options at once, a misspelt one too', async () => {
    const error = await openLeaseStore('sqlite:leases.db', {
      applicationName: '',
      requestTimeoutMs: 0,
      loger: console,
    } as never).catch((thrown: unknown) => thrown);
    expect(ConfigurationError.is(error)).toBe(true);
    expect((error as ConfigurationError).problems).toEqual([
      'loger is not an option: did you mean `logger`?',
      'applicationName must be a non-empty string: the application whose leases the store holds, got ""',
      'requestTimeoutMs must be an integer from 1 to ∞, got 0',
    ]);
  });
});
