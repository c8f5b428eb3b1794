import { resolve } from 'node:path';
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { Clock, LeaseStore, Logger } from '@kcl/core';
import { ConfigurationError, LeaseStoreError, noopLogger, OptionProblems, systemClock } from '@kcl/core';
import {
  checkLeaseStoreLocation,
  isLocalEndpoint,
  type LeaseStoreLocation,
  parseLeaseStoreUrl,
} from './lease-store-location.js';

export interface OpenLeaseStoreOptions {
  /** The application whose leases the store reads and writes. */
  readonly applicationName: string;
  /** Relative SQLite paths resolve here (default: the process's working directory). */
  readonly workingDirectory?: string;
  /** Where the store reports what it skipped (an unreadable lease row, say). */
  readonly logger?: Logger;
  readonly clock?: Clock;
  /** Told about errors of idle pooled connections (PostgreSQL drops them; the store reconnects). */
  readonly onPoolError?: (error: unknown) => void;
  /**
   * For a DynamoDB emulator on this machine (an `endpoint` on localhost or a loopback address): the
   * variables that say whether AWS credentials are configured (pass `process.env`). Without any, the
   * client gets placeholder credentials, which emulators accept. Any other endpoint (a VPC endpoint,
   * say) always uses the AWS SDK's credential chain. Default `{}`.
   */
  readonly environment?: Readonly<Record<string, string | undefined>>;
  /**
   * How long connecting to the server may take before the call fails: PostgreSQL and MySQL default to
   * 10,000 ms, DynamoDB to the AWS SDK's own wait. SQLite opens a file and ignores it.
   */
  readonly connectionTimeoutMs?: number;
  /**
   * DynamoDB: how long one request may take before it fails and the AWS SDK retries it (default: no
   * limit). A tool that must not hang on an endpoint that stopped answering sets it.
   */
  readonly requestTimeoutMs?: number;
  /** DynamoDB: how often `admin.ensureSchema()` looks whether a table it created is ACTIVE yet. */
  readonly schemaPollIntervalMs?: number;
}

const COMPONENT = '@kcl/stores openLeaseStore';

const OPTION_KEYS = [
  'applicationName',
  'workingDirectory',
  'logger',
  'clock',
  'onPoolError',
  'environment',
  'connectionTimeoutMs',
  'requestTimeoutMs',
  'schemaPollIntervalMs',
];

/** Checks the options, all problems at once; the store packages check the rest of theirs again. */
function checkOptions(options: OpenLeaseStoreOptions): void {
  const check = new OptionProblems(COMPONENT);
  const given = (options ?? {}) as Partial<OpenLeaseStoreOptions>;
  check.unknownKeys('', given, OPTION_KEYS);
  check.string(
    'applicationName',
    given.applicationName,
    undefined,
    'the application whose leases the store holds',
  );
  if (given.workingDirectory !== undefined) check.string('workingDirectory', given.workingDirectory);
  check.logger('logger', given.logger, noopLogger);
  check.clock('clock', given.clock, systemClock);
  check.optionalFunction('onPoolError', given.onPoolError, '(error) => void');
  if (
    given.environment !== undefined &&
    (given.environment === null || typeof given.environment !== 'object')
  ) {
    check.add('environment must be an object of variables, e.g. process.env');
  }
  check.optionalInteger('connectionTimeoutMs', given.connectionTimeoutMs, { min: 1 });
  check.optionalInteger('requestTimeoutMs', given.requestTimeoutMs, { min: 1 });
  check.optionalInteger('schemaPollIntervalMs', given.schemaPollIntervalMs, { min: 1 });
  check.throwIfAny();
}

/** How long PostgreSQL and MySQL may take to connect, unless `connectionTimeoutMs` says otherwise. */
const SQL_CONNECTION_TIMEOUT_MS = 10_000;

const AWS_CREDENTIAL_VARIABLES = [
  'AWS_ACCESS_KEY_ID',
  'AWS_PROFILE',
  'AWS_WEB_IDENTITY_TOKEN_FILE',
  'AWS_CONTAINER_CREDENTIALS_FULL_URI',
  'AWS_CONTAINER_CREDENTIALS_RELATIVE_URI',
];

