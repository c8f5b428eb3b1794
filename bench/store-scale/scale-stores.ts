import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { LeaseStore } from '@kcl/core';
import { createDynamoLeaseStore } from '@kcl/store-dynamo';
import { configureSqliteLeaseDatabase, createSqlLeaseStore } from '@kcl/store-sql';
import { redactUrl } from '@kcl/stores';
import { startDynalite } from '@kcl/testkit';
import { NodeHttpHandler } from '@smithy/node-http-handler';
import Database from 'better-sqlite3';
import { Kysely, MysqlDialect, PostgresDialect, SqliteDialect, sql } from 'kysely';
import type { Pool as MysqlPool } from 'mysql2';
import { createConnection, createPool } from 'mysql2';
import pg from 'pg';
import { describeError, MYSQL_URL, POSTGRES_URL } from '../store-ops/bench-stores.js';
import { childProcesses, cpuSecondsOf, processesNamed } from './process-cpu.js';
import { RequestLedger } from './request-ledger.js';

const require = createRequire(import.meta.url);

export type ScaleStoreName = 'postgres' | 'mariadb' | 'sqlite' | 'dynamo';

export const SCALE_STORE_NAMES: readonly ScaleStoreName[] = ['postgres', 'mariadb', 'sqlite', 'dynamo'];

export const SCALE_STORE_LABELS: Readonly<Record<ScaleStoreName, string>> = {
  postgres: 'PostgreSQL',
  mariadb: 'MariaDB',
  sqlite: 'SQLite',
  dynamo: 'DynamoDB (dynalite)',
};

/**
 * Connections the whole simulated fleet shares (one pool: the fleet runs in one process, and the
 * shared servers allow 100 and 151 connections). A real fleet has a pool per worker.
 */
export const SQL_POOL_SIZE = 16;

/** One database for a run of fleets, every fleet an application of its own; every call counted. */
export interface ScaleStore {
  readonly name: ScaleStoreName;
  readonly label: string;
  /** What a counted round trip is. */
  readonly roundTripUnit: 'statement' | 'request';
  readonly ledger: RequestLedger;
  /** The server, its settings and how the fleet connects, for the conditions paragraph. */
  readonly details: string;
  /** Whether its workers hold database sessions (session liveness, as the consumer runs it). */
  readonly liveness: boolean;
  /** The most workers that can hold a session at once (a connection each); 0 without liveness. */
  readonly sessionLimit: number;
  /** A counted store for a new application (an empty lease table), its schema ensured. */
  application(applicationName: string): Promise<LeaseStore>;
  /** What `serverCpuSeconds` reads, or why it reads nothing. */
  readonly serverCpuSource: string;
  /** CPU seconds the database has spent so far for this bench's connections; null where not readable. */
  serverCpuSeconds(): Promise<number | null>;
  close(): Promise<void>;
}

export type OpenedScaleStore =
  | { readonly status: 'ready'; readonly store: ScaleStore }
  | { readonly status: 'skipped'; readonly name: ScaleStoreName; readonly reason: string };

/**
 * Connections left to the server's other clients when sessions take the rest (`max_connections`
 * less the fleet's pool, less this many): the same store's run without sessions keeps its pool open
 * meanwhile, and other clients need some too.
 */
const SPARE_CONNECTIONS = SQL_POOL_SIZE + 14;

/**
 * Opens one store for a run of fleets. With `liveness` (PostgreSQL and MariaDB only), every worker
 * attaches a session, which keeps a connection of its own: the pool grows by up to
 * `maxWorkers` connections, as many as the server's `max_connections` allows.
 */
export async function openScaleStore(
  name: ScaleStoreName,
  liveness: boolean,
  maxWorkers: number,
): Promise<OpenedScaleStore> {
  const cleanups: Array<() => Promise<void>> = [];
  let closed: Promise<void> | undefined;
  const close = (): Promise<void> => {
    closed ??= (async () => {
      for (const cleanup of cleanups.reverse()) {
        try {
          await cleanup();
        } catch (error) {
          console.error(`bench: cleaning up ${name} failed: ${describeError(error)}`);
        }
      }
    })();
    return closed;
  };
  try {
    if (liveness && (name === 'sqlite' || name === 'dynamo')) {
      return { status: 'skipped', name, reason: 'no database sessions' };
    }
    return { status: 'ready', store: await OPENERS[name](cleanups, close, liveness ? maxWorkers : 0) };
  } catch (error) {
    await close();
    return { status: 'skipped', name, reason: describeError(error) };
  }
}

/** `sessions`: the workers that will hold a session (0: no session liveness). */
type Opener = (
  cleanups: Array<() => Promise<void>>,
  close: () => Promise<void>,
  sessions: number,
) => Promise<ScaleStore>;

