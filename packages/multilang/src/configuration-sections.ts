import type { InitialPosition } from '@kcl/consumer';
import type { LogLevel } from '@kcl/core';
import { ConfigurationError } from '@kcl/core';
import { parseLeaseStoreUrl } from '@kcl/stores';
import { DEFAULT_CREDENTIALS } from './credentials-provider.js';
import type { ExecutableCommand } from './executable-command.js';
import { resolveExecutableCommand, splitExecutableName } from './executable-command.js';
import type {
  LeaseStoreConfiguration,
  MetricsConfiguration,
  MultiLangConfiguration,
  MultiLangConfigurationContext,
  MultiLangTimings,
} from './multilang-configuration.js';
import { MULTILANG_DEFAULTS } from './multilang-configuration.js';
import type { PropertyReader } from './property-reader.js';

// One function per group of keys of a MultiLangDaemon properties file (reference §1.10). Each reads
// its keys from the reader, records what is wrong there, and returns what it found; the order in which
// `resolveMultiLangConfiguration` calls them is the order in which problems are listed.

const STREAM_NAME = /^[A-Za-z0-9_.-]{1,128}$/;
const STREAM_ARN = /^arn:aws[a-z-]*:kinesis:([a-z0-9-]+):\d{12}:stream\/[A-Za-z0-9_.-]{1,128}$/;
const SQL_SCHEMES = /^(postgres|postgresql|mysql|mariadb|sqlite):/i;
const LOG_LEVELS: readonly LogLevel[] = ['debug', 'info', 'warn', 'error'];
const ANY = Number.MAX_SAFE_INTEGER;

/** `executableName` (checked on PATH unless told not to) and `processingLanguage`. */
export function readChild(
  reader: PropertyReader,
  context: MultiLangConfigurationContext,
): Pick<MultiLangConfiguration, 'executable' | 'processingLanguage'> {
  const processingLanguage = reader.text('processingLanguage');
  const executableName = reader.text('executableName');
  const split = executableName === null ? null : splitExecutableName(executableName);
  if (split === null) {
    reader.problems.add(
      'executableName is required: the command that runs your record processor, e.g. "node app.js"',
    );
    return { executable: { executable: '', args: [], text: '' }, processingLanguage };
  }
  if (context.checkExecutable === false) return { executable: split, processingLanguage };
  const checked = resolveExecutableCommand(split, {
    workingDirectory: context.workingDirectory,
    environment: context.environment,
    propertiesDirectory: context.propertiesDirectory ?? null,
  });
  if (!checked.ok) {
    reader.problems.add(checked.problem);
    return { executable: split, processingLanguage };
  }
  for (const { from, to } of checked.resolved.rewrittenArguments) {
    reader.notices.push(
      `executableName: ${from} is not in the working directory; using ${to} next to the properties file`,
    );
  }
  const executable: ExecutableCommand = checked.resolved.command;
  return { executable, processingLanguage };
}

export interface StreamSection
  extends Pick<MultiLangConfiguration, 'stream' | 'workerId' | 'initialPosition'> {
  readonly applicationName: string | null;
  /** The region named in `streamArn`, the default for `regionName`. */
  readonly arnRegion: string | null;
}

/** `applicationName`, `streamName`/`streamArn`, `workerId` and where shards without a lease start. */
export function readStream(reader: PropertyReader): StreamSection {
  const applicationName = reader.required('applicationName', 'it names the application and its lease table');
  const streamName = reader.text('streamName');
  const streamArn = reader.text('streamArn');
  let stream: MultiLangConfiguration['stream'] = { streamName: '' };
  let arnRegion: string | null = null;
  if (streamArn !== null) {
    const match = STREAM_ARN.exec(streamArn);
    if (match === null) {
      reader.problems.add(
        `streamArn ${JSON.stringify(streamArn)} is not a Kinesis stream ARN (arn:aws:kinesis:<region>:<account>:stream/<name>)`,
      );
    } else {
      arnRegion = match[1] ?? null;
      stream = { streamArn };
      if (streamName !== null)
        reader.notices.push(
          'streamArn and streamName are both set: streamArn is used, as in the Java daemon',
        );
    }
  } else if (streamName !== null) {
    if (STREAM_NAME.test(streamName)) stream = { streamName };
    else
      reader.problems.add(
        `streamName ${JSON.stringify(streamName)} is not a valid stream name (1–128 of A–Z a–z 0–9 _ . -)`,
      );
  } else {
    reader.problems.add('streamName or streamArn is required: the stream to consume');
  }
  return {
    applicationName,
    stream,
    arnRegion,
    workerId: reader.text('workerId'),
    initialPosition: readInitialPosition(reader),
  };
}

