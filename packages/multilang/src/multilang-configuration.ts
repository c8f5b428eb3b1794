import type { InitialPosition, MetricsLevel } from '@kcl/consumer';
import type { LogLevel } from '@kcl/core';
import { ConfigurationError } from '@kcl/core';
import type { CredentialsSource } from './credentials-provider.js';
import { DEFAULT_CREDENTIALS, resolveCredentialsProvider } from './credentials-provider.js';
import type { ExecutableCommand } from './executable-command.js';
import { resolveExecutableCommand, splitExecutableName } from './executable-command.js';
import type { ParsedProperties } from './properties-parser.js';
import {
  canonicalPropertyKey,
  findPropertyDefinition,
  NO_EFFECT_PREFIXES,
  suggestPropertyKey,
} from './property-catalogue.js';

/** Where the leases are kept. */
export type LeaseStoreConfiguration =
  /** The Java KCL lease table on DynamoDB (`tableName`, default `applicationName`). */
  | { readonly kind: 'dynamodb'; readonly tableName: string }
  /** A SQL database through `@kcl/store-sql`. */
  | { readonly kind: 'sql'; readonly url: string; readonly tableName: string | null };

export interface MultiLangTimings {
  /** `failoverTimeMillis`: the lease expiry. */
  readonly leaseExpiryMs: number;
  /** A third of the expiry, as the Java KCL renews. */
  readonly leaseRenewIntervalMs: number;
  readonly rebalanceIntervalMs: number;
  readonly pollIntervalMs: number;
  readonly parentPollIntervalMs: number;
  readonly shardSyncIntervalMs: number;
  /** The whole graceful stop; half of it is the children's time for `shutdownRequested`. */
  readonly shutdownGraceMs: number;
  /** `timeoutInSeconds` in ms: the longest wait for one child message, or null for no limit. */
  readonly childMessageTimeoutMs: number | null;
  readonly childExitTimeoutMs: number;
  readonly childKillTimeoutMs: number;
  /** Backoff between retries of a failed child action (and child restarts). */
  readonly retryInitialMs: number;
  readonly retryMaxMs: number;
}

/** A properties file, checked and turned into what the daemon needs. */
export interface MultiLangConfiguration {
  readonly executable: ExecutableCommand;
  readonly processingLanguage: string | null;
  readonly stream: { readonly streamName: string } | { readonly streamArn: string };
  readonly applicationName: string;
  readonly workerId: string | null;
  readonly initialPosition: InitialPosition;
  readonly region: string | null;
  readonly kinesisEndpoint: string | null;
  readonly dynamoDBEndpoint: string | null;
  readonly kinesisCredentials: CredentialsSource;
  readonly dynamoDBCredentials: CredentialsSource;
  readonly cloudWatchCredentials: CredentialsSource;
  readonly leaseStore: LeaseStoreConfiguration;
  readonly timings: MultiLangTimings;
  readonly maxRecords: number;
  readonly maxLeasesForWorker: number | null;
  readonly maxLeasesToSteal: number;
  readonly callProcessRecordsEvenForEmptyRecordList: boolean;
  readonly exitOnChildFailure: boolean;
  /** Child failures in a row without progress after which a shard's lease is given up; 0: never. */
  readonly childFailureLimit: number;
  readonly replayBufferMaxBytes: number;
  /** Record bytes kept for replay by every shard of the worker together. */
  readonly replayBufferTotalMaxBytes: number;
  readonly metrics: MetricsConfiguration;
  readonly logLevel: LogLevel;
}

/** CloudWatch metrics, published as the Java KCL publishes them (namespace = applicationName). */
export interface MetricsConfiguration {
  readonly level: MetricsLevel;
  readonly bufferTimeMs: number;
  readonly maxQueueSize: number;
}