/** The label of a store run with session liveness. */
export function scaleStoreLabel(name: ScaleStoreName, liveness: boolean): string {
  return liveness ? `${SCALE_STORE_LABELS[name]}, liveness on` : SCALE_STORE_LABELS[name];
}

function sessionNote(sessionLimit: number): string {
  return sessionLimit === 0
    ? ''
    : `; session liveness: a session per worker, each on a connection of its own (up to ${sessionLimit} more in the pool)`;
}

const OPENERS: Readonly<Record<ScaleStoreName, Opener>> = {
  postgres: openPostgres,
  mariadb: openMariadb,
  sqlite: openSqlite,
  dynamo: openDynamo,
};

async function openPostgres(
  cleanups: Array<() => Promise<void>>,
  close: () => Promise<void>,
  sessions: number,
): Promise<ScaleStore> {
  let maxConnections = 0;
  await withPostgresAdmin(async (admin) => {
    const { rows } = await admin.query<{ max_connections: string }>('show max_connections');
    maxConnections = Number(rows[0]?.max_connections);
  });
  const sessionLimit = Math.max(0, Math.min(sessions, maxConnections - SQL_POOL_SIZE - SPARE_CONNECTIONS));
  const databaseName = throwawayDatabaseName();
  await withPostgresAdmin((admin) => admin.query(`create database "${databaseName}"`));
  cleanups.push(() =>
    withPostgresAdmin((admin) => admin.query(`drop database if exists "${databaseName}" with (force)`)),
  );
  const pool = new pg.Pool({
    connectionString: withDatabase(POSTGRES_URL, databaseName),
    max: SQL_POOL_SIZE + sessionLimit,
    idleTimeoutMillis: 0,
    connectionTimeoutMillis: 30_000,
    application_name: 'kcl-bench-store-scale',
  });
  pool.on('error', () => undefined); // an idle connection closed by the final drop must not crash the run
  // Every connection opened now and kept, so the backends whose CPU is read stay the same.
  const clients = await Promise.all(Array.from({ length: SQL_POOL_SIZE }, () => pool.connect()));
  for (const client of clients) client.release();
  const ledger = new RequestLedger();
  const db = new Kysely({ dialect: new PostgresDialect({ pool }), log: () => ledger.roundTrip() });
  cleanups.push(() => db.destroy());
  const [version, synchronousCommit] = await settingsOf(db, [
    'select version() as value',
    'show synchronous_commit',
  ]);
  const local = isLocalHost(POSTGRES_URL);
  return {
    name: 'postgres',
    label: scaleStoreLabel('postgres', sessions > 0),
    roundTripUnit: 'statement',
    ledger,
    liveness: sessions > 0,
    sessionLimit,
    details: `${(version ?? 'PostgreSQL ?').split(' ').slice(0, 2).join(' ')} at ${redactUrl(POSTGRES_URL)} (synchronous_commit=${synchronousCommit}, max_connections=${maxConnections}), a throwaway database, one pg pool of ${SQL_POOL_SIZE} for the fleet${sessionNote(sessionLimit)}`,
    application: (applicationName) =>
      ensured(ledger.count(createSqlLeaseStore({ db, applicationName, sessionLiveness: sessions > 0 }))),
    serverCpuSource: local
      ? `the bench's ${SQL_POOL_SIZE} PostgreSQL backends (/proc/<pid>/stat of the pids pg_stat_activity lists for the throwaway database; pg_stat_statements is not loaded on this server); the WAL writer and checkpointer are not included`
      : 'n/a (the server is not on this host)',
    serverCpuSeconds: async () => {
      if (!local) return null;
      let pids: number[] = [];
      await withPostgresAdmin(async (admin) => {
        const { rows } = await admin.query<{ pid: number }>(
          'select pid from pg_stat_activity where datname = $1',
          [databaseName],
        );
        pids = rows.map((row) => row.pid);
      });
      return sumCpu(pids.map((pid) => cpuSecondsOf(pid)));
    },
    close,
  };
}

