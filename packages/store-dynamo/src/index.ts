export type { DecodedLeaseRow, DynamoItem, MultiStreamParts } from './dynamo-item-codec.js';
export {
  decodeLeaseRow,
  encodeLeaseItem,
  LEASE_ATTRIBUTES,
  LEASE_ENTITY_TYPE,
  multiStreamParts,
} from './dynamo-item-codec.js';
export type { DynamoLeaseStore, DynamoLeaseStoreAdministration } from './dynamo-lease-store.js';
export { createDynamoLeaseStore } from './dynamo-lease-store.js';
export type {
  DynamoLeaseStoreOptions,
  DynamoLeaseTableLayout,
  DynamoTableBilling,
} from './dynamo-lease-store-options.js';
export { DEFAULT_WORKER_TABLE_SUFFIX } from './dynamo-lease-store-options.js';
export type { DynamoLeaseTableScan } from './dynamo-lease-table.js';
export type { DynamoTableDefinition } from './dynamo-table-schema.js';
export {
  createTableCommandLine,
  createTableInput,
  leaseTableDefinition,
  workerTableDefinition,
} from './dynamo-table-schema.js';
export { MIGRATION_MARKER_ENTRY, WORKER_ATTRIBUTES, WORKER_ENTRY_PREFIX } from './dynamo-worker-registry.js';