function readInitialPosition(reader: PropertyReader): InitialPosition {
  let initialPosition: InitialPosition = 'LATEST';
  const position = reader.text('initialPositionInStream');
  if (position !== null) {
    const upper = position.toUpperCase();
    if (upper === 'LATEST' || upper === 'TRIM_HORIZON') initialPosition = upper;
    else if (upper === 'AT_TIMESTAMP') {
      reader.problems.add(
        'initialPositionInStream = AT_TIMESTAMP is not accepted (as in the Java daemon): set initialPositionInStreamExtended to the epoch seconds to start at',
      );
    } else {
      reader.problems.add(
        `initialPositionInStream must be LATEST or TRIM_HORIZON, got ${JSON.stringify(position)}`,
      );
    }
  }
  if (reader.has('initialPositionInStreamExtended')) {
    const seconds = reader.integer('initialPositionInStreamExtended', 0, { min: 0, max: 253_402_300_799 });
    initialPosition = { timestamp: new Date(seconds * 1000) };
    if (position !== null)
      reader.notices.push(
        'initialPositionInStreamExtended is set: shards without a lease start AT_TIMESTAMP',
      );
  }
  return initialPosition;
}

export type AwsSection = Pick<
  MultiLangConfiguration,
  | 'region'
  | 'kinesisEndpoint'
  | 'dynamoDBEndpoint'
  | 'kinesisCredentials'
  | 'dynamoDBCredentials'
  | 'cloudWatchCredentials'
>;

/** The region, the endpoints and the credentials of the Kinesis, DynamoDB and CloudWatch clients. */
export function readAwsClients(
  reader: PropertyReader,
  context: MultiLangConfigurationContext,
  arnRegion: string | null,
): AwsSection {
  const regionName = reader.text('regionName');
  if (regionName !== null && !/^[a-z0-9-]+$/.test(regionName)) {
    reader.problems.add(`regionName ${JSON.stringify(regionName)} is not an AWS region id (e.g. us-east-1)`);
  }
  if (regionName === null && arnRegion !== null)
    reader.notices.push(`regionName is not set: using ${arnRegion} from streamArn`);
  const kinesisEndpoint = reader.endpoint('kinesisEndpoint');
  const dynamoDBEndpoint = reader.endpoint('dynamoDBEndpoint');
  const kinesisCredentials = reader.credentials(
    'AwsCredentialsProvider',
    DEFAULT_CREDENTIALS,
    context.environment,
  );
  return {
    region: regionName ?? arnRegion,
    kinesisEndpoint,
    dynamoDBEndpoint,
    kinesisCredentials,
    dynamoDBCredentials: reader.credentials(
      'AwsCredentialsProviderDynamoDB',
      kinesisCredentials,
      context.environment,
    ),
    cloudWatchCredentials: reader.credentials(
      'AwsCredentialsProviderCloudWatch',
      kinesisCredentials,
      context.environment,
    ),
  };
}

