export type { AwsClientSettings } from './aws-clients.js';
export {
  createClientForEndpoint,
  createCloudWatchClient,
  createDynamoClient,
  createKinesisClient,
  isLoopbackEndpoint,
  kinesisHttpVersion,
  PLACEHOLDER_CREDENTIALS,
} from './aws-clients.js';
export type { ChildCheckpointerOptions } from './child-checkpointer.js';
export { ChildCheckpointer } from './child-checkpointer.js';
export { ChildFailureBudget, DEFAULT_CHILD_FAILURE_LIMIT } from './child-failure-budget.js';
export type { ChildLauncher, ChildLaunchOptions, ChildSignaller } from './child-process-launcher.js';
export { launchChildProcess, signalChildProcess } from './child-process-launcher.js';
export type { ChildExit, ChildSessionOptions } from './child-session.js';
export { ChildSession } from './child-session.js';
export type { ArgumentsResult, BootstrapArguments, MultiLangArguments } from './cli-arguments.js';
export {
  BOOTSTRAP_USAGE,
  MULTILANG_USAGE,
  parseBootstrapArguments,
  parseMultiLangArguments,
} from './cli-arguments.js';
export type { CredentialsResolution, CredentialsSource } from './credentials-provider.js';
export { DEFAULT_CREDENTIALS, resolveCredentialsProvider } from './credentials-provider.js';
export type { ExecutableCommand, ExecutableLookup, ResolvedExecutable } from './executable-command.js';
export { findOnPath, resolveExecutableCommand, splitExecutableName } from './executable-command.js';
export type {
  LeaseStoreConfiguration,
  MetricsConfiguration,
  MultiLangConfiguration,
  MultiLangConfigurationContext,
  MultiLangTimings,
  ResolvedMultiLangConfiguration,
  RetrievalConfiguration,
  RetrievalModeProperty,
} from './multilang-configuration.js';
export { MULTILANG_DEFAULTS } from './multilang-configuration.js';
export type {
  MultiLangDaemon,
  MultiLangDaemonOptions,
  MultiLangDaemonStopOptions,
} from './multilang-daemon.js';
export { createMultiLangDaemon } from './multilang-daemon.js';
export type { ChildFailureReason, ShardGiveUpReason } from './multilang-errors.js';
export { MultiLangChildError, MultiLangShardGivenUpError } from './multilang-errors.js';
export type {
  ActionMessage,
  CheckpointErrorName,
  ChildLine,
  DaemonMessage,
  MultiLangAction,
  RecordMessage,
} from './multilang-protocol.js';
export {
  checkpointErrorName,
  decodeChildLine,
  encodeDaemonMessage,
  initializeMessage,
  processRecordsMessage,
  recordMessage,
} from './multilang-protocol.js';
export type { MultiLangProcessorOptions } from './multilang-record-processor.js';
export {
  createMultiLangProcessorFactory,
  MultiLangShardProcessor,
} from './multilang-record-processor.js';
export type { ParsedProperties, PropertyEntry } from './properties-parser.js';
export { parseProperties, readPropertiesFile } from './properties-parser.js';
export type { PropertyDefinition, PropertySupport } from './property-catalogue.js';
export {
  canonicalPropertyKey,
  findPropertyDefinition,
  PROPERTY_DEFINITIONS,
  suggestPropertyKey,
} from './property-catalogue.js';
export type { PropertyInput } from './property-reader.js';
export type { ReplayBatch, ReplayLimit } from './replay-buffer.js';
export { ReplayBuffer, ReplayMemoryBudget, recordsAfter } from './replay-buffer.js';
export { resolveMultiLangConfiguration } from './resolve-multilang-configuration.js';
