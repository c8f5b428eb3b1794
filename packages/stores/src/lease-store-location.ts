import { isAbsolute, resolve } from 'node:path';
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { ConfigurationError, OptionProblems } from '@kcl/core';

const COMPONENT = '@kcl/stores openLeaseStore';

/** Where a lease store is: the plain-options form of a store URL. */
export type LeaseStoreLocation =
  | {
      readonly kind: 'postgres';
      /** `postgres://user:password@host:5432/database` (the connection string `pg` takes). */
      readonly url: string;
      readonly tableName?: string;
      /** Connections in the pool (default 5). */
      readonly poolSize?: number;
    }
  | {
      readonly kind: 'mysql';
      /** `mysql://user:password@host:3306/database` (MariaDB too). */
      readonly url: string;
      readonly tableName?: string;
      readonly poolSize?: number;
    }
  | {
      readonly kind: 'sqlite';
      /** The database file (relative paths resolve against `workingDirectory`). Never `:memory:`: leases must outlive the process. */
      readonly file: string;
      readonly tableName?: string;
      /** Refuse to create the file (for reading an existing store). Default false. */
      readonly mustExist?: boolean;
    }
  | {
      readonly kind: 'dynamo';
      /** The lease table (default: the application name, as the Java KCL). */
      readonly tableName?: string;
      /** Default: the AWS SDK's (`AWS_REGION`, the profile); `us-east-1` for a local endpoint. */
      readonly region?: string;
      /** A local emulator or a VPC endpoint, e.g. `http://localhost:4567`. */
      readonly endpoint?: string;
      /** `java` (default: the Java KCL's table format) or `shared` (several applications in one table). */
      readonly layout?: 'java' | 'shared';
      readonly workerTableName?: string;
      /**
       * A client built by the caller (its credentials, retries and timeouts), used instead of one
       * built from `region` and `endpoint`, which are then only for messages.
       */
      readonly client?: DynamoDBClient;
      /** With `client`: the store's `close()` destroys it too. Default false (the caller's client). */
      readonly destroyClientOnClose?: boolean;
    };

export type LeaseStoreKind = LeaseStoreLocation['kind'];

const SCHEMES: Readonly<Record<string, LeaseStoreKind>> = {
  postgres: 'postgres',
  postgresql: 'postgres',
  mysql: 'mysql',
  mariadb: 'mysql',
  sqlite: 'sqlite',
  dynamo: 'dynamo',
  dynamodb: 'dynamo',
};

/** The URL forms a store can be given as, for messages. */
export const LEASE_STORE_URL_FORMS = [
  'postgres://user:password@host:5432/database[?table=kcl_leases&poolSize=5]',
  'mysql://user:password@host:3306/database (or mariadb://…)',
  'sqlite:path/to/leases.db (or sqlite:///absolute/path.db)',
  'dynamo://table-name[?region=eu-west-1&endpoint=http://localhost:4567&layout=shared] (dynamo:// alone: the table named after the application)',
] as const;

/**
 * Reads a store URL into its location. Every problem is reported at once, naming the part of the URL
 * that is wrong and the forms that are accepted.
 */