/** `kcl.leaseStore`: the Java table on DynamoDB (`tableName`), or a SQL database (`kcl.sqlUrl`). */
export function readLeaseStore(
  reader: PropertyReader,
  context: MultiLangConfigurationContext,
  applicationName: string | null,
  dynamoDBEndpoint: string | null,
): LeaseStoreConfiguration {
  const kind = reader.oneOf('kcl.leaseStore', ['dynamodb', 'sql'] as const, 'dynamodb', 'lower');
  const tableName = reader.text('tableName');
  if (kind === 'dynamodb') {
    if (tableName !== null && !/^[A-Za-z0-9_.-]{3,255}$/.test(tableName)) {
      reader.problems.add(
        `tableName ${JSON.stringify(tableName)} is not a DynamoDB table name (3–255 of A–Z a–z 0–9 _ . -)`,
      );
    }
    for (const key of ['kcl.sqlUrl', 'kcl.sqlTableName']) {
      if (reader.has(key)) reader.warnings.push(`property ${key} has no effect: kcl.leaseStore is dynamodb`);
    }
    return { kind: 'dynamodb', tableName: tableName ?? applicationName ?? '' };
  }
  const variable = MULTILANG_DEFAULTS.sqlUrlEnvironmentVariable;
  const url = reader.text('kcl.sqlUrl') ?? (context.environment[variable] || null);
  if (url === null) {
    reader.problems.add(
      `kcl.leaseStore = sql needs a database: set kcl.sqlUrl (postgres://…, mysql://… or sqlite:<file>) or the ${variable} environment variable`,
    );
  } else if (!SQL_SCHEMES.test(url)) {
    reader.problems.add(
      'kcl.sqlUrl must start with postgres://, postgresql://, mysql://, mariadb:// or sqlite:',
    );
  } else {
    checkSqlUrl(reader, url, context.workingDirectory);
  }
  if (tableName !== null)
    reader.warnings.push('property tableName has no effect with kcl.leaseStore = sql: use kcl.sqlTableName');
  if (dynamoDBEndpoint !== null)
    reader.warnings.push('property dynamoDBEndpoint has no effect with kcl.leaseStore = sql');
  return { kind: 'sql', url: url ?? '', tableName: reader.text('kcl.sqlTableName') };
}

/** What `openLeaseStore` would refuse about the URL (an in-memory SQLite database, say), now. */
function checkSqlUrl(reader: PropertyReader, url: string, workingDirectory: string): void {
  try {
    parseLeaseStoreUrl(url, workingDirectory);
  } catch (error) {
    if (!ConfigurationError.is(error)) throw error;
    for (const problem of error.problems) reader.problems.add(`kcl.sqlUrl: ${problem}`);
  }
}

/** The lease timings (derived from `failoverTimeMillis` as the Java KCL does), shutdown and retries. */
export function readTimings(reader: PropertyReader): MultiLangTimings {
  const leaseExpiryMs = reader.integer('failoverTimeMillis', MULTILANG_DEFAULTS.failoverTimeMillis, {
    min: 3,
  });
  const rebalanceIntervalMs = reader.integer(
    'leaseAssignmentIntervalMillis',
    Math.max(1, Math.floor(leaseExpiryMs / 2)),
    { min: 1 },
  );
  const retryInitialMs = reader.integer('taskBackoffTimeMillis', MULTILANG_DEFAULTS.taskBackoffTimeMillis, {
    min: 1,
  });
  const retryMaxMs = reader.integer(
    'kcl.childRestartMaxBackoffMillis',
    MULTILANG_DEFAULTS.childRestartMaxBackoffMillis,
    { min: 1 },
  );
  if (retryMaxMs < retryInitialMs) {
    reader.problems.add(
      `kcl.childRestartMaxBackoffMillis (${retryMaxMs}) must be at least taskBackoffTimeMillis (${retryInitialMs})`,
    );
  }
  const timeoutInSeconds = reader.optionalInteger('timeoutInSeconds', { min: 1, max: 2_147_483 });
  const defaults = MULTILANG_DEFAULTS;
  return {
    leaseExpiryMs,
    leaseRenewIntervalMs: Math.max(1, Math.floor(leaseExpiryMs / 3)),
    rebalanceIntervalMs,
    pollIntervalMs: reader.integer('idleTimeBetweenReadsInMillis', defaults.idleTimeBetweenReadsInMillis, {
      min: 0,
    }),
    parentPollIntervalMs: reader.integer(
      'parentShardPollIntervalMillis',
      defaults.parentShardPollIntervalMillis,
      { min: 1 },
    ),
    shardSyncIntervalMs: reader.integer('shardSyncIntervalMillis', defaults.shardSyncIntervalMillis, {
      min: 1,
    }),
    shutdownGraceMs: reader.integer('shutdownGraceMillis', defaults.shutdownGraceMillis, { min: 0 }),
    childMessageTimeoutMs: timeoutInSeconds === null ? null : timeoutInSeconds * 1000,
    childExitTimeoutMs: reader.integer('kcl.childExitTimeoutMillis', defaults.childExitTimeoutMillis, {
      min: 0,
    }),
    childKillTimeoutMs: reader.integer('kcl.childKillTimeoutMillis', defaults.childKillTimeoutMillis, {
      min: 0,
    }),
    retryInitialMs,
    retryMaxMs,
  };
}

