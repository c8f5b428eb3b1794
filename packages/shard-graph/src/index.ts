export type {
  AuditedLease,
  HashRangeAuditorOptions,
  HashRangeAuditResult,
  HashRangeAuditStatus,
  HashRangeAuditVerdict,
} from './hash-range-audit.js';
export {
  auditHashRangeCoverage,
  DEFAULT_HOLE_CONFIDENCE_THRESHOLD,
  HashRangeAuditor,
} from './hash-range-audit.js';
export type { HashRangeCoverage } from './hash-range-coverage.js';
export { analyzeHashRangeCoverage, formatHashKeyRange } from './hash-range-coverage.js';
export type { InitialLeaseOptions, InitialLeasePlan } from './initial-leases.js';
export { planInitialLeases } from './initial-leases.js';
export type { InitialPosition, InitialPositionKind, InitialShardFilter } from './initial-position.js';
export { initialCheckpointOf, initialPositionKind, shardFilterFor } from './initial-position.js';
export type { LeaseDeletability, LeaseDeletionOptions, LeaseRetentionReason } from './lease-deletion.js';
export { checkLeaseDeletable, findDeletableLeases, hasLeaseStarted } from './lease-deletion.js';
export type { LeaseLookup } from './lease-key.js';
export {
  childLeaseKeysOf,
  leaseKeyForShard,
  leaseLookupOf,
  parentLeaseKeysOf,
  streamIdentifierOfLeaseKey,
} from './lease-key.js';
export type { MissingLeaseOptions, MissingLeasePlan } from './missing-leases.js';
export { planMissingLeases } from './missing-leases.js';
export type { ParentReadiness } from './parent-readiness.js';
export { checkParentReadiness } from './parent-readiness.js';
export type {
  ChildShardDescription,
  KinesisChildShardShape,
  KinesisHashKeyRangeShape,
  KinesisShardShape,
  ShardDescription,
} from './shard-description.js';
export {
  childShardFromKinesis,
  compareShardsByStart,
  isShardClosed,
  parentShardIdsOf,
  ShardDescriptionError,
  shardFromKinesis,
  shardsFromKinesis,
} from './shard-description.js';
export type { ShardEndInput, ShardEndPlan } from './shard-end.js';
export { DROP_BLOCKED_LEASE_PROBABILITY, planShardEnd } from './shard-end.js';
export { ShardLineage } from './shard-lineage.js';