export function parseLeaseStoreUrl(url: string, workingDirectory = '.'): LeaseStoreLocation {
  const colon = typeof url === 'string' ? url.indexOf(':') : -1;
  const scheme = colon === -1 ? '' : url.slice(0, colon).toLowerCase();
  const kind = SCHEMES[scheme];
  if (kind === undefined) {
    throw new ConfigurationError(COMPONENT, [
      `${JSON.stringify(typeof url === 'string' ? redactUrl(url) : url)} is not a lease store URL; use one of:\n      ${LEASE_STORE_URL_FORMS.join('\n      ')}`,
    ]);
  }
  const check = new OptionProblems(COMPONENT);
  let location: LeaseStoreLocation;
  switch (kind) {
    case 'postgres':
    case 'mysql': {
      const parsed = checkServerUrl(
        kind,
        kind === 'mysql' && scheme === 'mariadb' ? `mysql${url.slice(scheme.length)}` : url,
        check,
        'URL',
      );
      const tableName = takeParameter(parsed, 'table');
      const poolSize = numberParameter(takeParameter(parsed, 'poolSize'), 'poolSize', check);
      location = {
        kind,
        url: parsed?.toString() ?? url,
        ...(tableName === undefined ? {} : { tableName }),
        ...(poolSize === undefined ? {} : { poolSize }),
      };
      break;
    }
    case 'sqlite': {
      const [pathPart = '', query = ''] = url.slice(colon + 1).split('?', 2);
      const path = decodeURIComponent(pathPart.startsWith('//') ? pathPart.slice(2) : pathPart);
      const parameters = new URLSearchParams(query);
      if (path === '' || path === ':memory:') {
        check.add(
          `${url} names no file (or an in-memory database): leases must outlive the process, e.g. sqlite:/var/lib/app/leases.db`,
        );
      }
      const tableName = parameters.get('table') ?? undefined;
      location = {
        kind,
        file: isAbsolute(path) ? path : resolve(workingDirectory, path),
        ...(tableName === undefined ? {} : { tableName }),
      };
      break;
    }
    case 'dynamo': {
      const parsed = parseUrl(url, check);
      const tableName =
        parsed === null ? '' : decodeURIComponent(parsed.hostname + parsed.pathname.replace(/\/$/, ''));
      const region = takeParameter(parsed, 'region');
      const endpoint = takeParameter(parsed, 'endpoint');
      const layout = takeParameter(parsed, 'layout');
      const workerTableName = takeParameter(parsed, 'workerTable');
      if (layout !== undefined && layout !== 'java' && layout !== 'shared') {
        check.add(`layout=${layout} in ${url} must be java or shared`);
      }
      if (endpoint !== undefined) checkEndpoint(endpoint, check, 'endpoint');
      if (region !== undefined) checkRegion(region, check, 'region');
      location = {
        kind,
        ...(tableName === '' ? {} : { tableName }),
        ...(region === undefined ? {} : { region }),
        ...(endpoint === undefined ? {} : { endpoint }),
        ...(layout === 'java' || layout === 'shared' ? { layout } : {}),
        ...(workerTableName === undefined ? {} : { workerTableName }),
      };
      break;
    }
  }
  check.throwIfAny();
  return location;
}

/** The options each kind of location takes, to name a misspelt one. */
const LOCATION_KEYS: Readonly<Record<LeaseStoreKind, readonly string[]>> = {
  postgres: ['kind', 'url', 'tableName', 'poolSize'],
  mysql: ['kind', 'url', 'tableName', 'poolSize'],
  sqlite: ['kind', 'file', 'tableName', 'mustExist'],
  dynamo: [
    'kind',
    'tableName',
    'region',
    'endpoint',
    'layout',
    'workerTableName',
    'client',
    'destroyClientOnClose',
  ],
};

/**
 * How a caller names a location's options in messages. A CLI passes its flags (`{ url: '--postgres-url' }`)
 * so that a problem names what its user typed; by default the options are named as in the location.
 */
export type LeaseStoreOptionNames = Partial<
  Readonly<
    Record<
      'url' | 'file' | 'tableName' | 'poolSize' | 'region' | 'endpoint' | 'layout' | 'workerTableName',
      string
    >
  >
>;

/** Checks a location given as options; lists every problem at once. */
export function checkLeaseStoreLocation(location: LeaseStoreLocation): LeaseStoreLocation {
  const check = new OptionProblems(COMPONENT);
  collectLocationProblems(location, check, {});
  check.throwIfAny();
  return location;
}

