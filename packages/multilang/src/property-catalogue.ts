import { closestName } from '@kcl/core';

/**
 * How kcl-multilang treats a properties key:
 * - `supported`: read and applied;
 * - `extension`: a kcl-multilang key the Java daemon does not have (it ignores unknown keys, so a file
 *   that uses them still works there);
 * - `no-effect`: accepted for compatibility and logged as having no effect, with the reason.
 */
export type PropertySupport = 'supported' | 'extension' | 'no-effect';

export interface PropertyDefinition {
  readonly key: string;
  readonly support: PropertySupport;
  /** The default, as a person reads it. */
  readonly defaultValue: string;
  readonly meaning: string;
}

const supported = (key: string, defaultValue: string, meaning: string): PropertyDefinition => ({
  key,
  support: 'supported',
  defaultValue,
  meaning,
});
const extension = (key: string, defaultValue: string, meaning: string): PropertyDefinition => ({
  key,
  support: 'extension',
  defaultValue,
  meaning,
});
const noEffect = (key: string, defaultValue: string, meaning: string): PropertyDefinition => ({
  key,
  support: 'no-effect',
  defaultValue,
  meaning,
});

// Java counts the calls of one start attempt (and retries the whole start); here the registration is
// one wait with backoff, bounded by time, so there is no count to map these to.
const FANOUT_RETRIES =
  'the stream consumer is registered and waited for with backoff (0.5 s growing to 5 s, with jitter) until it is ACTIVE, for up to 5 minutes';

