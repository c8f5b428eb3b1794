import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import type { Clock, LeaseStore } from '@kcl/core';
import { LeaseStoreSchemaMissingError, systemClock } from '@kcl/core';
import type { LeaseStoreLocation } from '@kcl/stores';
import { describeLeaseStoreLocation, leaseStoreLocationProblems, openLeaseStore } from '@kcl/stores';
import { startDeadline, TIMED_OUT } from '../deadline.js';

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
  /** The store; its `close()` also closes the connection the CLI opened for it. */
  readonly store: LeaseStore;
  /** Where the store is, without secrets: an endpoint and region, a URL without password, a file. */
  readonly location: string;
  /** The name a marker gives this store: its description and location. */
  readonly name: string;
}

/**
 * Problems with a side's settings, all of them, before anything is opened: missing settings first;
 * when none is missing, the location they make is checked as @kcl/stores checks one (a URL that is no
 * URL, an endpoint without http://), each problem naming the flag it came from.
 */
export function connectionProblems(
  side: 'from' | 'to',
  kind: StoreKind,
  connection: StoreConnection,
  env: Readonly<Record<string, string | undefined>>,
): string[] {
  const missing = missingSettings(side, kind, connection, env);
  if (missing.length > 0) return missing;
  const flag = (name: string) => `--${name} (or --${side}-${name})`;
  return [
    ...leaseStoreLocationProblems(storeLocation(side, kind, connection, env, 1), {
      names: {
        url: flag(kind === 'mysql' ? 'mysql-url' : 'postgres-url'),
        file: flag('sqlite-file'),
        tableName: flag(kind === 'dynamo' ? 'dynamo-table' : 'sql-table'),
        region: flag('region'),
        endpoint: flag('dynamo-endpoint'),
        layout: flag('dynamo-layout'),
      },
    }),
  ];
}

function missingSettings(
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

/**
 * Opens the store of one side through `openLeaseStore` of @kcl/stores, the one opener every kcl tool
 * shares (it loads only the driver in use, so `--help` and a SQLite-only run stay quick). The store's
 * `close()` also closes the connection opened for it.
 */
export async function openStore(
  side: 'from' | 'to',
  kind: StoreKind,
  connection: StoreConnection,
  applicationName: string,
  env: Readonly<Record<string, string | undefined>>,
  poolSize: number,
): Promise<OpenedStore> {
  const location = storeLocation(side, kind, connection, env, poolSize);
  const store = await openLeaseStore(location, {
    applicationName,
    // Whether a local DynamoDB endpoint gets placeholder credentials depends on these variables.
    environment: env,
    // An idle connection the server drops must not crash the tool.
    onPoolError: () => undefined,
    // A call to an endpoint that stopped answering fails (and is retried) instead of stalling the run.
    ...(kind === 'dynamo' ? { requestTimeoutMs: 15_000, connectionTimeoutMs: 5_000 } : {}),
  });
  const where = locationText(location);
  return { kind, store, location: where, name: `${store.description} at ${where}` };
}

/** The location of one side, from its flags and the environment (checked by `connectionProblems`). */
function storeLocation(
  side: 'from' | 'to',
  kind: StoreKind,
  connection: StoreConnection,
  env: Readonly<Record<string, string | undefined>>,
  poolSize: number,
): LeaseStoreLocation {
  const sqlTable = connection.sqlTable === undefined ? {} : { tableName: connection.sqlTable };
  switch (kind) {
    case 'dynamo': {
      const endpoint = endpointOf(connection, env);
      return {
        kind,
        region: regionOf(connection, env) as string,
        ...(endpoint === undefined ? {} : { endpoint }),
        ...(connection.dynamoTable === undefined ? {} : { tableName: connection.dynamoTable }),
        ...(connection.dynamoLayout === 'java' || connection.dynamoLayout === 'shared'
          ? { layout: connection.dynamoLayout }
          : {}),
      };
    }
    case 'postgres':
      return { kind, url: connection.postgresUrl as string, poolSize, ...sqlTable };
    case 'mysql':
      return { kind, url: connection.mysqlUrl as string, poolSize, ...sqlTable };
    case 'sqlite':
      // The source must exist: a store created by reading it would be an empty, wrong source.
      return {
        kind,
        file: resolve(connection.sqliteFile as string),
        mustExist: side === 'from',
        ...sqlTable,
      };
  }
}

/**
 * Where a side's store is, without secrets, as kcl-migrate has always shown it (a marker names the
 * target by its description and this): an endpoint and region, a URL without its password, a file.
 */
function locationText(location: LeaseStoreLocation): string {
  switch (location.kind) {
    case 'dynamo':
      return `${location.endpoint ?? 'AWS'} (${location.region})`;
    case 'sqlite':
      return location.file;
    case 'postgres':
    case 'mysql':
      return describeLeaseStoreLocation(location);
  }
}

/** How long the first call to each store may take before kcl-migrate gives up on it. */
export const REACHABILITY_TIMEOUT_MS = 10_000;

/** What to check when a store of `kind` on `side` cannot be reached. */
function reachAdvice(kind: StoreKind, side: 'from' | 'to'): string {
  switch (kind) {
    case 'dynamo':
      return `check --dynamo-endpoint and --region (or their --${side}- forms) and the AWS credentials`;
    case 'postgres':
      return `check --postgres-url (or --${side}-postgres-url) and that the server is up`;
    case 'mysql':
      return `check --mysql-url (or --${side}-mysql-url) and that the server is up`;
    case 'sqlite':
      return `check --sqlite-file (or --${side}-sqlite-file)`;
  }
}

/**
 * Asks each store one small question (its migration marker) before anything long starts, so that a
 * store that cannot be reached ends the run at once with a message naming it, instead of after the
 * watch for a running fleet. A store that answers that its tables are missing was reached (a new
 * target has none yet). Resolves to one problem per store that did not answer, empty when both did.
 */
export async function unreachableStores(
  stores: ReadonlyArray<{ readonly side: 'from' | 'to'; readonly opened: OpenedStore }>,
  timeoutMs: number = REACHABILITY_TIMEOUT_MS,
  clock: Clock = systemClock,
): Promise<string[]> {
  const deadline = startDeadline(clock, timeoutMs);
  try {
    const answers = await Promise.all(
      stores.map(async ({ side, opened }) => {
        const role = side === 'from' ? 'the source' : 'the target';
        const advice = reachAdvice(opened.kind, side);
        try {
          const answer = await deadline.race(opened.store.admin.getMigrationMarker());
          if (answer === TIMED_OUT) {
            return `cannot reach ${role} store ${opened.name}: no answer within ${timeoutMs / 1_000} s; ${advice}`;
          }
          return null;
        } catch (error) {
          if (LeaseStoreSchemaMissingError.is(error)) return null;
          const reason = error instanceof Error ? error.message : String(error);
          return `cannot reach ${role} store ${opened.name}: ${reason}; ${advice}`;
        }
      }),
    );
    return answers.filter((answer): answer is string => answer !== null);
  } finally {
    deadline.cancel();
  }
}
