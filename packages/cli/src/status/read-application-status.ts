import type { KinesisClient } from '@aws-sdk/client-kinesis';
import type { LeaseStore, StoreCallOptions } from '@kcl/core';
import { streamIdentifierOfLeaseKey } from '@kcl/shard-graph';
import { type ApplicationStatus, applicationStatus } from './application-status.js';
import { checkStreamPresence, type StreamPresenceCache } from './stream-presence.js';

export { DEFAULT_WORKER_EXPIRY_MS } from './application-status.js';

export interface ReadStatusOptions extends StoreCallOptions {
  /**
   * A worker whose last heartbeat is older is taken as gone, whatever it publishes (default: per
   * worker, see `WorkerStatus.expiryMs`).
   */
  readonly workerExpiryMs?: number | undefined;
  /** The reader's wall clock (default `Date.now`). */
  readonly now?: () => number;
  /**
   * A Kinesis client in the streams' account and region: the streams of a multi-stream application's
   * leases are looked up, and leases of deleted streams reported. Without it they are not checked.
   */
  readonly kinesis?: Pick<KinesisClient, 'send'>;
  /** Instead of `kinesis` for repeated reads: the streams are looked up through this cache. */
  readonly streamPresence?: StreamPresenceCache;
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
  const identifiers = scan.leases.flatMap(
    (lease) => lease.streamIdentifier ?? streamIdentifierOfLeaseKey(lease.leaseKey) ?? [],
  );
  const streams =
    identifiers.length === 0
      ? undefined
      : options.streamPresence !== undefined
        ? await options.streamPresence.check(identifiers)
        : options.kinesis === undefined
          ? undefined
          : await checkStreamPresence(options.kinesis, identifiers);
  return applicationStatus({
    ...(streams === undefined ? {} : { streams }),
    applicationName: store.applicationName,
    store: store.description,
    scan,
    workers,
    now: (options.now ?? Date.now)(),
    ...(options.workerExpiryMs === undefined ? {} : { workerExpiryMs: options.workerExpiryMs }),
  });
}