/**
 * Opens a lease store from a URL (`postgres://…`, `mysql://…`, `sqlite:leases.db`, `dynamo://table?…`)
 * or plain options, with the right driver loaded only when used. The store's `close()` closes the
 * connection it opened; its `description` names where it is, without secrets.
 *
 * ```ts
 * const store = await openLeaseStore('postgres://kcl@db.internal/kcl', { applicationName: 'billing' });
 * await store.admin.ensureSchema();
 * // … createConsumer({ leaseStore: store, … }) …
 * await store.close();
 * ```
 */
export async function openLeaseStore(
  location: string | LeaseStoreLocation,
  options: OpenLeaseStoreOptions,
): Promise<LeaseStore> {
  checkOptions(options);
  const where =
    typeof location === 'string'
      ? parseLeaseStoreUrl(location, options.workingDirectory ?? '.')
      : checkLeaseStoreLocation(location);
  const logger = options.logger === undefined ? {} : { logger: options.logger };
  const connectionTimeoutMs = options.connectionTimeoutMs ?? SQL_CONNECTION_TIMEOUT_MS;
  switch (where.kind) {
    case 'postgres': {
      const [{ default: pg }, { Kysely, PostgresDialect }, { createSqlLeaseStore }] = await Promise.all([
        importDriver(() => import('pg'), 'pg'),
        importDriver(() => import('kysely'), 'kysely'),
        import('@kcl/store-sql'),
      ]);
      const pool = new pg.Pool({
        connectionString: where.url,
        max: where.poolSize ?? 5,
        connectionTimeoutMillis: connectionTimeoutMs,
      });
      pool.on('error', (error) => options.onPoolError?.(error));
      // pg raises an error on a client the server disconnects while it is out of the pool (a database
      // restart, a worker session ended from outside); unheard, it would end the process. The call
      // that was running fails on its own, and a session's check() reports it lost.
      pool.on('connect', (client) => client.on('error', () => undefined));
      return createSqlLeaseStore({
        db: new Kysely({ dialect: new PostgresDialect({ pool }) }),
        applicationName: options.applicationName,
        ...(where.tableName === undefined ? {} : { tableName: where.tableName }),
        ...logger,
        destroyDbOnClose: true,
        sessionLiveness: true,
      });
    }
    case 'mysql': {
      const [{ createPool }, { Kysely, MysqlDialect }, { createSqlLeaseStore }] = await Promise.all([
        importDriver(() => import('mysql2'), 'mysql2'),
        importDriver(() => import('kysely'), 'kysely'),
        import('@kcl/store-sql'),
      ]);
      return createSqlLeaseStore({
        db: new Kysely({
          dialect: new MysqlDialect({
            pool: createPool({
              uri: where.url,
              connectionLimit: where.poolSize ?? 5,
              connectTimeout: connectionTimeoutMs,
            }),
          }),
        }),
        applicationName: options.applicationName,
        ...(where.tableName === undefined ? {} : { tableName: where.tableName }),
        ...logger,
        destroyDbOnClose: true,
        sessionLiveness: true,
      });
    }
    case 'sqlite': {
      const [
        { default: Database },
        { Kysely, SqliteDialect },
        { configureSqliteLeaseDatabase, createSqlLeaseStore },
      ] = await Promise.all([
        importDriver(() => import('better-sqlite3'), 'better-sqlite3'),
        importDriver(() => import('kysely'), 'kysely'),
        import('@kcl/store-sql'),
      ]);
      // Relative to workingDirectory, in the options form as in a URL (where parsing resolved it).
      const file = resolve(options.workingDirectory ?? '.', where.file);
      let database: InstanceType<typeof Database>;
      try {
        database = new Database(file, { timeout: 5_000, fileMustExist: where.mustExist === true });
      } catch (error) {
        throw new LeaseStoreError(
          '@kcl/stores',
          `@kcl/stores: the SQLite file ${file} cannot be opened: ${error instanceof Error ? error.message : String(error)}`,
          { cause: error },
        );
      }
      return createSqlLeaseStore({
        db: new Kysely({ dialect: new SqliteDialect({ database: configureSqliteLeaseDatabase(database) }) }),
        applicationName: options.applicationName,
        ...(where.tableName === undefined ? {} : { tableName: where.tableName }),
        ...logger,
        destroyDbOnClose: true,
      });
    }
    case 'dynamo':
      return openDynamoLeaseStore(where, options);
  }
}

