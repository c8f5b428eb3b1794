export type { LeaseStoreKind, LeaseStoreLocation, LeaseStoreOptionNames } from './lease-store-location.js';
export {
  checkLeaseStoreLocation,
  describeLeaseStoreLocation,
  isLocalEndpoint,
  LEASE_STORE_URL_FORMS,
  leaseStoreLocationProblems,
  parseLeaseStoreUrl,
  redactUrl,
} from './lease-store-location.js';
export type { OpenLeaseStoreOptions } from './open-lease-store.js';
export { openLeaseStore } from './open-lease-store.js';
