export { seededRandom } from '@kcl/core';
export type { ProcessingSpan } from './concurrent-owners.js';
export { concurrentOwners } from './concurrent-owners.js';
export type { DynaliteOptions, KinesisLocalOptions, RunningEmulator } from './emulators.js';
export { freePort, LOCAL_CREDENTIALS, LOCAL_REGION, startDynalite, startKinesisLocal } from './emulators.js';
export type {
  FailureOptions,
  FaultyLeaseStore,
  InjectedFault,
  LeaseStoreOperation,
} from './faulty-lease-store.js';
export { createFaultyLeaseStore, FaultController } from './faulty-lease-store.js';
export type { FleetTiming } from './fleet-timings.js';
export { FLEET_TIMINGS } from './fleet-timings.js';
export type {
  JavaAttributeValue,
  JavaLeaseFields,
  JavaLeaseTableClient,
  JavaLeaseTableItem,
} from './java-lease-table.js';
export {
  createJavaLeaseTable,
  JAVA_SAMPLE,
  javaKcl3OtherRows,
  javaLeaseItem,
  javaShardId,
  javaSplitAndMergeLeases,
  putJavaTableItems,
} from './java-lease-table.js';
export type { ManualClockOptions } from './manual-clock.js';
export { ManualClock, settle } from './manual-clock.js';
export type {
  ApplicationState,
  MemoryLeaseStore,
  MemoryLeaseStoreOptions,
  MemoryTransaction,
} from './memory-lease-store.js';
export { createMemoryLeaseStore, MemoryLeaseTable } from './memory-lease-store.js';
export type { ServiceCheck } from './services.js';
export { checkService, isCi } from './services.js';
export { waitUntil } from './wait-until.js';