export type ProcessingSection = Pick<
  MultiLangConfiguration,
  | 'maxRecords'
  | 'maxLeasesForWorker'
  | 'maxLeasesToSteal'
  | 'callProcessRecordsEvenForEmptyRecordList'
  | 'exitOnChildFailure'
  | 'childFailureLimit'
  | 'replayBufferMaxBytes'
  | 'replayBufferTotalMaxBytes'
>;

/** Batches, lease counts, and what happens when children fail. */
export function readProcessing(reader: PropertyReader): ProcessingSection {
  const defaults = MULTILANG_DEFAULTS;
  return {
    maxRecords: reader.integer('maxRecords', defaults.maxRecords, { min: 1, max: 10_000 }),
    maxLeasesForWorker: reader.optionalInteger('maxLeasesForWorker', { min: 1, max: ANY }),
    maxLeasesToSteal: reader.integer('maxLeasesToStealAtOneTime', defaults.maxLeasesToStealAtOneTime, {
      min: 0,
    }),
    callProcessRecordsEvenForEmptyRecordList: reader.boolean(
      'callProcessRecordsEvenForEmptyRecordList',
      false,
    ),
    exitOnChildFailure: reader.boolean('kcl.exitOnChildFailure', false),
    childFailureLimit: reader.integer('kcl.childFailureLimit', defaults.childFailureLimit, { min: 0 }),
    replayBufferMaxBytes: reader.integer('kcl.replayBufferMaxBytes', defaults.replayBufferMaxBytes, {
      min: 0,
    }),
    replayBufferTotalMaxBytes: reader.integer(
      'kcl.replayBufferTotalMaxBytes',
      defaults.replayBufferTotalMaxBytes,
      { min: 0 },
    ),
  };
}

/**
 * CloudWatch metrics. As the Java KCL, they go to CloudWatch by default; against a custom Kinesis
 * endpoint (an emulator, usually) there is often no CloudWatch to reach, so they are off unless
 * `metricsLevel` asks for them.
 */
export function readMetrics(reader: PropertyReader, kinesisEndpoint: string | null): MetricsConfiguration {
  const level = reader.oneOf(
    'metricsLevel',
    ['NONE', 'SUMMARY', 'DETAILED'] as const,
    kinesisEndpoint === null ? 'DETAILED' : 'NONE',
    'upper',
  );
  if (!reader.has('metricsLevel') && kinesisEndpoint !== null) {
    reader.notices.push('kinesisEndpoint is set: CloudWatch metrics are off unless metricsLevel is set');
  }
  return {
    level,
    bufferTimeMs: reader.integer('metricsBufferTimeMillis', 10_000, { min: 1 }),
    maxQueueSize: reader.integer('metricsMaxQueueSize', 10_000, { min: 1 }),
  };
}

/** Keys that are accepted for compatibility but change nothing here, or only what is logged. */
export function readCompatibility(reader: PropertyReader): { readonly logLevel: LogLevel } {
  if (!reader.boolean('cleanupLeasesUponShardCompletion', true)) {
    reader.warnings.push(
      'cleanupLeasesUponShardCompletion = false cannot be honoured: finished parent leases are always deleted once all their children have started',
    );
  }
  reader.boolean('validateSequenceNumberBeforeCheckpointing', true);
  return { logLevel: reader.oneOf('kcl.logLevel', LOG_LEVELS, 'info', 'lower') };
}
