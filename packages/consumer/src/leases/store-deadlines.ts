import type { Clock, LeaseStore } from '@kcl/core';
import { interceptLeaseStore, LeaseStoreError } from '@kcl/core';
import { linkSignals } from '../abort-link.js';
import { withDeadline } from '../deadline.js';

/**
 * The store as the runtime uses it: every call but `admin.ensureSchema` (which may create tables and
 * wait for them) must answer within `timeoutMs`, or it fails with a retryable `LeaseStoreError`; the
 * call's signal is aborted then, so a store that can cancel does. A hung call therefore cannot stop
 * renewal, expiry or shutdown; a late answer is ignored (a write it made may still have applied, which
 * the lease keeper allows for). `leases.checkpointInTransaction` has no deadline: the application's
 * writes run inside it, and the lease bounds it. A store's session liveness passes through, and the calls of a session
 * attached through it (`session.check`, `session.close`) get the same deadline.
 */
export function withStoreDeadlines(store: LeaseStore, clock: Clock, timeoutMs: number): LeaseStore {
  return interceptLeaseStore(store, (operation, options, call) => {
    // A transactional checkpoint runs the application's writes: it is bounded by the lease (its
    // signal aborts when the lease is lost or expires), not by the store call timeout.
    if (operation === 'admin.ensureSchema' || operation === 'leases.checkpointInTransaction') {
      return call(options);
    }
    return withDeadline(
      clock,
      timeoutMs,
      async (deadline) => {
        const link = linkSignals(options?.signal, deadline);
        try {
          return await call({ ...options, signal: link.signal });
        } finally {
          link.dispose();
        }
      },
      () =>
        new LeaseStoreError(
          '@kcl/consumer',
          `@kcl/consumer: ${operation} on ${store.description} did not answer within ${timeoutMs} ms (storeCallTimeoutMs); treating it as failed`,
          { retryable: true, code: 'LEASE_STORE_UNAVAILABLE' },
        ),
    );
  });
}