async function openMariadb(
  cleanups: Array<() => Promise<void>>,
  close: () => Promise<void>,
  sessions: number,
): Promise<ScaleStore> {
  let maxConnections = 0;
  await withMysqlAdmin(async (admin) => {
    const [rows] = await admin.query('select @@max_connections as value');
    maxConnections = Number((rows as Array<{ value: number }>)[0]?.value);
  });
  const sessionLimit = Math.max(0, Math.min(sessions, maxConnections - SQL_POOL_SIZE - SPARE_CONNECTIONS));
  const databaseName = throwawayDatabaseName();
  await withMysqlAdmin((admin) => admin.query(`create database \`${databaseName}\` character set utf8mb4`));
  cleanups.push(() => withMysqlAdmin((admin) => admin.query(`drop database if exists \`${databaseName}\``)));
  const pool: MysqlPool = createPool({
    uri: withDatabase(MYSQL_URL, databaseName),
    connectionLimit: SQL_POOL_SIZE + sessionLimit,
    maxIdle: SQL_POOL_SIZE + sessionLimit,
    idleTimeout: 24 * 3_600_000,
    connectTimeout: 30_000,
  });
  // Every connection opened now and kept, so the server threads whose CPU is read stay the same.
  const connections = await Promise.all(
    Array.from(
      { length: SQL_POOL_SIZE },
      () =>
        new Promise<Parameters<Parameters<MysqlPool['getConnection']>[0]>[1]>((resolve, reject) =>
          pool.getConnection((error, connection) => (error ? reject(error) : resolve(connection))),
        ),
    ),
  );
  for (const connection of connections) connection.release();
  const ledger = new RequestLedger();
  const db = new Kysely({ dialect: new MysqlDialect({ pool }), log: () => ledger.roundTrip() });
  cleanups.push(() => db.destroy());
  const [version, flush] = await settingsOf(db, [
    'select version() as value',
    'select @@innodb_flush_log_at_trx_commit as value',
  ]);
  const local = isLocalHost(MYSQL_URL);
  const serverPid = local ? (processesNamed(['mariadbd', 'mysqld'])[0] ?? null) : null;
  return {
    name: 'mariadb',
    label: scaleStoreLabel('mariadb', sessions > 0),
    roundTripUnit: 'statement',
    ledger,
    liveness: sessions > 0,
    sessionLimit,
    details: `MariaDB ${version?.split('-')[0]} at ${redactUrl(MYSQL_URL)} (InnoDB, innodb_flush_log_at_trx_commit=${flush}, max_connections=${maxConnections}), a throwaway database, one mysql2 pool of ${SQL_POOL_SIZE} for the fleet${sessionNote(sessionLimit)}`,
    application: (applicationName) =>
      ensured(ledger.count(createSqlLeaseStore({ db, applicationName, sessionLiveness: sessions > 0 }))),
    serverCpuSource:
      serverPid === null
        ? 'n/a (no mariadbd process on this host)'
        : `the server threads of the bench's ${SQL_POOL_SIZE} connections (/proc/${serverPid}/task/<tid>/stat, the TIDs information_schema.processlist gives); InnoDB's background threads are not included`,
    serverCpuSeconds: async () => {
      if (serverPid === null) return null;
      let threads: number[] = [];
      await withMysqlAdmin(async (admin) => {
        const [rows] = await admin.query(
          'select TID as tid from information_schema.processlist where DB = ?',
          [databaseName],
        );
        threads = (rows as Array<{ tid: number }>).map((row) => Number(row.tid));
      });
      return sumCpu(threads.map((tid) => cpuSecondsOf(serverPid, tid)));
    },
    close,
  };
}

async function openSqlite(
  cleanups: Array<() => Promise<void>>,
  close: () => Promise<void>,
): Promise<ScaleStore> {
  const directory = mkdtempSync(join(tmpdir(), 'kcl-bench-store-scale-'));
  cleanups.push(async () => rmSync(directory, { recursive: true, force: true }));
  const database = configureSqliteLeaseDatabase(
    new Database(join(directory, 'leases.db'), { timeout: 5_000 }),
  );
  const ledger = new RequestLedger();
  const db = new Kysely({ dialect: new SqliteDialect({ database }), log: () => ledger.roundTrip() });
  cleanups.push(() => db.destroy());
  const version = database.prepare('select sqlite_version()').pluck().get() as string;
  return {
    name: 'sqlite',
    label: SCALE_STORE_LABELS.sqlite,
    liveness: false,
    sessionLimit: 0,
    roundTripUnit: 'statement',
    ledger,
    details: `SQLite ${version} (better-sqlite3), a WAL file under ${tmpdir()}, one connection for the fleet`,
    application: (applicationName) => ensured(ledger.count(createSqlLeaseStore({ db, applicationName }))),
    serverCpuSource: 'n/a (SQLite runs inside the bench process)',
    serverCpuSeconds: async () => null,
    close,
  };
}

/** Commands that can report the capacity they consumed, and which kind. */
const CAPACITY_KIND: Readonly<Record<string, 'read' | 'write'>> = {
  GetItemCommand: 'read',
  QueryCommand: 'read',
  ScanCommand: 'read',
  BatchGetItemCommand: 'read',
  PutItemCommand: 'write',
  UpdateItemCommand: 'write',
  DeleteItemCommand: 'write',
  BatchWriteItemCommand: 'write',
  TransactWriteItemsCommand: 'write',
};

