import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import type { LeaseStore } from '@kcl/core';
import type { DynamoLeaseTableLayout } from '@kcl/store-dynamo';
import type { AnyKysely } from '@kcl/store-sql';

// The drivers are loaded only for the stores in use, so `--help` and a SQLite-only run stay quick.
export type StoreKind = 'dynamo' | 'postgres' | 'mysql' | 'sqlite';

export const STORE_KINDS: readonly StoreKind[] = ['dynamo', 'postgres', 'mysql', 'sqlite'];

const ALIASES: Readonly<Record<string, StoreKind>> = {
  dynamo: 'dynamo',
  dynamodb: 'dynamo',
  postgres: 'postgres',
  postgresql: 'postgres',
  pg: 'postgres',
  mysql: 'mysql',
  mariadb: 'mysql',
  sqlite: 'sqlite',
  sqlite3: 'sqlite',
};

export function storeKindOf(value: string): StoreKind | null {
  return ALIASES[value.toLowerCase()] ?? null;
}

/** The connection settings of one side, after flags, per-side flags and environment variables. */
export interface StoreConnection {
  readonly dynamoTable?: string | undefined;
  readonly dynamoLayout?: string | undefined;
  readonly dynamoEndpoint?: string | undefined;
  readonly region?: string | undefined;
  readonly postgresUrl?: string | undefined;
  readonly mysqlUrl?: string | undefined;
  readonly sqliteFile?: string | undefined;
  readonly sqlTable?: string | undefined;
}

export interface OpenedStore {
  readonly kind: StoreKind;
  readonly store: LeaseStore;
  /** Where the store is, without secrets: an endpoint and region, a URL without password, a file. */
  readonly location: string;
  /** The name a marker gives this store: its description and location. */
  readonly name: string;
  close(): Promise<void>;
}

/** Problems with a side's settings, all of them, before anything is opened. */
export function connectionProblems(
  side: 'from' | 'to',
  kind: StoreKind,
  connection: StoreConnection,
  env: Readonly<Record<string, string | undefined>>,
): string[] {
  const flag = (name: string) => `--${name} (or --${side}-${name})`;
  switch (kind) {
    case 'dynamo': {
      const problems: string[] = [];
      if (connection.dynamoLayout !== undefined && !['java', 'shared'].includes(connection.dynamoLayout)) {
        problems.push(
          `${flag('dynamo-layout')} must be java or shared, got ${JSON.stringify(connection.dynamoLayout)}`,
        );
      }
      if (regionOf(connection, env) === undefined) {
        problems.push(`--${side} dynamo needs a region: pass ${flag('region')} or set AWS_REGION`);
      }
      return problems;
    }
    case 'postgres':
      return connection.postgresUrl === undefined
        ? [`--${side} postgres needs ${flag('postgres-url')} or KCL_POSTGRES_URL`]
        : [];
    case 'mysql':
      return connection.mysqlUrl === undefined
        ? [`--${side} mysql needs ${flag('mysql-url')} or KCL_MYSQL_URL`]
        : [];
    case 'sqlite':
      if (connection.sqliteFile === undefined)
        return [`--${side} sqlite needs ${flag('sqlite-file')} or KCL_SQLITE_FILE`];
      if (side === 'from' && !existsSync(connection.sqliteFile)) {
        return [`the source SQLite file ${connection.sqliteFile} does not exist`];
      }
      return [];
  }
}

function regionOf(
  connection: StoreConnection,
  env: Readonly<Record<string, string | undefined>>,
): string | undefined {
  const region = connection.region ?? env.AWS_REGION ?? env.AWS_DEFAULT_REGION;
  if (region !== undefined && region !== '') return region;
  return endpointOf(connection, env) === undefined ? undefined : 'us-east-1';
}

function endpointOf(
  connection: StoreConnection,
  env: Readonly<Record<string, string | undefined>>,
): string | undefined {
  return connection.dynamoEndpoint ?? env.AWS_ENDPOINT_URL_DYNAMODB ?? env.AWS_ENDPOINT_URL;
}

/** Credentials for a local endpoint when none are configured (emulators only check that requests are signed). */
function hasAwsCredentials(env: Readonly<Record<string, string | undefined>>): boolean {
  return [
    'AWS_ACCESS_KEY_ID',
    'AWS_PROFILE',
    'AWS_WEB_IDENTITY_TOKEN_FILE',
    'AWS_CONTAINER_CREDENTIALS_FULL_URI',
    'AWS_CONTAINER_CREDENTIALS_RELATIVE_URI',
  ].some((name) => env[name] !== undefined && env[name] !== '');
}