/**
 * Every problem with a store location — a URL (`postgres://…`, `sqlite:leases.db`, …) or options — found
 * without connecting to anything: an empty list means `openLeaseStore` can try it. For a CLI, to turn a
 * mistyped URL into a usage error before any connection is attempted (a URL such as `not-a-url` would
 * otherwise surface as a DNS failure of the host the driver made of it).
 *
 * ```ts
 * const problems = leaseStoreLocationProblems({ kind: 'postgres', url: flags.postgresUrl }, { names: { url: '--postgres-url' } });
 * // ['--postgres-url "not-a-url" is not a PostgreSQL URL: use postgres://user:password@host:5432/database']
 * ```
 */
export function leaseStoreLocationProblems(
  location: string | LeaseStoreLocation,
  options: { readonly workingDirectory?: string; readonly names?: LeaseStoreOptionNames } = {},
): readonly string[] {
  if (typeof location === 'string') {
    try {
      parseLeaseStoreUrl(location, options.workingDirectory ?? '.');
      return [];
    } catch (error) {
      if (ConfigurationError.is(error)) return error.problems;
      throw error;
    }
  }
  const check = new OptionProblems(COMPONENT);
  collectLocationProblems(location, check, options.names ?? {});
  return check.problems;
}

function collectLocationProblems(
  location: LeaseStoreLocation,
  check: OptionProblems,
  names: LeaseStoreOptionNames,
): void {
  const given = (location ?? {}) as Partial<LeaseStoreLocation> & Record<string, unknown>;
  const name = (option: keyof LeaseStoreOptionNames): string => names[option] ?? option;
  const kind = given.kind;
  if (kind === 'postgres' || kind === 'mysql' || kind === 'sqlite' || kind === 'dynamo') {
    check.unknownKeys('', given, LOCATION_KEYS[kind]);
    if (given.tableName !== undefined) check.string(name('tableName'), given.tableName);
  }
  switch (kind) {
    case 'postgres':
    case 'mysql':
      if (typeof given.url !== 'string') {
        check.add(`a ${kind} location needs url (${SERVER_URL_FORMS[kind]})`);
      } else {
        checkServerUrl(kind, given.url, check, name('url'));
      }
      check.optionalInteger(name('poolSize'), given.poolSize, { min: 1 });
      break;
    case 'sqlite':
      if (typeof given.file !== 'string' || given.file === '' || given.file === ':memory:') {
        check.add(
          `a sqlite location needs ${name('file')}: the database file (leases must outlive the process)`,
        );
      }
      check.boolean('mustExist', given.mustExist, false);
      break;
    case 'dynamo':
      check.oneOf(name('layout'), given.layout, ['java', 'shared'], 'java');
      if (given.region !== undefined) checkRegion(given.region, check, name('region'));
      if (given.workerTableName !== undefined) check.string(name('workerTableName'), given.workerTableName);
      if (given.endpoint !== undefined) checkEndpoint(String(given.endpoint), check, name('endpoint'));
      check.optionalObjectWith('client', given.client, ['send', 'destroy'], 'a DynamoDBClient');
      check.boolean('destroyClientOnClose', given.destroyClientOnClose, false);
      if (given.destroyClientOnClose !== undefined && given.client === undefined) {
        check.add(
          'destroyClientOnClose is for a client given with client; a client openLeaseStore builds is always destroyed',
        );
      }
      break;
    default:
      check.add(
        `kind must be one of postgres, mysql, sqlite, dynamo, got ${JSON.stringify(kind)} (or give a URL: ${LEASE_STORE_URL_FORMS.join('; ')})`,
      );
  }
}

const SERVER_URL_FORMS = {
  postgres: 'postgres://user:password@host:5432/database',
  mysql: 'mysql://user:password@host:3306/database',
} as const;

const SERVER_SCHEMES = {
  postgres: ['postgres:', 'postgresql:'],
  mysql: ['mysql:'],
} as const;

const SERVER_NAMES = { postgres: 'PostgreSQL', mysql: 'MySQL or MariaDB' } as const;

