import { ConfigurationError, isKclError } from '@kcl/core';
import type { LeaseStoreLocation } from '@kcl/stores';
import { LEASE_STORE_URL_FORMS, parseLeaseStoreUrl } from '@kcl/stores';
import type { Command } from 'commander';
import { Option } from 'commander';

/** The raw options commander collects. */
export type RawOptions = Record<string, unknown>;

export const ENVIRONMENT_HELP = `Store (one of):
  --store <url>            ${LEASE_STORE_URL_FORMS.join('\n                           ')}
  --sqlite-file, --postgres-url, --mysql-url, or --dynamo-table with --region / --dynamo-endpoint

Environment (used when the flag is not given):
  KCL_STORE_URL          --store
  KCL_APPLICATION_NAME   --app
  AWS_REGION, AWS_ENDPOINT_URL_DYNAMODB   --region, --dynamo-endpoint
  AWS credentials are read as the AWS SDK reads them; against a local --dynamo-endpoint with no
  credentials configured, placeholder credentials are used (local emulators accept any).`;

/** Adds the application and store flags every command takes. */
export function addStoreOptions(command: Command): Command {
  return command
    .option('--app <name>', 'the application (consumer group) whose leases to read')
    .option('--store <url>', 'the lease store, as a URL (see below)')
    .addOption(new Option('--sqlite-file <path>', 'SQLite lease database file'))
    .addOption(new Option('--postgres-url <url>', 'PostgreSQL connection URL'))
    .addOption(new Option('--mysql-url <url>', 'MySQL or MariaDB connection URL'))
    .addOption(new Option('--sql-table <name>', 'SQL lease table (default kcl_leases)'))
    .addOption(new Option('--dynamo-table <name>', 'DynamoDB lease table (default: the application name)'))
    .addOption(new Option('--region <region>', 'AWS region of the DynamoDB table'))
    .addOption(new Option('--dynamo-endpoint <url>', 'DynamoDB endpoint, e.g. a local emulator'))
    .option('--json', 'print JSON on stdout (messages and progress go to stderr)')
    .option('--no-progress', 'no progress lines');
}

export interface StoreSelection {
  readonly applicationName: string;
  readonly location: LeaseStoreLocation;
}

/** Reads --app and the store flags (with their environment fallbacks); throws every problem at once. */
export function storeSelection(
  raw: RawOptions,
  env: Readonly<Record<string, string | undefined>>,
  workingDirectory: string,
): StoreSelection {
  const problems: string[] = [];
  const text = (value: unknown, variable?: string): string | undefined => {
    const found = typeof value === 'string' ? value : variable === undefined ? undefined : env[variable];
    return found === undefined || found === '' ? undefined : found;
  };
  const applicationName = text(raw.app, 'KCL_APPLICATION_NAME');
  if (applicationName === undefined) problems.push('--app is required: the application whose leases to read');
  const sqlTable = text(raw.sqlTable);
  const table = sqlTable === undefined ? {} : { tableName: sqlTable };
  const candidates: LeaseStoreLocation[] = [];
  const url = text(raw.store, 'KCL_STORE_URL');
  const sqliteFile = text(raw.sqliteFile);
  const postgresUrl = text(raw.postgresUrl);
  const mysqlUrl = text(raw.mysqlUrl);
  const dynamoTable = text(raw.dynamoTable);
  const endpoint = text(raw.dynamoEndpoint, 'AWS_ENDPOINT_URL_DYNAMODB');
  const region = text(raw.region, 'AWS_REGION');
  if (sqliteFile !== undefined)
    candidates.push({ kind: 'sqlite', file: sqliteFile, mustExist: true, ...table });
  if (postgresUrl !== undefined)
    candidates.push({ kind: 'postgres', url: postgresUrl, poolSize: 2, ...table });
  if (mysqlUrl !== undefined) candidates.push({ kind: 'mysql', url: mysqlUrl, poolSize: 2, ...table });
  if (dynamoTable !== undefined || (typeof raw.dynamoEndpoint === 'string' && raw.dynamoEndpoint !== '')) {
    candidates.push({
      kind: 'dynamo',
      ...(dynamoTable === undefined ? {} : { tableName: dynamoTable }),
      ...(region === undefined ? {} : { region }),
      ...(endpoint === undefined ? {} : { endpoint }),
    });
  }
  const flagUrl = text(raw.store);
  if (flagUrl !== undefined && candidates.length > 0) {
    problems.push(
      'give the store once: --store or one of --sqlite-file, --postgres-url, --mysql-url, --dynamo-table',
    );
  }
  if (candidates.length > 1) {
    problems.push(
      'give one store: --sqlite-file, --postgres-url, --mysql-url and --dynamo-table exclude each other',
    );
  }
  let location: LeaseStoreLocation | undefined = candidates[0];
  if (location === undefined) {
    if (url === undefined) {
      problems.push(`--store is required (or KCL_STORE_URL): ${LEASE_STORE_URL_FORMS.join('; ')}`);
    } else {
      try {
        location = parseLeaseStoreUrl(url, workingDirectory);
        if (location.kind === 'sqlite') location = { ...location, mustExist: true };
        if (location.kind === 'dynamo' && location.region === undefined && region !== undefined) {
          location = { ...location, region };
        }
      } catch (error) {
        if (ConfigurationError.is(error)) problems.push(...error.problems);
        else if (isKclError(error)) problems.push(error.message);
        else throw error;
      }
    }
  }
  if (problems.length > 0 || location === undefined || applicationName === undefined) {
    throw new ConfigurationError('kcl', problems);
  }
  return { applicationName, location };
}