/** A URL with its password replaced, for output and markers. */
export function redactUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password !== '') parsed.password = '***';
    return parsed.toString();
  } catch {
    return '(unparsable URL)';
  }
}

/** Builds the concrete store of one side. The CLI is the only place that knows the concrete stores. */
export async function openStore(
  side: 'from' | 'to',
  kind: StoreKind,
  connection: StoreConnection,
  applicationName: string,
  env: Readonly<Record<string, string | undefined>>,
  poolSize: number,
): Promise<OpenedStore> {
  switch (kind) {
    case 'dynamo': {
      const [{ DynamoDBClient }, { createDynamoLeaseStore }] = await Promise.all([
        import('@aws-sdk/client-dynamodb'),
        import('@kcl/store-dynamo'),
      ]);
      const region = regionOf(connection, env) as string;
      const endpoint = endpointOf(connection, env);
      const client = new DynamoDBClient({
        region,
        ...(endpoint === undefined ? {} : { endpoint }),
        ...(endpoint !== undefined && !hasAwsCredentials(env)
          ? { credentials: { accessKeyId: 'AKIAKCLMIGRATELOCAL0', secretAccessKey: 'kcl-migrate-local' } }
          : {}),
        requestHandler: { requestTimeout: 15_000, connectionTimeout: 5_000 },
      });
      const store = createDynamoLeaseStore({
        client,
        applicationName,
        ...(connection.dynamoTable === undefined ? {} : { tableName: connection.dynamoTable }),
        ...(connection.dynamoLayout === undefined
          ? {}
          : { layout: connection.dynamoLayout as DynamoLeaseTableLayout }),
      });
      const location = `${endpoint ?? 'AWS'} (${region})`;
      return {
        kind,
        store,
        location,
        name: `${store.description} at ${location}`,
        close: async () => client.destroy(),
      };
    }
    case 'postgres': {
      const [{ default: pg }, { Kysely, PostgresDialect }] = await Promise.all([
        import('pg'),
        import('kysely'),
      ]);
      const url = connection.postgresUrl as string;
      const pool = new pg.Pool({ connectionString: url, max: poolSize, connectionTimeoutMillis: 10_000 });
      // An idle connection the server drops must not crash the tool.
      pool.on('error', () => undefined);
      return sqlStore(
        kind,
        new Kysely({ dialect: new PostgresDialect({ pool }) }),
        applicationName,
        connection,
        redactUrl(url),
      );
    }
    case 'mysql': {
      const [{ createPool }, { Kysely, MysqlDialect }] = await Promise.all([
        import('mysql2'),
        import('kysely'),
      ]);
      const url = connection.mysqlUrl as string;
      const pool = createPool({ uri: url, connectionLimit: poolSize, connectTimeout: 10_000 });
      return sqlStore(
        kind,
        new Kysely({ dialect: new MysqlDialect({ pool }) }),
        applicationName,
        connection,
        redactUrl(url),
      );
    }
    case 'sqlite': {
      const [{ default: Database }, { Kysely, SqliteDialect }, { configureSqliteLeaseDatabase }] =
        await Promise.all([import('better-sqlite3'), import('kysely'), import('@kcl/store-sql')]);
      const file = resolve(connection.sqliteFile as string);
      const database = configureSqliteLeaseDatabase(
        new Database(file, { timeout: 5_000, fileMustExist: side === 'from' }),
      );
      return sqlStore(
        kind,
        new Kysely({ dialect: new SqliteDialect({ database }) }),
        applicationName,
        connection,
        file,
      );
    }
  }
}

async function sqlStore(
  kind: StoreKind,
  db: AnyKysely,
  applicationName: string,
  connection: StoreConnection,
  location: string,
): Promise<OpenedStore> {
  const { createSqlLeaseStore } = await import('@kcl/store-sql');
  const store = createSqlLeaseStore({
    db,
    applicationName,
    ...(connection.sqlTable === undefined ? {} : { tableName: connection.sqlTable }),
  });
  return { kind, store, location, name: `${store.description} at ${location}`, close: () => db.destroy() };
}
