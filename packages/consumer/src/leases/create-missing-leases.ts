import type { KclEvent, KclEventOf, LeaseInit, LeaseStore } from '@kcl/core';
import { streamIdentifierOfLeaseKey } from '@kcl/shard-graph';

/** Why leases are created: the application's first leases, the hole audit, or a shard's end. */
export type LeaseCreationCause = KclEventOf<'leases-created'>['cause'];

export interface LeaseCreation {
  readonly store: LeaseStore;
  readonly workerId: string;
  readonly emit: (event: KclEvent) => void;
  readonly cause: LeaseCreationCause;
}

/**
 * Creates every lease of `leases` that does not exist yet, one at a time, and announces the ones this
 * call created in one `leases-created` event (none: no event). A lease that exists already — another
 * worker created it first — is left as it is: `create` refuses an existing key. A failing store call
 * rejects at once, without an event; the caller tries again later, and the next run creates only what
 * is still missing. A multi-stream lease (its key carries the stream identifier) is created with its
 * `streamIdentifier`, which DynamoDB stores as the Java KCL's `streamName` and `shardId`. Returns the
 * keys created.
 */
export async function createMissingLeases(
  leases: readonly LeaseInit[],
  { store, workerId, emit, cause }: LeaseCreation,
): Promise<string[]> {
  const created: string[] = [];
  for (const init of leases) {
    const streamIdentifier = init.streamIdentifier ?? streamIdentifierOfLeaseKey(init.leaseKey) ?? null;
    const result = await store.leases.create(
      streamIdentifier === null ? init : { ...init, streamIdentifier },
    );
    if (result.ok) created.push(init.leaseKey);
  }
  if (created.length > 0) emit({ type: 'leases-created', workerId, leaseKeys: created, cause });
  return created;
}
