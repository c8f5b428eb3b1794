import { closestName } from '@kcl/core';
import type { Command } from 'commander';
import { InvalidArgumentError, Option } from 'commander';
import type { StoreConnection, StoreKind } from './store-connection.js';
import { connectionProblems, STORE_KINDS, storeKindOf } from './store-connection.js';

/** Connection flags: each also exists as `--from-<flag>` and `--to-<flag>` (hidden in the help). */
const CONNECTION_FLAGS = [
  [
    'dynamo-table',
    '<name>',
    'DynamoDB lease table (default: the application name, as the Java KCL)',
    'KCL_DYNAMO_TABLE',
  ],
  ['dynamo-layout', '<layout>', 'DynamoDB table layout: java (default) or shared', 'KCL_DYNAMO_LAYOUT'],
  ['dynamo-endpoint', '<url>', 'DynamoDB endpoint, e.g. a local emulator', 'KCL_DYNAMO_ENDPOINT'],
  ['region', '<region>', 'AWS region of the DynamoDB table', 'AWS_REGION'],
  ['postgres-url', '<url>', 'PostgreSQL connection URL', 'KCL_POSTGRES_URL'],
  ['mysql-url', '<url>', 'MySQL or MariaDB connection URL', 'KCL_MYSQL_URL'],
  ['sqlite-file', '<path>', 'SQLite database file', 'KCL_SQLITE_FILE'],
  ['sql-table', '<name>', 'SQL lease table (default kcl_leases)', 'KCL_SQL_TABLE'],
] as const;

type ConnectionKey = keyof StoreConnection;

const CONNECTION_KEYS: Readonly<Record<(typeof CONNECTION_FLAGS)[number][0], ConnectionKey>> = {
  'dynamo-table': 'dynamoTable',
  'dynamo-layout': 'dynamoLayout',
  'dynamo-endpoint': 'dynamoEndpoint',
  region: 'region',
  'postgres-url': 'postgresUrl',
  'mysql-url': 'mysqlUrl',
  'sqlite-file': 'sqliteFile',
  'sql-table': 'sqlTable',
};

export const ENVIRONMENT_HELP = `Environment (used when the flag is not given):
  KCL_MIGRATE_FROM, KCL_MIGRATE_TO, KCL_APPLICATION_NAME, KCL_STREAM_NAME
${CONNECTION_FLAGS.map(([flag, , , env]) => `  ${env.padEnd(22)} --${flag}`).join('\n')}
  AWS_DEFAULT_REGION     --region, after AWS_REGION
  AWS_ENDPOINT_URL_DYNAMODB, AWS_ENDPOINT_URL   --dynamo-endpoint, after KCL_DYNAMO_ENDPOINT
  AWS credentials are read as the AWS SDK reads them; against a --dynamo-endpoint with no
  credentials configured, placeholder credentials are used (local emulators accept any).

Per-side settings: every connection flag also exists as --from-<flag> and --to-<flag>, for
migrations between two stores of one kind, e.g. --from-sql-table kcl_leases --to-sql-table kcl_v2.`;

/** The raw options commander collects (connection flags under their camel-cased names). */
export type RawOptions = Record<string, unknown>;

export function integerOption(minimum: number) {
  return (value: string): number => {
    const parsed = Number(value);
    if (!Number.isSafeInteger(parsed) || parsed < minimum) {
      throw new InvalidArgumentError(`must be an integer ≥ ${minimum}`);
    }
    return parsed;
  };
}

/** Adds the store-selection and connection flags to a command. */
export function addStoreOptions(command: Command): Command {
  command
    .option('--from <store>', `source store: ${STORE_KINDS.join(' | ')}`)
    .option('--to <store>', `target store: ${STORE_KINDS.join(' | ')}`)
    .option('--app <name>', 'the application (consumer group) whose leases move')
    .option('--stream <name>', 'only the leases of this stream (multi-stream applications)');
  for (const [flag, argument, description] of CONNECTION_FLAGS) {
    command.option(`--${flag} ${argument}`, description);
    command.addOption(new Option(`--from-${flag} ${argument}`).hideHelp());
    command.addOption(new Option(`--to-${flag} ${argument}`).hideHelp());
  }
  return command
    .option('--concurrency <n>', 'leases written at once', integerOption(1), 16)
    .option('--json', 'print one JSON document on stdout (progress still goes to stderr)')
    .option('--no-progress', 'no progress bar or progress lines');
}