export interface MultiLangConfigurationContext {
  /** The environment (PATH, credentials for EnvironmentVariableCredentialsProvider, KCL_SQL_URL). */
  readonly environment: Readonly<Record<string, string | undefined>>;
  /** Where children run and relative paths resolve. */
  readonly workingDirectory: string;
  /** The properties file's directory (see `resolveExecutableCommand`). */
  readonly propertiesDirectory?: string | null;
  /** Check that the executable exists (default true). */
  readonly checkExecutable?: boolean;
}

export interface ResolvedMultiLangConfiguration {
  readonly configuration: MultiLangConfiguration;
  /** Keys that are unknown, misspelt or have no effect, and values that are accepted but not honoured. */
  readonly warnings: readonly string[];
  /** How the file was read (derived values, rewritten paths), for the start-up log. */
  readonly notices: readonly string[];
}

export const MULTILANG_DEFAULTS = {
  failoverTimeMillis: 10_000,
  idleTimeBetweenReadsInMillis: 1_500,
  maxRecords: 10_000,
  maxLeasesToStealAtOneTime: 1,
  parentShardPollIntervalMillis: 10_000,
  shardSyncIntervalMillis: 60_000,
  shutdownGraceMillis: 20_000,
  taskBackoffTimeMillis: 500,
  childExitTimeoutMillis: 5_000,
  childKillTimeoutMillis: 2_000,
  childRestartMaxBackoffMillis: 30_000,
  childFailureLimit: 5,
  replayBufferMaxBytes: 64 * 1024 * 1024,
  replayBufferTotalMaxBytes: 256 * 1024 * 1024,
  sqlUrlEnvironmentVariable: 'KCL_SQL_URL',
} as const;

const STREAM_NAME = /^[A-Za-z0-9_.-]{1,128}$/;
const STREAM_ARN = /^arn:aws[a-z-]*:kinesis:([a-z0-9-]+):\d{12}:stream\/[A-Za-z0-9_.-]{1,128}$/;
const TRUE_WORDS = new Set(['true', 'yes', 'y', 'on', '1']);
const FALSE_WORDS = new Set(['false', 'no', 'n', 'off', '0']);
const LOG_LEVELS: readonly LogLevel[] = ['debug', 'info', 'warn', 'error'];

/** Properties as parsed from a file, or as a map or plain object. */
export type PropertyInput = ParsedProperties | ReadonlyMap<string, string> | Readonly<Record<string, string>>;

/**
 * Reads the keys of a MultiLangDaemon properties file (reference §1.10) into a configuration. Every
 * invalid value is collected and thrown at once as a `ConfigurationError`; unknown keys and keys
 * without effect are returned as warnings, by name.
 */