/** Every key kcl-multilang knows: the Java MultiLangDaemon's keys and its own `kcl.` extensions. */
export const PROPERTY_DEFINITIONS: readonly PropertyDefinition[] = [
  supported('executableName', 'required', 'the child command line, split on spaces, started without a shell'),
  supported('applicationName', 'required', 'the application; names the lease table'),
  supported('streamName', 'one of streamName / streamArn', 'the stream to consume'),
  supported('streamArn', 'one of streamName / streamArn', 'the stream by ARN; wins over streamName'),
  supported('tableName', 'applicationName', 'the DynamoDB lease table'),
  supported(
    'workerId',
    'host:pid:random',
    'this worker; a stable id lets a restarted worker re-adopt its leases',
  ),
  supported('initialPositionInStream', 'LATEST', 'LATEST or TRIM_HORIZON, for shards without a lease'),
  supported('initialPositionInStreamExtended', 'unset', 'epoch seconds: start AT_TIMESTAMP'),
  supported('regionName', 'the AWS SDK default region', 'the region of every client'),
  supported('kinesisEndpoint', 'unset', 'Kinesis endpoint override (e.g. a local emulator)'),
  supported('dynamoDBEndpoint', 'unset', 'DynamoDB endpoint override (e.g. a local emulator)'),
  supported('AwsCredentialsProvider', 'DefaultCredentialsProvider', 'credentials for Kinesis (and DynamoDB)'),
  supported('AwsCredentialsProviderDynamoDB', 'AwsCredentialsProvider', 'credentials for DynamoDB'),
  supported(
    'AwsCredentialsProviderCloudWatch',
    'AwsCredentialsProvider',
    'credentials for CloudWatch metrics',
  ),
  supported('failoverTimeMillis', '10000', 'lease expiry; leases are renewed every third of it'),
  supported(
    'leaseAssignmentIntervalMillis',
    'failoverTimeMillis / 2',
    'how often the worker takes and balances leases',
  ),
  supported(
    'maxRecords',
    '10000',
    'records per GetRecords call (1–10000); a polling key: set, it makes retrievalMode DEFAULT poll',
  ),
  supported(
    'idleTimeBetweenReadsInMillis',
    '1500',
    'wait between GetRecords calls of a caught-up shard; a polling key: set, it makes retrievalMode DEFAULT poll',
  ),
  supported('maxLeasesForWorker', 'unlimited', 'the most leases this worker holds'),
  supported('maxLeasesToStealAtOneTime', '1', 'the most leases one rebalance steals'),
  supported('callProcessRecordsEvenForEmptyRecordList', 'false', 'deliver empty batches too'),
  supported(
    'parentShardPollIntervalMillis',
    '10000',
    'how often a child shard checks whether its parents are done',
  ),
  supported(
    'shardSyncIntervalMillis',
    '60000',
    'how often shards without a lease are looked for, and finished parents cleaned up',
  ),
  supported('shutdownGraceMillis', '20000', 'how long a graceful stop may take before children are killed'),
  supported(
    'timeoutInSeconds',
    'unset (wait forever)',
    'the longest wait for one child message; on timeout only that child is ended',
  ),
  supported(
    'taskBackoffTimeMillis',
    '500',
    'first wait before retrying a failed child action (doubles up to kcl.childRestartMaxBackoffMillis)',
  ),
  supported('processingLanguage', 'unset', 'logged at start'),
  supported(
    'metricsLevel',
    'DETAILED (NONE when kinesisEndpoint is set)',
    'NONE, SUMMARY or DETAILED: the CloudWatch metrics published (namespace applicationName)',
  ),
  supported('metricsBufferTimeMillis', '10000', 'how long metrics accumulate before they are published'),
  supported('metricsMaxQueueSize', '10000', 'the most distinct metrics buffered; more are dropped'),
  supported(
    'retrievalMode',
    'DEFAULT',
    'FANOUT (enhanced fan-out), POLLING (GetRecords) or DEFAULT: fan-out unless a polling key is set, as in Java',
  ),
  supported(
    'fanoutConfig.consumerName',
    'applicationName',
    'the stream consumer that fan-out registers (when missing) and subscribes with',
  ),
  supported(
    'fanoutConfig.consumerArn',
    'unset',
    'an already registered stream consumer, used as given: nothing is registered',
  ),
  supported(
    'cleanupLeasesUponShardCompletion',
    'true',
    'finished parent leases are deleted once their children started; false cannot be honoured',
  ),
  supported(
    'validateSequenceNumberBeforeCheckpointing',
    'true',
    'accepted; checkpoints are always validated',
  ),
  noEffect('maxActiveThreads', '0', 'children are served by the event loop, not a thread pool'),
  noEffect('ignoreUnexpectedChildShards', 'false', 'child shards are always followed through their lineage'),
  noEffect(
    'skipShardSyncAtWorkerInitializationIfLeasesExist',
    'false',
    'the initial shard sync only runs when the application has no leases',
  ),
  noEffect('initialLeaseTableReadCapacity', '10', 'tables are created PAY_PER_REQUEST'),
  noEffect('initialLeaseTableWriteCapacity', '10', 'tables are created PAY_PER_REQUEST'),
  noEffect('leaseTableScanTotalSegments', '0', 'leases are read with one scan'),
  noEffect('maxLeaseRenewalThreads', '20', 'renewals run concurrently on the event loop'),
  noEffect('listShardsBackoffTimeInMillis', '1500', 'Kinesis calls back off on their own'),
  noEffect('maxListShardsRetryAttempts', '50', 'Kinesis calls are retried until they succeed'),
  noEffect('enablePriorityLeaseAssignment', 'true', 'leases are balanced by count'),
  noEffect('leaseTableDeletionProtectionEnabled', 'false', 'set it on the table yourself'),
  noEffect('leaseTablePitrEnabled', 'false', 'set it on the table yourself'),
  noEffect('schedulerInitializationBackoffTimeMillis', '1000', 'start-up calls back off on their own'),
  noEffect('shardPrioritization', 'NoOp', 'shards are not prioritised'),
  noEffect('clientVersionConfig', 'CLIENT_VERSION_CONFIG_3X', 'leases are balanced by count, like KCL 2.x'),
  noEffect('migrateAllEntitiesToLeaseTable', 'false', 'no KCL 3.x coordinator entities are kept'),
  noEffect('tableMigrationCompleteBakeTimeSeconds', '86400', 'no KCL 3.x coordinator entities are kept'),
  noEffect('logWarningForTaskAfterMillis', 'unset', 'use timeoutInSeconds'),
  noEffect('metricsEnabledDimensions', 'all', 'metrics are published with all their dimensions'),
  noEffect(
    'retryGetRecordsInSeconds',
    'unset',
    'GetRecords is retried with backoff (as a polling key it still makes retrievalMode DEFAULT poll)',
  ),
  noEffect(
    'maxGetRecordsThreadPool',
    'unset',
    'GetRecords runs on the event loop (as a polling key it still makes retrievalMode DEFAULT poll)',
  ),
  noEffect(
    'millisBehindLatestThresholdForReducedTps',
    '0',
    'the poll interval is fixed (as a polling key it still makes retrievalMode DEFAULT poll)',
  ),
  noEffect('fanoutConfig.maxDescribeStreamSummaryRetries', '10', FANOUT_RETRIES),
  noEffect('fanoutConfig.maxDescribeStreamConsumerRetries', '10', FANOUT_RETRIES),
  noEffect('fanoutConfig.registerStreamConsumerRetries', '10', FANOUT_RETRIES),
  noEffect('fanoutConfig.retryBackoffMillis', '1000', FANOUT_RETRIES),
  noEffect(
    'gracefulLeaseHandoffTimeoutMillis',
    '30000',
    'leases are handed over by release on a graceful stop',
  ),
  noEffect('isGracefulLeaseHandoffEnabled', 'true', 'leases are handed over by release on a graceful stop'),
  extension('kcl.leaseStore', 'dynamodb', 'dynamodb (the Java table) or sql'),
  extension(
    'kcl.sqlUrl',
    'the KCL_SQL_URL environment variable',
    'postgres://…, mysql://… or sqlite:<file> for kcl.leaseStore = sql',
  ),
  extension('kcl.sqlTableName', 'kcl_leases', 'the SQL lease table'),
  extension(
    'kcl.exitOnChildFailure',
    'false',
    'true: a failing child stops the daemon with exit code 1, as the Java daemon does',
  ),
  extension(
    'kcl.childExitTimeoutMillis',
    '5000',
    'after closing a child stdin, how long to wait for it to exit before SIGTERM',
  ),
  extension('kcl.childKillTimeoutMillis', '2000', 'after SIGTERM, how long to wait before SIGKILL'),
  extension(
    'kcl.childRestartMaxBackoffMillis',
    '30000',
    'the longest wait between restarts of a failing child',
  ),
  extension(
    'kcl.childFailureLimit',
    '5',
    'child failures in a row without progress after which the shard lease is released for another worker (0: never)',
  ),
  extension(
    'kcl.replayBufferMaxBytes',
    '67108864',
    'record bytes kept per shard to replay to a restarted child',
  ),
  extension(
    'kcl.replayBufferTotalMaxBytes',
    '268435456',
    'record bytes kept for replay by all the shards of the worker together',
  ),
  extension('kcl.logLevel', 'info', 'debug, info, warn or error'),
];

