import type { LeaseStore, StoreCallOptions } from '@kcl/core';
import { type ApplicationStatus, applicationStatus } from './application-status.js';

/** How old a worker's heartbeat may be before the status takes it as gone: the default lease expiry. */
export const DEFAULT_WORKER_EXPIRY_MS = 45_001;

export interface ReadStatusOptions extends StoreCallOptions {
  /** A worker whose last heartbeat is older is taken as gone (default `DEFAULT_WORKER_EXPIRY_MS`). */
  readonly workerExpiryMs?: number;
  /** The reader's wall clock (default `Date.now`). */
  readonly now?: () => number;
}

/**
 * Reads an application's lease table and worker registry and returns what `kcl status` shows: shards,
 * workers and problems (see `applicationStatus`).
 *
 * ```ts
 * const store = await openLeaseStore('sqlite:leases.db', { applicationName: 'billing' });
 * const status = await readApplicationStatus(store);
 * for (const shard of status.shards) console.log(shard.leaseKey, shard.owner, shard.millisBehindLatest);
 * await store.close();
 * ```
 */
export async function readApplicationStatus(
  store: LeaseStore,
  options: ReadStatusOptions = {},
): Promise<ApplicationStatus> {
  const call = options.signal === undefined ? {} : { signal: options.signal };
  const [scan, workers] = await Promise.all([store.admin.scan(call), store.workers.list(call)]);
  return applicationStatus({
    applicationName: store.applicationName,
    store: store.description,
    scan,
    workers,
    now: (options.now ?? Date.now)(),
    workerExpiryMs: options.workerExpiryMs ?? DEFAULT_WORKER_EXPIRY_MS,
  });
}