/** A PostgreSQL or MySQL connection URL: the driver's scheme and a host. */
function checkServerUrl(
  kind: 'postgres' | 'mysql',
  url: string,
  check: OptionProblems,
  name: string,
): URL | null {
  const parsed = tryUrl(url);
  const shown = JSON.stringify(parsed === null ? url.replace(/:[^:@/]*@/, ':***@') : redactUrl(url));
  const schemes: readonly string[] = SERVER_SCHEMES[kind];
  if (parsed === null || !schemes.includes(parsed.protocol) || parsed.hostname === '') {
    const why =
      parsed === null
        ? 'is not a URL'
        : !schemes.includes(parsed.protocol)
          ? `is not a ${SERVER_NAMES[kind]} URL (it starts with ${parsed.protocol})`
          : 'names no host';
    check.add(`${name} ${shown} ${why}: use ${SERVER_URL_FORMS[kind]}`);
    return null;
  }
  return parsed;
}

/** A DynamoDB endpoint: an http or https URL with a host. */
function checkEndpoint(endpoint: string, check: OptionProblems, name: string): void {
  const parsed = tryUrl(endpoint);
  if (
    parsed === null ||
    (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') ||
    parsed.hostname === ''
  ) {
    check.add(
      `${name} ${JSON.stringify(endpoint)} is not an http(s) URL: use e.g. http://localhost:4567 or https://dynamodb.eu-west-1.amazonaws.com`,
    );
  }
}

/** An AWS region's shape (eu-west-1, us-gov-east-1, cn-north-1, local ones such as `local`). */
function checkRegion(region: unknown, check: OptionProblems, name: string): void {
  if (typeof region !== 'string' || !/^[a-z0-9][a-z0-9-]*$/.test(region)) {
    check.add(`${name} ${JSON.stringify(region)} is not an AWS region: use e.g. eu-west-1`);
  }
}

function tryUrl(url: string): URL | null {
  try {
    return new URL(url);
  } catch {
    return null;
  }
}

/** Where a store is, without secrets: a URL without its password, a file, a table with its region. */
export function describeLeaseStoreLocation(location: LeaseStoreLocation): string {
  switch (location.kind) {
    case 'postgres':
    case 'mysql':
      return redactUrl(location.url);
    case 'sqlite':
      return `sqlite:${location.file}`;
    case 'dynamo':
      return `DynamoDB table ${location.tableName ?? '(named after the application)'} at ${location.endpoint ?? 'AWS'}${location.region === undefined ? '' : ` (${location.region})`}`;
  }
}

/** A URL with its password replaced, for logs and messages. */
export function redactUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password !== '') parsed.password = '***';
    return parsed.toString();
  } catch {
    return '(unparsable URL)';
  }
}

function parseUrl(url: string, check: OptionProblems, what = 'URL'): URL | null {
  try {
    return new URL(url);
  } catch {
    check.add(
      `${what} ${JSON.stringify(redactUrl(url) === '(unparsable URL)' ? url.replace(/:[^:@/]*@/, ':***@') : redactUrl(url))} is not a valid URL`,
    );
    return null;
  }
}

function takeParameter(url: URL | null, name: string): string | undefined {
  if (url === null) return undefined;
  const value = url.searchParams.get(name);
  url.searchParams.delete(name);
  return value ?? undefined;
}

function numberParameter(value: string | undefined, name: string, check: OptionProblems): number | undefined {
  if (value === undefined) return undefined;
  const number = Number(value);
  if (!Number.isSafeInteger(number) || number < 1) {
    check.add(`${name}=${value} must be a positive integer`);
    return undefined;
  }
  return number;
}

/** An endpoint on this machine: an emulator, never a service that checks credentials. */
export function isLocalEndpoint(endpoint: string): boolean {
  try {
    const host = new URL(endpoint).hostname.replace(/^\[|\]$/g, '');
    return host === 'localhost' || host === '::1' || host.startsWith('127.') || host === '0.0.0.0';
  } catch {
    return false;
  }
}