async function openDynamo(
  cleanups: Array<() => Promise<void>>,
  close: () => Promise<void>,
): Promise<ScaleStore> {
  // In a process of its own, so that its CPU is its own and the fleet's work does not queue its requests.
  const emulator = await startDynalite({
    separateProcess: true,
    createTableMs: 5,
    deleteTableMs: 5,
    updateTableMs: 5,
  });
  cleanups.push(() => emulator.stop());
  const emulatorPid = childProcesses(process.pid, 'dynalite-server')[0] ?? null;
  const client = new DynamoDBClient({
    endpoint: emulator.endpoint,
    region: emulator.region,
    credentials: emulator.credentials,
    requestHandler: new NodeHttpHandler({ requestTimeout: 60_000 }),
  });
  cleanups.push(async () => client.destroy());
  const ledger = new RequestLedger();
  client.middlewareStack.add(
    (next, context) => async (args) => {
      const kind = CAPACITY_KIND[context.commandName ?? ''];
      if (kind !== undefined) {
        (args.input as { ReturnConsumedCapacity?: string }).ReturnConsumedCapacity = 'TOTAL';
      }
      const result = await next(args);
      const consumed = (result.output as { ConsumedCapacity?: unknown }).ConsumedCapacity;
      if (kind !== undefined) ledger.capacity(kind, capacityUnits(consumed));
      return result;
    },
    { step: 'initialize', name: 'benchCapacityCounter' },
  );
  // Below the SDK's retry middleware (finalizeRequest step), so every attempt on the wire is counted.
  client.middlewareStack.add(
    (next) => async (args) => {
      ledger.roundTrip();
      return next(args);
    },
    { step: 'deserialize', name: 'benchRequestCounter' },
  );
  const dynalite = createRequire(require.resolve('@kcl/testkit'))('dynalite/package.json') as {
    version: string;
  };
  return {
    name: 'dynamo',
    label: SCALE_STORE_LABELS.dynamo,
    liveness: false,
    sessionLimit: 0,
    roundTripUnit: 'request',
    ledger,
    details: `DynamoDB: dynalite ${dynalite.version} in memory in its own process, java layout (a table per application), AWS SDK v3 client, strongly consistent reads; no batched renewal, so the lease keeper renews one lease per request, 16 at a time`,
    application: (applicationName) =>
      ensured(
        ledger.count(
          createDynamoLeaseStore({ client, applicationName, layout: 'java', schemaPollIntervalMs: 20 }),
        ),
      ),
    serverCpuSource:
      emulatorPid === null
        ? 'n/a (the dynalite process was not found)'
        : `the dynalite process (/proc/${emulatorPid}/stat): an emulator's CPU, nothing DynamoDB bills`,
    serverCpuSeconds: async () => (emulatorPid === null ? null : cpuSecondsOf(emulatorPid)),
    close,
  };
}

function capacityUnits(consumed: unknown): number {
  if (Array.isArray(consumed)) return consumed.reduce((sum: number, entry) => sum + capacityUnits(entry), 0);
  const units = (consumed as { CapacityUnits?: unknown } | undefined)?.CapacityUnits;
  return typeof units === 'number' ? units : 0;
}

async function ensured(store: LeaseStore): Promise<LeaseStore> {
  await store.admin.ensureSchema();
  return store;
}

function sumCpu(readings: ReadonlyArray<number | null>): number | null {
  const present = readings.filter((reading): reading is number => reading !== null);
  return present.length === 0 ? null : present.reduce((sum, seconds) => sum + seconds, 0);
}

function isLocalHost(url: string): boolean {
  const host = new URL(url).hostname;
  return host === '127.0.0.1' || host === 'localhost' || host === '::1' || host === '[::1]';
}

async function settingsOf(
  db: Kysely<unknown>,
  queries: readonly string[],
): Promise<Array<string | undefined>> {
  const values: Array<string | undefined> = [];
  for (const query of queries) {
    const { rows } = await sql<Record<string, unknown>>`${sql.raw(query)}`.execute(db);
    const value = Object.values(rows[0] ?? {})[0];
    values.push(value === undefined ? undefined : String(value));
  }
  return values;
}

async function withPostgresAdmin(run: (client: pg.Client) => Promise<unknown>): Promise<void> {
  const client = new pg.Client({ connectionString: POSTGRES_URL, connectionTimeoutMillis: 10_000 });
  await client.connect();
  try {
    await run(client);
  } finally {
    await client.end();
  }
}

async function withMysqlAdmin(
  run: (connection: ReturnType<ReturnType<typeof createConnection>['promise']>) => Promise<unknown>,
): Promise<void> {
  const connection = createConnection({ uri: MYSQL_URL, connectTimeout: 10_000 });
  try {
    await run(connection.promise());
  } finally {
    connection.destroy();
  }
}

function throwawayDatabaseName(): string {
  return `kcl_scale_${randomBytes(6).toString('hex')}`;
}

function withDatabase(url: string, database: string): string {
  const parsed = new URL(url);
  parsed.pathname = `/${database}`;
  return parsed.toString();
}