function camel(flag: string): string {
  return flag.replace(/-([a-z])/g, (_, letter: string) => letter.toUpperCase());
}

/** The settings of one side: `--from-x`/`--to-x`, then `--x`, then the environment. */
export function connectionOf(
  side: 'from' | 'to',
  raw: RawOptions,
  env: Readonly<Record<string, string | undefined>>,
): StoreConnection {
  const connection: Record<string, string | undefined> = {};
  for (const [flag, , , variable] of CONNECTION_FLAGS) {
    const sided = raw[camel(`${side}-${flag}`)];
    const shared = raw[camel(flag)];
    const value = typeof sided === 'string' ? sided : typeof shared === 'string' ? shared : env[variable];
    connection[CONNECTION_KEYS[flag]] = value === '' ? undefined : value;
  }
  return connection as StoreConnection;
}

export interface ResolvedSelection {
  readonly applicationName: string | undefined;
  readonly from: StoreKind | undefined;
  readonly to: StoreKind | undefined;
  readonly stream: string | undefined;
  readonly problems: string[];
}

/** Reads --app, --from, --to, --stream (with their environment fallbacks); lists every problem. */
export function resolveSelection(
  raw: RawOptions,
  env: Readonly<Record<string, string | undefined>>,
  needs: { readonly from: boolean; readonly to: boolean },
): ResolvedSelection {
  const problems: string[] = [];
  const text = (value: unknown, variable: string): string | undefined => {
    const found = typeof value === 'string' ? value : env[variable];
    return found === undefined || found === '' ? undefined : found;
  };
  const applicationName = text(raw.app, 'KCL_APPLICATION_NAME');
  if (applicationName === undefined) problems.push('--app is required: the application whose leases move');
  const kind = (value: string | undefined, flag: string, needed: boolean): StoreKind | undefined => {
    if (value === undefined) {
      if (needed) problems.push(`--${flag} is required: one of ${STORE_KINDS.join(', ')}`);
      return undefined;
    }
    const resolved = storeKindOf(value);
    if (resolved === null) {
      const suggestion = closestName(value, STORE_KINDS);
      problems.push(
        `--${flag} ${JSON.stringify(value)} is not a store: ${suggestion === null ? '' : `did you mean ${suggestion}? `}use one of ${STORE_KINDS.join(', ')}`,
      );
    }
    return resolved ?? undefined;
  };
  const from = kind(text(raw.from, 'KCL_MIGRATE_FROM'), 'from', needs.from);
  const to = kind(text(raw.to, 'KCL_MIGRATE_TO'), 'to', needs.to);
  return { applicationName, from, to, stream: text(raw.stream, 'KCL_STREAM_NAME'), problems };
}

/** Problems with the connection settings of the sides in use, and a migration from a store to itself. */
export function sideProblems(
  raw: RawOptions,
  env: Readonly<Record<string, string | undefined>>,
  selection: ResolvedSelection,
): string[] {
  const problems: string[] = [];
  const from = selection.from === undefined ? undefined : connectionOf('from', raw, env);
  const to = selection.to === undefined ? undefined : connectionOf('to', raw, env);
  if (selection.from !== undefined && from !== undefined) {
    problems.push(...connectionProblems('from', selection.from, from, env));
  }
  if (selection.to !== undefined && to !== undefined)
    problems.push(...connectionProblems('to', selection.to, to, env));
  if (
    selection.from !== undefined &&
    selection.from === selection.to &&
    JSON.stringify(from) === JSON.stringify(to)
  ) {
    problems.push(
      'the source and the target are the same store: give one side another table, file or URL with --from-<flag> / --to-<flag>',
    );
  }
  return problems;
}
