import type { Clock, LeaseStore } from '@kcl/core';
import { LeaseStoreError } from '@kcl/core';
import { withDeadline } from './deadline.js';

/** The store calls the runtime makes on its hot path and in its loops; each gets the deadline. */
const BOUNDED_OPERATIONS = [
  'createLeaseIfAbsent',
  'getLease',
  'listLeases',
  'renewLease',
  'renewLeases',
  'takeLease',
  'releaseLease',
  'updateCheckpoint',
  'updateLeaseMeta',
  'deleteLease',
  'heartbeatWorker',
  'listWorkers',
  'removeWorker',
  'getMigrationMarker',
  'setMigrationMarker',
] as const satisfies ReadonlyArray<keyof LeaseStore>;

/**
 * The store as the runtime uses it: every call but `ensureSchema` (which may create tables and wait
 * for them) must answer within `timeoutMs`, or it fails with a retryable `LeaseStoreError`. A hung
 * call therefore cannot stop renewal, expiry or shutdown; a late answer is ignored (a write it made
 * may still have applied, which the lease keeper allows for).
 */
export function withStoreDeadlines(store: LeaseStore, clock: Clock, timeoutMs: number): LeaseStore {
  const bounded: Record<string, unknown> = {
    specificationVersion: store.specificationVersion,
    applicationName: store.applicationName,
    capabilities: store.capabilities,
    description: store.description,
    ensureSchema: () => store.ensureSchema(),
  };
  for (const operation of BOUNDED_OPERATIONS) {
    const method = store[operation] as (...args: unknown[]) => Promise<unknown>;
    bounded[operation] = (...args: unknown[]) =>
      withDeadline(
        clock,
        timeoutMs,
        () => method.apply(store, args),
        () =>
          new LeaseStoreError(
            '@kcl/consumer',
            `@kcl/consumer: ${operation} on ${store.description} did not answer within ${timeoutMs} ms (storeCallTimeoutMs); treating it as failed`,
            { retryable: true, code: 'LEASE_STORE_UNAVAILABLE' },
          ),
      );
  }
  return bounded as unknown as LeaseStore;
}
