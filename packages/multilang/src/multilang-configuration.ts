import type { InitialPosition, MetricsLevel } from '@kcl/consumer';
import type { LogLevel } from '@kcl/core';
import type { CredentialsSource } from './credentials-provider.js';
import type { ExecutableCommand } from './executable-command.js';

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

/** `retrievalMode` as written (unset is `DEFAULT`). */
export type RetrievalModeProperty = 'DEFAULT' | 'POLLING' | 'FANOUT';

/**
 * How shards are read, and why: `retrievalMode` and the polling keys that were set decide it as the
 * Java daemon decides (`DEFAULT` is fan-out unless a polling key is set).
 */
export type RetrievalConfiguration =
  | {
      /** GetRecords, every `idleTimeBetweenReadsInMillis`. */
      readonly mode: 'polling';
      readonly retrievalMode: RetrievalModeProperty;
      /** The polling keys set in the file, in catalogue order. */
      readonly pollingKeys: readonly string[];
    }
  | {
      /** Enhanced fan-out: a registered stream consumer, records pushed by SubscribeToShard. */
      readonly mode: 'fanout';
      readonly retrievalMode: RetrievalModeProperty;
      readonly pollingKeys: readonly string[];
      /** `fanoutConfig.consumerName`, default `applicationName`: registered when missing. */
      readonly consumerName: string;
      /** `fanoutConfig.consumerArn`: an already registered consumer, used as given. */
      readonly consumerArn: string | null;
    };

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
  readonly retrieval: RetrievalConfiguration;
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
