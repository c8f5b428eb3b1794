export type { LeaseStoreKind, LeaseStoreLocation } from './lease-store-location.js';
export {
  checkLeaseStoreLocation,
  describeLeaseStoreLocation,
  isLocalEndpoint,
  LEASE_STORE_URL_FORMS,
  parseLeaseStoreUrl,
  redactUrl,
} from './lease-store-location.js';
export type { OpenLeaseStoreOptions } from './open-lease-store.js';
export { openLeaseStore } from './open-lease-store.js';