/** Key prefixes of Java settings that have no effect here (KCL 3.x worker metrics and coordinator tables). */
export const NO_EFFECT_PREFIXES: readonly { readonly prefix: string; readonly reason: string }[] = [
  { prefix: 'workerMetrics', reason: 'KCL 3.x worker metrics are not kept' },
  { prefix: 'coordinatorState', reason: 'KCL 3.x coordinator tables are not used' },
  { prefix: 'inMemoryWorkerMetrics', reason: 'KCL 3.x worker metrics are not kept' },
  { prefix: 'noOfPersistedMetricsPerWorkerMetrics', reason: 'KCL 3.x worker metrics are not kept' },
  { prefix: 'disableWorkerMetrics', reason: 'KCL 3.x worker metrics are not kept' },
  { prefix: 'maxThroughputPerHostKBps', reason: 'leases are balanced by count' },
  { prefix: 'dampeningPercentage', reason: 'leases are balanced by count' },
  { prefix: 'reBalanceThresholdPercentage', reason: 'leases are balanced by count' },
  { prefix: 'allowThroughputOvershoot', reason: 'leases are balanced by count' },
  { prefix: 'varianceBalancingFrequency', reason: 'leases are balanced by count' },
  { prefix: 'staleWorkerMetricsEntryCleanupDuration', reason: 'KCL 3.x worker metrics are not kept' },
];

const BY_KEY = new Map(PROPERTY_DEFINITIONS.map((definition) => [definition.key, definition]));

/** The definition of a key, with the credentials keys matched case-insensitively (as Java does). */
export function findPropertyDefinition(key: string): PropertyDefinition | undefined {
  return BY_KEY.get(canonicalPropertyKey(key));
}

/** `AWSCredentialsProvider`, `awscredentialsprovider`… → `AwsCredentialsProvider` (and the DynamoDB / CloudWatch ones). */
export function canonicalPropertyKey(key: string): string {
  switch (key.toLowerCase()) {
    case 'awscredentialsprovider':
      return 'AwsCredentialsProvider';
    case 'awscredentialsproviderdynamodb':
      return 'AwsCredentialsProviderDynamoDB';
    case 'awscredentialsprovidercloudwatch':
      return 'AwsCredentialsProviderCloudWatch';
    default:
      return key;
  }
}

/** The known key closest to a misspelt one, for "did you mean". */
export function suggestPropertyKey(key: string): string | null {
  return closestName(
    key,
    PROPERTY_DEFINITIONS.map((definition) => definition.key),
  );
}
