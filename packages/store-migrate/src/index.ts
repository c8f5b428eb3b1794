export { abortLiveMigration } from './abort-live-migration.js';
export type {
  CutOverOptions,
  CutOverReport,
  CutOverStage,
  PreflightReport,
} from './cut-over-live-migration.js';
export { cutOverLiveMigration, preflightCutOver } from './cut-over-live-migration.js';
export type { LiveMigrationOptions, LiveMigrationProgress, LiveMigrationState } from './live-migration.js';
export { readLiveMigrationState } from './live-migration.js';
export type { LiveMigrationStatus, LiveWorkerStatus } from './live-migration-status.js';
export { liveMigrationStatus } from './live-migration-status.js';
export type { CopyCounts, MigrationOutcome, MigrationReport } from './migrate-leases.js';
export { migrateLeases, verifyLeaseCopy } from './migrate-leases.js';
export type {
  MigrateLeasesOptions,
  MigrationPlanSummary,
  MigrationProgress,
} from './migrate-leases-options.js';
export type { MigratingLeaseStore, MigratingLeaseStoreOptions } from './migrating-lease-store.js';
export { createMigratingLeaseStore } from './migrating-lease-store.js';
export type { StoreMigrateErrorCode } from './migration-errors.js';
export {
  LiveMigrationRefusedError,
  MigrationInterruptedError,
  MigrationTargetChangingError,
} from './migration-errors.js';
export type { LiveMigrationPhase, MarkerTag, SourceMarkerReading } from './migration-phase.js';
export {
  isSealedLease,
  LIVE_MIGRATION_PHASES,
  MIGRATING_WORKER_METADATA,
  markerTag,
  markerTarget,
  PLACEHOLDER_COUNTER,
  pendingMarkerText,
  phaseMarkerText,
  readSourceMarker,
  SEAL_OWNER,
} from './migration-phase.js';
export type { MoveLeaseOptions, MoveOutcome, TakenSeal, TargetRowVerdict } from './move-lease.js';
export { judgeTargetRow, moveLease } from './move-lease.js';
export { PACKAGE_NAME } from './package-name.js';
export type {
  LeaseCopyAction,
  LeaseDifference,
  LeaseField,
  LeaseSetComparison,
  PlannedLeaseCopy,
} from './plan-lease-copy.js';
export {
  compareLeaseSets,
  exactCopyOf,
  LEASE_FIELDS,
  leaseFieldDifferences,
  offlineCopyOf,
  planLeaseCopy,
  targetAheadReason,
} from './plan-lease-copy.js';
export type { LeaseSourceSnapshot, UnreadableLeaseRow } from './read-lease-source.js';
export { readLeaseSource, readLeasesIfPresent, readMigrationMarker } from './read-lease-source.js';
export type { CopyRepair, RepairLockWatch, RepairTargetCopyOptions } from './repair-target-copy.js';
export { repairTargetCopy } from './repair-target-copy.js';
export type { LiveMigrationStartReport } from './start-live-migration.js';
export { startLiveMigration } from './start-live-migration.js';
export type { MirrorStatistics } from './target-mirror.js';
export type {
  LeaseActivity,
  SourceActivity,
  WatchSourceActivityOptions,
  WorkerActivity,
} from './watch-source-activity.js';
export { listWorkersIfPresent, watchSourceActivity } from './watch-source-activity.js';