/** The Java KCL's table (or the shared layout) on DynamoDB, on the caller's client or one built here. */
async function openDynamoLeaseStore(
  where: Extract<LeaseStoreLocation, { kind: 'dynamo' }>,
  options: OpenLeaseStoreOptions,
): Promise<LeaseStore> {
  const { createDynamoLeaseStore } = await import('@kcl/store-dynamo');
  const client = where.client ?? (await buildDynamoClient(where, options));
  return createDynamoLeaseStore({
    client,
    applicationName: options.applicationName,
    ...(where.tableName === undefined ? {} : { tableName: where.tableName }),
    ...(where.layout === undefined ? {} : { layout: where.layout }),
    ...(where.workerTableName === undefined ? {} : { workerTableName: where.workerTableName }),
    ...(options.clock === undefined ? {} : { clock: options.clock }),
    ...(options.logger === undefined ? {} : { logger: options.logger }),
    ...(options.schemaPollIntervalMs === undefined
      ? {}
      : { schemaPollIntervalMs: options.schemaPollIntervalMs }),
    destroyClientOnClose: where.client === undefined || where.destroyClientOnClose === true,
  });
}

async function buildDynamoClient(
  where: Extract<LeaseStoreLocation, { kind: 'dynamo' }>,
  options: OpenLeaseStoreOptions,
): Promise<DynamoDBClient> {
  const { DynamoDBClient } = await importDriver(
    () => import('@aws-sdk/client-dynamodb'),
    '@aws-sdk/client-dynamodb',
  );
  const environment = options.environment ?? {};
  const hasCredentials = AWS_CREDENTIAL_VARIABLES.some((name) => (environment[name] ?? '') !== '');
  const placeholder = where.endpoint !== undefined && isLocalEndpoint(where.endpoint) && !hasCredentials;
  return new DynamoDBClient({
    ...(where.region === undefined
      ? where.endpoint === undefined
        ? {}
        : { region: 'us-east-1' }
      : { region: where.region }),
    ...(where.endpoint === undefined ? {} : { endpoint: where.endpoint }),
    ...(placeholder
      ? { credentials: { accessKeyId: 'AKIAKCLLOCALSTORE000', secretAccessKey: 'kcl-local-store' } }
      : {}),
    ...dynamoRequestHandler(options),
  });
}

/**
 * The AWS SDK's HTTP handler settings for the timeouts given, if any (the SDK's defaults otherwise). A
 * request past its timeout fails (and the SDK retries it): by default the SDK would only log a warning.
 */
function dynamoRequestHandler(options: OpenLeaseStoreOptions): {
  requestHandler?: { requestTimeout?: number; throwOnRequestTimeout?: boolean; connectionTimeout?: number };
} {
  const { requestTimeoutMs, connectionTimeoutMs } = options;
  if (requestTimeoutMs === undefined && connectionTimeoutMs === undefined) return {};
  return {
    requestHandler: {
      ...(requestTimeoutMs === undefined
        ? {}
        : { requestTimeout: requestTimeoutMs, throwOnRequestTimeout: true }),
      ...(connectionTimeoutMs === undefined ? {} : { connectionTimeout: connectionTimeoutMs }),
    },
  };
}

/** Loads a driver, or says which package to install. */
async function importDriver<T>(load: () => Promise<T>, name: string): Promise<T> {
  try {
    return await load();
  } catch (error) {
    throw new ConfigurationError(COMPONENT, [
      `this store needs the ${name} package: npm install ${name} (${error instanceof Error ? error.message : String(error)})`,
    ]);
  }
}
