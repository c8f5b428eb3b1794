import { ConfigurationError } from '@kcl/core';
import { describe, expect, it } from 'vitest';
import type { MultiLangConfigurationContext } from './multilang-configuration.js';
import { parseProperties } from './properties-parser.js';
import { resolveMultiLangConfiguration } from './resolve-multilang-configuration.js';

const context: MultiLangConfigurationContext = {
  environment: { PATH: process.env.PATH ?? '' },
  workingDirectory: process.cwd(),
};

const minimal = { executableName: 'node app.js', streamName: 'orders', applicationName: 'billing' };

function resolve(values: Record<string, string>, overrides: Partial<MultiLangConfigurationContext> = {}) {
  return resolveMultiLangConfiguration(values, { ...context, ...overrides });
}

function problemsOf(
  values: Record<string, string>,
  overrides: Partial<MultiLangConfigurationContext> = {},
): string[] {
  try {
    resolve(values, overrides);
  } catch (error) {
    if (error instanceof ConfigurationError) return [...error.problems];
    throw error;
  }
  return [];
}

describe('resolveMultiLangConfiguration', () => {
  it('fills in the Java daemon’s defaults and derives the lease timings from failoverTimeMillis', () => {
    const { configuration, warnings } = resolve(minimal);
    expect(warnings).toEqual([]);
    expect(configuration.executable).toEqual({ executable: 'node', args: ['app.js'], text: 'node app.js' });
    expect(configuration.stream).toEqual({ streamName: 'orders' });
    expect(configuration.leaseStore).toEqual({ kind: 'dynamodb', tableName: 'billing' });
    expect(configuration.initialPosition).toBe('LATEST');
    expect(configuration.kinesisCredentials).toEqual({ kind: 'default-chain', profile: null });
    expect(configuration.timings).toEqual({
      leaseExpiryMs: 10_000,
      leaseRenewIntervalMs: 3_333,
      rebalanceIntervalMs: 5_000,
      pollIntervalMs: 1_500,
      parentPollIntervalMs: 10_000,
      shardSyncIntervalMs: 60_000,
      shutdownGraceMs: 20_000,
      childMessageTimeoutMs: null,
      childExitTimeoutMs: 5_000,
      childKillTimeoutMs: 2_000,
      retryInitialMs: 500,
      retryMaxMs: 30_000,
    });
    expect(configuration.maxRecords).toBe(10_000);
    expect(configuration.maxLeasesForWorker).toBeNull();
    expect(configuration.maxLeasesToSteal).toBe(1);
    expect(configuration.callProcessRecordsEvenForEmptyRecordList).toBe(false);
    expect(configuration.exitOnChildFailure).toBe(false);
    expect(configuration.childFailureLimit).toBe(5);
    expect(configuration.replayBufferMaxBytes).toBe(64 * 1024 * 1024);
    expect(configuration.replayBufferTotalMaxBytes).toBe(256 * 1024 * 1024);
    expect(configuration.workerId).toBeNull();
    expect(configuration.metrics).toEqual({ level: 'DETAILED', bufferTimeMs: 10_000, maxQueueSize: 10_000 });
    expect(configuration.cloudWatchCredentials).toEqual({ kind: 'default-chain', profile: null });
  });

  it('turns CloudWatch metrics off against a custom Kinesis endpoint unless metricsLevel is set', () => {
    const local = resolve({ ...minimal, kinesisEndpoint: 'http://127.0.0.1:4567' });
    expect(local.configuration.metrics.level).toBe('NONE');
    expect(local.notices).toContain(
      'kinesisEndpoint is set: CloudWatch metrics are off unless metricsLevel is set',
    );
    expect(
      resolve({ ...minimal, kinesisEndpoint: 'http://127.0.0.1:4567', metricsLevel: 'summary' }).configuration
        .metrics.level,
    ).toBe('SUMMARY');
  });

  it('maps every supported key', () => {
    const { configuration } = resolve({
      ...minimal,
      tableName: 'billing-leases',
      workerId: 'worker-7',
      initialPositionInStream: 'trim_horizon',
      regionName: 'eu-west-1',
      kinesisEndpoint: 'http://127.0.0.1:4567',
      dynamoDBEndpoint: 'http://127.0.0.1:4568',
      failoverTimeMillis: '3000',
      leaseAssignmentIntervalMillis: '700',
      maxRecords: '250',
      idleTimeBetweenReadsInMillis: '200',
      maxLeasesForWorker: '4',
      maxLeasesToStealAtOneTime: '2',
      callProcessRecordsEvenForEmptyRecordList: 'true',
      parentShardPollIntervalMillis: '300',
      shardSyncIntervalMillis: '5000',
      shutdownGraceMillis: '8000',
      timeoutInSeconds: '30',
      taskBackoffTimeMillis: '50',
      'kcl.childRestartMaxBackoffMillis': '900',
      'kcl.childExitTimeoutMillis': '100',
      'kcl.childKillTimeoutMillis': '200',
      'kcl.exitOnChildFailure': 'yes',
      'kcl.childFailureLimit': '0',
      'kcl.replayBufferMaxBytes': '1024',
      'kcl.replayBufferTotalMaxBytes': '4096',
      'kcl.logLevel': 'DEBUG',
      metricsLevel: 'none',
      metricsBufferTimeMillis: '2000',
      metricsMaxQueueSize: '50',
      processingLanguage: 'python/3.11',
    });
    expect(configuration).toMatchObject({
      leaseStore: { kind: 'dynamodb', tableName: 'billing-leases' },
      workerId: 'worker-7',
      initialPosition: 'TRIM_HORIZON',
      region: 'eu-west-1',
      kinesisEndpoint: 'http://127.0.0.1:4567',
      dynamoDBEndpoint: 'http://127.0.0.1:4568',
      maxRecords: 250,
      maxLeasesForWorker: 4,
      maxLeasesToSteal: 2,
      callProcessRecordsEvenForEmptyRecordList: true,
      exitOnChildFailure: true,
      childFailureLimit: 0,
      replayBufferMaxBytes: 1024,
      replayBufferTotalMaxBytes: 4096,
      metrics: { level: 'NONE', bufferTimeMs: 2_000, maxQueueSize: 50 },
      logLevel: 'debug',
      processingLanguage: 'python/3.11',
    });
    expect(configuration.timings).toEqual({
      leaseExpiryMs: 3_000,
      leaseRenewIntervalMs: 1_000,
      rebalanceIntervalMs: 700,
      pollIntervalMs: 200,
      parentPollIntervalMs: 300,
      shardSyncIntervalMs: 5_000,
      shutdownGraceMs: 8_000,
      childMessageTimeoutMs: 30_000,
      childExitTimeoutMs: 100,
      childKillTimeoutMs: 200,
      retryInitialMs: 50,
      retryMaxMs: 900,
    });
  });

  it('honours an explicit false (the Java daemon ignores false for primitive booleans)', () => {
    expect(
      resolve({ ...minimal, callProcessRecordsEvenForEmptyRecordList: 'false' }).configuration
        .callProcessRecordsEvenForEmptyRecordList,
    ).toBe(false);
    expect(resolve({ ...minimal, 'kcl.exitOnChildFailure': 'FALSE' }).configuration.exitOnChildFailure).toBe(
      false,
    );
    // A false that cannot be honoured is said out loud rather than dropped.
    expect(resolve({ ...minimal, cleanupLeasesUponShardCompletion: 'false' }).warnings).toEqual([
      'cleanupLeasesUponShardCompletion = false cannot be honoured: finished parent leases are always deleted once all their children have started',
    ]);
  });

  it('takes the ARN over the name, and the region from the ARN', () => {
    const { configuration, notices } = resolve({
      ...minimal,
      streamArn: 'arn:aws:kinesis:ap-south-1:123456789012:stream/orders',
    });
    expect(configuration.stream).toEqual({
      streamArn: 'arn:aws:kinesis:ap-south-1:123456789012:stream/orders',
    });
    expect(configuration.region).toBe('ap-south-1');
    expect(notices).toContain(
      'streamArn and streamName are both set: streamArn is used, as in the Java daemon',
    );
  });

  it('reads initialPositionInStreamExtended as epoch seconds', () => {
    const { configuration } = resolve({ ...minimal, initialPositionInStreamExtended: '1700000000' });
    expect(configuration.initialPosition).toEqual({ timestamp: new Date(1_700_000_000_000) });
  });

  it('warns about unknown keys by name, with a suggestion, and about keys that have no effect', () => {
    const { warnings } = resolveMultiLangConfiguration(
      parseProperties(
        [
          'executableName = node app.js',
          'streamName = orders',
          'applicationName = billing',
          'initialPositionInStrem = TRIM_HORIZON',
          'StreamName = typo',
          'somethingElse = 1',
          'maxActiveThreads = 8',
          'fanoutConfig.retryBackoffMillis = 10',
          'workerMetricsTableName = y',
          'retrievalMode = FANOUT',
          'metricsEnabledDimensions = Operation',
          'workerId =',
        ].join('\n'),
      ),
      context,
    );
    expect(warnings).toEqual([
      'unknown property initialPositionInStrem is ignored (did you mean initialPositionInStream? keys are case-sensitive)',
      'unknown property StreamName is ignored (did you mean streamName? keys are case-sensitive)',
      'unknown property somethingElse is ignored',
      'property maxActiveThreads has no effect in kcl-multilang: children are served by the event loop, not a thread pool',
      'property fanoutConfig.retryBackoffMillis has no effect in kcl-multilang: the stream consumer is registered and waited for with backoff (0.5 s growing to 5 s, with jitter) until it is ACTIVE, for up to 5 minutes',
      'property workerMetricsTableName has no effect in kcl-multilang: KCL 3.x worker metrics are not kept',
      'property metricsEnabledDimensions has no effect in kcl-multilang: metrics are published with all their dimensions',
      'property workerId has an empty value and is ignored',
    ]);
  });

  it('accepts the credentials keys in any case, as Java does', () => {
    const { configuration, warnings } = resolve({
      ...minimal,
      AWSCredentialsProvider: 'ProfileCredentialsProvider|analytics',
      awscredentialsproviderdynamodb: 'software.amazon.awssdk.auth.credentials.DefaultCredentialsProvider',
      AWSCredentialsProviderCloudWatch: 'ProfileCredentialsProvider|metrics',
    });
    expect(configuration.kinesisCredentials).toEqual({ kind: 'default-chain', profile: 'analytics' });
    expect(configuration.dynamoDBCredentials).toEqual({ kind: 'default-chain', profile: null });
    expect(configuration.cloudWatchCredentials).toEqual({ kind: 'default-chain', profile: 'metrics' });
    expect(warnings).toEqual([]);
  });

  it('lists every problem at once', () => {
    expect(
      problemsOf({
        executableName: 'definitely-not-a-program-kcl app.js',
        maxRecords: '20000',
        failoverTimeMillis: 'ten',
        initialPositionInStream: 'AT_TIMESTAMP',
        kinesisEndpoint: 'localhost:4567',
        regionName: 'EU West',
        callProcessRecordsEvenForEmptyRecordList: 'sure',
        timeoutInSeconds: '0',
        metricsLevel: 'LOUD',
        'kcl.leaseStore': 'redis',
      }),
    ).toEqual([
      'executableName "definitely-not-a-program-kcl app.js": "definitely-not-a-program-kcl" was not found on PATH (install it, or give its full path)',
      'applicationName is required: it names the application and its lease table',
      'streamName or streamArn is required: the stream to consume',
      'initialPositionInStream = AT_TIMESTAMP is not accepted (as in the Java daemon): set initialPositionInStreamExtended to the epoch seconds to start at',
      'regionName "EU West" is not an AWS region id (e.g. us-east-1)',
      'kinesisEndpoint must be an http:// or https:// URL, got "localhost:4567"',
      'kcl.leaseStore must be one of dynamodb, sql, got "redis"',
      'failoverTimeMillis must be an integer from 3 to ∞, got "ten"',
      'timeoutInSeconds must be an integer from 1 to 2147483, got 0',
      'maxRecords must be an integer from 1 to 10000, got 20000',
      'callProcessRecordsEvenForEmptyRecordList must be true or false, got "sure"',
      'metricsLevel must be one of NONE, SUMMARY, DETAILED, got "LOUD"',
    ]);
  });

  it('configures the SQL lease store from kcl.sqlUrl or KCL_SQL_URL', () => {
    expect(
      resolve({
        ...minimal,
        'kcl.leaseStore': 'sql',
        'kcl.sqlUrl': 'sqlite:leases.db',
        'kcl.sqlTableName': 'billing_leases',
      }).configuration.leaseStore,
    ).toEqual({
      kind: 'sql',
      url: 'sqlite:leases.db',
      tableName: 'billing_leases',
    });
    expect(
      resolve(
        { ...minimal, 'kcl.leaseStore': 'SQL' },
        { environment: { ...context.environment, KCL_SQL_URL: 'postgres://u:p@db/x' } },
      ).configuration.leaseStore,
    ).toEqual({ kind: 'sql', url: 'postgres://u:p@db/x', tableName: null });
    expect(problemsOf({ ...minimal, 'kcl.leaseStore': 'sql' })).toEqual([
      'kcl.leaseStore = sql needs a database: set kcl.sqlUrl (postgres://…, mysql://… or sqlite:<file>) or the KCL_SQL_URL environment variable',
    ]);
    expect(problemsOf({ ...minimal, 'kcl.leaseStore': 'sql', 'kcl.sqlUrl': 'oracle://x' })).toEqual([
      'kcl.sqlUrl must start with postgres://, postgresql://, mysql://, mariadb:// or sqlite:',
    ]);
    expect(problemsOf({ ...minimal, 'kcl.leaseStore': 'sql', 'kcl.sqlUrl': 'sqlite::memory:' })).toEqual([
      'kcl.sqlUrl: sqlite::memory: names no file (or an in-memory database): leases must outlive the process, e.g. sqlite:/var/lib/app/leases.db',
    ]);
    expect(
      problemsOf({
        ...minimal,
        'kcl.leaseStore': 'sql',
        'kcl.sqlUrl': 'postgres://kcl:secret@db/x?poolSize=0',
      }),
    ).toEqual(['kcl.sqlUrl: poolSize=0 must be a positive integer']);
    expect(resolve({ ...minimal, 'kcl.sqlUrl': 'sqlite:x.db' }).warnings).toEqual([
      'property kcl.sqlUrl has no effect: kcl.leaseStore is dynamodb',
    ]);
  });

  it('rejects a backoff ceiling below its start', () => {
    expect(
      problemsOf({ ...minimal, taskBackoffTimeMillis: '5000', 'kcl.childRestartMaxBackoffMillis': '1000' }),
    ).toEqual(['kcl.childRestartMaxBackoffMillis (1000) must be at least taskBackoffTimeMillis (5000)']);
  });
});
