export type { Clock, RandomSource } from './clock.js';
export { jitter, systemClock, systemRandom } from './clock.js';
export { closestName, editDistance } from './closest-name.js';
export type { CoreErrorCode, KclErrorCode, KclErrorOptions } from './errors.js';
export {
  ApplicationMigratedError,
  ConfigurationError,
  InvalidCheckpointError,
  InvalidHashKeyError,
  InvalidSequenceNumberError,
  isKclError,
  isRetryableError,
  KclError,
  LeaseDataError,
  LeaseLostError,
  LeaseStoreError,
  LeaseStoreSchemaMissingError,
} from './errors.js';
export type {
  KclEvent,
  KclEventListener,
  KclEventOf,
  KclEventType,
  LeaseHandoffStep,
  LeaseLossReason,
} from './events.js';
export type { SentinelCheckpoint } from './extended-sequence-number.js';
export {
  ExtendedSequenceNumber,
  isSentinelCheckpoint,
  SENTINEL_CHECKPOINTS,
} from './extended-sequence-number.js';
export type {
  LeaseStoreInterceptor,
  LeaseStoreOperation,
  SessionLivenessOperation,
  TransactionalCheckpointOperation,
} from './guard-lease-store.js';
export {
  guardLeaseStore,
  interceptLeaseStore,
  LEASE_STORE_OPERATIONS,
  offersTransactionalCheckpoint,
  SESSION_LIVENESS_OPERATIONS,
  StoreCallAbortedError,
} from './guard-lease-store.js';
export type { HashKeyRange } from './hash-key.js';
export {
  FULL_HASH_KEY_RANGE,
  hashKeyOfPartitionKey,
  hashKeyRange,
  hashKeyRangeContains,
  hashKeyRangesEqual,
  MAX_HASH_KEY,
  MIN_HASH_KEY,
  parseHashKey,
} from './hash-key.js';
export type { Lease, LeaseHandoff, LeaseInit } from './lease.js';
export {
  compareLeaseKeys,
  handoffProblem,
  handoffsEqual,
  isLeaseComplete,
  leaseFromInit,
  leasesEqual,
  shardIdOfLeaseKey,
  uniqueSorted,
} from './lease.js';
export type { LeaseFigures, PublishedLeaseFigures } from './lease-figures.js';
export {
  decodeLeaseFigures,
  encodeLeaseFigures,
  LEASE_FIGURES_MAX_LENGTH,
  LEASE_FIGURES_METADATA_KEY,
  LEASE_RENEW_INTERVAL_METADATA_KEY,
} from './lease-figures.js';
export type {
  CheckpointUpdate,
  LeaseBatchWriteResult,
  LeaseMetaUpdate,
  LeaseRenewal,
  LeaseRepository,
  LeaseStore,
  LeaseStoreAdministration,
  LeaseStoreCapabilities,
  LeaseTableScan,
  LeaseWriteResult,
  LostRaceReason,
  MigrationMarker,
  StoreCallOptions,
  TransactionalCheckpointDecision,
  TransactionalCheckpointResult,
  TransactionalCheckpointWork,
  UnreadableLeaseRow,
  WorkerListOptions,
  WorkerRecord,
  WorkerRegistry,
  WorkerSession,
} from './lease-store.js';
export type { LifecycleState, LifecycleSteps } from './lifecycle.js';
export { Lifecycle } from './lifecycle.js';
export type { LineLoggerOptions, LogFields, Logger, LogLevel } from './logger.js';
export { childLogger, createLineLogger, noopLogger } from './logger.js';
export { isNetworkError, NETWORK_ERROR_CODES } from './network-errors.js';
export type { NumberBounds, RetryDelays } from './option-problems.js';
export { OptionProblems } from './option-problems.js';
export { seededRandom, shuffled } from './random.js';
export { untilAborted } from './until-aborted.js';
