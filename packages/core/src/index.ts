export type { Clock, RandomSource } from './clock.js';
export { jitter, systemClock, systemRandom } from './clock.js';
export type { KclErrorCode, KclErrorOptions } from './errors.js';
export {
  ApplicationMigratedError,
  ConfigurationError,
  InvalidCheckpointError,
  InvalidHashKeyError,
  InvalidSequenceNumberError,
  isRetryableError,
  KclError,
  LeaseDataError,
  LeaseLostError,
  LeaseStoreError,
  LeaseStoreSchemaMissingError,
} from './errors.js';
export type { KclEvent, KclEventListener, KclEventOf, KclEventType, LeaseLossReason } from './events.js';
export type { SentinelCheckpoint } from './extended-sequence-number.js';
export {
  ExtendedSequenceNumber,
  isSentinelCheckpoint,
  SENTINEL_CHECKPOINTS,
} from './extended-sequence-number.js';
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
export type { Lease, LeaseInit } from './lease.js';
export {
  compareLeaseKeys,
  isLeaseComplete,
  leaseFromInit,
  leasesEqual,
  shardIdOfLeaseKey,
  uniqueSorted,
} from './lease.js';
export type {
  CheckpointUpdate,
  LeaseBatchWriteResult,
  LeaseMetaUpdate,
  LeaseRenewal,
  LeaseStore,
  LeaseStoreCapabilities,
  LeaseWriteResult,
  LostRaceReason,
  MigrationMarker,
  WorkerRecord,
} from './lease-store.js';
export type { LineLoggerOptions, LogFields, Logger, LogLevel } from './logger.js';
export { childLogger, createLineLogger, noopLogger } from './logger.js';