export function resolveMultiLangConfiguration(
  properties: PropertyInput,
  context: MultiLangConfigurationContext,
): ResolvedMultiLangConfiguration {
  const problems: string[] = [];
  const warnings: string[] = [];
  const notices: string[] = [];
  const values = new Map<string, string>();

  for (const [rawKey, rawValue] of propertyPairs(properties, problems)) {
    const key = canonicalPropertyKey(rawKey);
    const value = rawValue.trim();
    const definition = findPropertyDefinition(key);
    if (definition === undefined) {
      const prefixed = NO_EFFECT_PREFIXES.find((entry) => key.startsWith(entry.prefix));
      if (prefixed !== undefined) {
        warnings.push(`property ${rawKey} has no effect in kcl-multilang: ${prefixed.reason}`);
      } else {
        const suggestion = suggestPropertyKey(key);
        warnings.push(
          `unknown property ${rawKey} is ignored${suggestion === null ? '' : ` (did you mean ${suggestion}? keys are case-sensitive)`}`,
        );
      }
      continue;
    }
    if (value === '') {
      warnings.push(`property ${rawKey} has an empty value and is ignored`);
      continue;
    }
    if (definition.support === 'no-effect') {
      warnings.push(`property ${rawKey} has no effect in kcl-multilang: ${definition.meaning}`);
      continue;
    }
    values.set(key, value);
  }

  const text = (key: string): string | null => values.get(key) ?? null;
  const integer = (key: string, fallback: number, min: number, max = Number.MAX_SAFE_INTEGER): number => {
    const value = values.get(key);
    if (value === undefined) return fallback;
    if (!/^[+-]?\d+$/.test(value) || Number(value) < min || Number(value) > max) {
      problems.push(
        `${key} must be a whole number from ${min} to ${max === Number.MAX_SAFE_INTEGER ? 'any' : max}, got ${JSON.stringify(value)}`,
      );
      return fallback;
    }
    return Number(value);
  };
  const optionalInteger = (key: string, min: number, max?: number): number | null =>
    values.has(key) ? integer(key, min, min, max) : null;
  const boolean = (key: string, fallback: boolean): boolean => {
    const value = values.get(key);
    if (value === undefined) return fallback;
    const lower = value.toLowerCase();
    if (TRUE_WORDS.has(lower)) return true;
    if (FALSE_WORDS.has(lower)) return false;
    problems.push(`${key} must be true or false, got ${JSON.stringify(value)}`);
    return fallback;
  };
  const oneOf = <T extends string>(
    key: string,
    allowed: readonly T[],
    fallback: T,
    fold: 'upper' | 'lower',
  ): T => {
    const value = values.get(key);
    if (value === undefined) return fallback;
    const folded = fold === 'upper' ? value.toUpperCase() : value.toLowerCase();
    const match = allowed.find((candidate) => candidate === folded);
    if (match === undefined) {
      problems.push(`${key} must be one of ${allowed.join(', ')}, got ${JSON.stringify(value)}`);
      return fallback;
    }
    return match;
  };
  const endpoint = (key: string): string | null => {
    const value = text(key);
    if (value === null) return null;
    try {
      const url = new URL(value);
      if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new Error('not http(s)');
      return value;
    } catch {
      problems.push(`${key} must be an http:// or https:// URL, got ${JSON.stringify(value)}`);
      return null;
    }
  };

  // ── the child ──────────────────────────────────────────────────────────────────────────────────
  let executable: ExecutableCommand = { executable: '', args: [], text: '' };
  const executableName = text('executableName');
  const split = executableName === null ? null : splitExecutableName(executableName);
  if (split === null) {
    problems.push(
      'executableName is required: the command that runs your record processor, e.g. "node app.js"',
    );
  } else if (context.checkExecutable === false) {
    executable = split;
  } else {
    const checked = resolveExecutableCommand(split, {
      workingDirectory: context.workingDirectory,
      environment: context.environment,
      propertiesDirectory: context.propertiesDirectory ?? null,
    });
    if (checked.ok) {
      executable = checked.resolved.command;
      for (const { from, to } of checked.resolved.rewrittenArguments) {
        notices.push(
          `executableName: ${from} is not in the working directory; using ${to} next to the properties file`,
        );
      }
    } else {
      problems.push(checked.problem);
    }
  }
  const processingLanguage = text('processingLanguage');

  // ── the stream and the application ─────────────────────────────────────────────────────────────
  const applicationName = text('applicationName');
  if (applicationName === null)
    problems.push('applicationName is required: it names the application and its lease table');
  const streamName = text('streamName');
  const streamArn = text('streamArn');
  let stream: MultiLangConfiguration['stream'] = { streamName: '' };
  let arnRegion: string | null = null;
  if (streamArn !== null) {
    const match = STREAM_ARN.exec(streamArn);
    if (match === null) {
      problems.push(
        `streamArn ${JSON.stringify(streamArn)} is not a Kinesis stream ARN (arn:aws:kinesis:<region>:<account>:stream/<name>)`,
      );
    } else {
      arnRegion = match[1] ?? null;
      stream = { streamArn };
      if (streamName !== null)
        notices.push('streamArn and streamName are both set: streamArn is used, as in the Java daemon');
    }
  } else if (streamName !== null) {
    if (STREAM_NAME.test(streamName)) stream = { streamName };
    else
      problems.push(
        `streamName ${JSON.stringify(streamName)} is not a valid stream name (1–128 of A–Z a–z 0–9 _ . -)`,
      );
  } else {
    problems.push('streamName or streamArn is required: the stream to consume');
  }
  const workerId = text('workerId');

  let initialPosition: InitialPosition = 'LATEST';
  const position = text('initialPositionInStream');
  if (position !== null) {
    const upper = position.toUpperCase();
    if (upper === 'LATEST' || upper === 'TRIM_HORIZON') initialPosition = upper;
    else if (upper === 'AT_TIMESTAMP') {
      problems.push(
        'initialPositionInStream = AT_TIMESTAMP is not accepted (as in the Java daemon): set initialPositionInStreamExtended to the epoch seconds to start at',
      );
    } else {
      problems.push(
        `initialPositionInStream must be LATEST or TRIM_HORIZON, got ${JSON.stringify(position)}`,
      );
    }
  }
  if (values.has('initialPositionInStreamExtended')) {
    const seconds = integer('initialPositionInStreamExtended', 0, 0, 253_402_300_799);
    initialPosition = { timestamp: new Date(seconds * 1000) };
    if (position !== null)
      notices.push('initialPositionInStreamExtended is set: shards without a lease start AT_TIMESTAMP');
  }

  // ── AWS clients ────────────────────────────────────────────────────────────────────────────────
  const regionName = text('regionName');
  if (regionName !== null && !/^[a-z0-9-]+$/.test(regionName)) {
    problems.push(`regionName ${JSON.stringify(regionName)} is not an AWS region id (e.g. us-east-1)`);
  }
  const region = regionName ?? arnRegion;
  if (regionName === null && arnRegion !== null)
    notices.push(`regionName is not set: using ${arnRegion} from streamArn`);
  const kinesisEndpoint = endpoint('kinesisEndpoint');
  const dynamoDBEndpoint = endpoint('dynamoDBEndpoint');

  const credentials = (key: string, fallback: CredentialsSource): CredentialsSource => {
    const value = text(key);
    if (value === null) return fallback;
    const resolution = resolveCredentialsProvider(key, value, context.environment);
    problems.push(...resolution.problems);
    warnings.push(...resolution.warnings);
    return resolution.source ?? fallback;
  };
  const kinesisCredentials = credentials('AwsCredentialsProvider', DEFAULT_CREDENTIALS);
  const dynamoDBCredentials = credentials('AwsCredentialsProviderDynamoDB', kinesisCredentials);
  const cloudWatchCredentials = credentials('AwsCredentialsProviderCloudWatch', kinesisCredentials);

  // ── the lease store ───────────────────────────────────────────────────────────────────────────
  const storeKind = oneOf('kcl.leaseStore', ['dynamodb', 'sql'] as const, 'dynamodb', 'lower');
  const tableName = text('tableName');
  let leaseStore: LeaseStoreConfiguration = {
    kind: 'dynamodb',
    tableName: tableName ?? applicationName ?? '',
  };
  if (storeKind === 'dynamodb') {
    if (tableName !== null && !/^[A-Za-z0-9_.-]{3,255}$/.test(tableName)) {
      problems.push(
        `tableName ${JSON.stringify(tableName)} is not a DynamoDB table name (3–255 of A–Z a–z 0–9 _ . -)`,
      );
    }
    for (const key of ['kcl.sqlUrl', 'kcl.sqlTableName']) {
      if (values.has(key)) warnings.push(`property ${key} has no effect: kcl.leaseStore is dynamodb`);
    }
  } else {
    const environmentUrl = context.environment[MULTILANG_DEFAULTS.sqlUrlEnvironmentVariable];
    const url = text('kcl.sqlUrl') ?? (environmentUrl ? environmentUrl : null);
    if (url === null) {
      problems.push(
        `kcl.leaseStore = sql needs a database: set kcl.sqlUrl (postgres://…, mysql://… or sqlite:<file>) or the ${MULTILANG_DEFAULTS.sqlUrlEnvironmentVariable} environment variable`,
      );
    } else if (!/^(postgres|postgresql|mysql|mariadb|sqlite):/i.test(url)) {
      problems.push('kcl.sqlUrl must start with postgres://, postgresql://, mysql://, mariadb:// or sqlite:');
    }
    leaseStore = { kind: 'sql', url: url ?? '', tableName: text('kcl.sqlTableName') };
    if (tableName !== null)
      warnings.push('property tableName has no effect with kcl.leaseStore = sql: use kcl.sqlTableName');
    if (dynamoDBEndpoint !== null)
      warnings.push('property dynamoDBEndpoint has no effect with kcl.leaseStore = sql');
  }

  // ── timings ───────────────────────────────────────────────────────────────────────────────────
  const leaseExpiryMs = integer('failoverTimeMillis', MULTILANG_DEFAULTS.failoverTimeMillis, 3);
  const rebalanceIntervalMs = integer(
    'leaseAssignmentIntervalMillis',
    Math.max(1, Math.floor(leaseExpiryMs / 2)),
    1,
  );
  const retryInitialMs = integer('taskBackoffTimeMillis', MULTILANG_DEFAULTS.taskBackoffTimeMillis, 1);
  const retryMaxMs = integer(
    'kcl.childRestartMaxBackoffMillis',
    MULTILANG_DEFAULTS.childRestartMaxBackoffMillis,
    1,
  );
  if (retryMaxMs < retryInitialMs) {
    problems.push(
      `kcl.childRestartMaxBackoffMillis (${retryMaxMs}) must be at least taskBackoffTimeMillis (${retryInitialMs})`,
    );
  }
  const timeoutInSeconds = optionalInteger('timeoutInSeconds', 1, 2_147_483);
  const timings: MultiLangTimings = {
    leaseExpiryMs,
    leaseRenewIntervalMs: Math.max(1, Math.floor(leaseExpiryMs / 3)),
    rebalanceIntervalMs,
    pollIntervalMs: integer(
      'idleTimeBetweenReadsInMillis',
      MULTILANG_DEFAULTS.idleTimeBetweenReadsInMillis,
      0,
    ),
    parentPollIntervalMs: integer(
      'parentShardPollIntervalMillis',
      MULTILANG_DEFAULTS.parentShardPollIntervalMillis,
      1,
    ),
    shardSyncIntervalMs: integer('shardSyncIntervalMillis', MULTILANG_DEFAULTS.shardSyncIntervalMillis, 1),
    shutdownGraceMs: integer('shutdownGraceMillis', MULTILANG_DEFAULTS.shutdownGraceMillis, 0),
    childMessageTimeoutMs: timeoutInSeconds === null ? null : timeoutInSeconds * 1000,
    childExitTimeoutMs: integer('kcl.childExitTimeoutMillis', MULTILANG_DEFAULTS.childExitTimeoutMillis, 0),
    childKillTimeoutMs: integer('kcl.childKillTimeoutMillis', MULTILANG_DEFAULTS.childKillTimeoutMillis, 0),
    retryInitialMs,
    retryMaxMs,
  };

  // ── processing ────────────────────────────────────────────────────────────────────────────────
  const maxRecords = integer('maxRecords', MULTILANG_DEFAULTS.maxRecords, 1, 10_000);
  const maxLeasesForWorker = optionalInteger('maxLeasesForWorker', 1);
  const maxLeasesToSteal = integer(
    'maxLeasesToStealAtOneTime',
    MULTILANG_DEFAULTS.maxLeasesToStealAtOneTime,
    0,
  );
  const callProcessRecordsEvenForEmptyRecordList = boolean('callProcessRecordsEvenForEmptyRecordList', false);
  const exitOnChildFailure = boolean('kcl.exitOnChildFailure', false);
  const childFailureLimit = integer('kcl.childFailureLimit', MULTILANG_DEFAULTS.childFailureLimit, 0);
  const replayBufferMaxBytes = integer(
    'kcl.replayBufferMaxBytes',
    MULTILANG_DEFAULTS.replayBufferMaxBytes,
    0,
  );
  const replayBufferTotalMaxBytes = integer(
    'kcl.replayBufferTotalMaxBytes',
    MULTILANG_DEFAULTS.replayBufferTotalMaxBytes,
    0,
  );

  // As the Java KCL, metrics go to CloudWatch by default. Against a custom Kinesis endpoint (an emulator,
  // usually) there is often no CloudWatch to reach, so they are off unless metricsLevel asks for them.
  const metricsDefault = kinesisEndpoint === null ? 'DETAILED' : 'NONE';
  const metricsLevel = oneOf(
    'metricsLevel',
    ['NONE', 'SUMMARY', 'DETAILED'] as const,
    metricsDefault,
    'upper',
  );
  if (!values.has('metricsLevel') && kinesisEndpoint !== null) {
    notices.push('kinesisEndpoint is set: CloudWatch metrics are off unless metricsLevel is set');
  }
  const metrics: MetricsConfiguration = {
    level: metricsLevel,
    bufferTimeMs: integer('metricsBufferTimeMillis', 10_000, 1),
    maxQueueSize: integer('metricsMaxQueueSize', 10_000, 1),
  };
  const retrievalMode = oneOf('retrievalMode', ['POLLING', 'DEFAULT', 'FANOUT'] as const, 'POLLING', 'upper');
  if (retrievalMode === 'FANOUT') {
    warnings.push(
      'retrievalMode = FANOUT: enhanced fan-out is not available yet; records are read by polling GetRecords',
    );
  }
  if (!boolean('cleanupLeasesUponShardCompletion', true)) {
    warnings.push(
      'cleanupLeasesUponShardCompletion = false cannot be honoured: finished parent leases are always deleted once all their children have started',
    );
  }
  boolean('validateSequenceNumberBeforeCheckpointing', true);
  const logLevel = oneOf('kcl.logLevel', LOG_LEVELS, 'info', 'lower');

  if (problems.length > 0) throw new ConfigurationError('@kcl/multilang (properties)', problems);

  return {
    configuration: {
      executable,
      processingLanguage,
      stream,
      applicationName: applicationName as string,
      workerId,
      initialPosition,
      region,
      kinesisEndpoint,
      dynamoDBEndpoint,
      kinesisCredentials,
      dynamoDBCredentials,
      cloudWatchCredentials,
      leaseStore,
      timings,
      maxRecords,
      maxLeasesForWorker,
      maxLeasesToSteal,
      callProcessRecordsEvenForEmptyRecordList,
      exitOnChildFailure,
      childFailureLimit,
      replayBufferMaxBytes,
      replayBufferTotalMaxBytes,
      metrics,
      logLevel,
    },
    warnings,
    notices,
  };
}

function propertyPairs(properties: PropertyInput, problems: string[]): [string, string][] {
  if (isParsedProperties(properties)) {
    problems.push(...properties.problems);
    return [...properties.values.values()].map((entry) => [entry.key, entry.value]);
  }
  if (properties instanceof Map) return [...properties.entries()];
  return Object.entries(properties as Readonly<Record<string, string>>);
}

function isParsedProperties(value: PropertyInput): value is ParsedProperties {
  return (
    typeof value === 'object' &&
    value !== null &&
    !(value instanceof Map) &&
    'entries' in value &&
    'values' in value &&
    (value as ParsedProperties).values instanceof Map
  );
}
