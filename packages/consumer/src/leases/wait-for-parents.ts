import type { Lease } from '@kcl/core';
import { checkParentReadiness, parentLeaseKeysOf } from '@kcl/shard-graph';
import { Backoff } from '../backoff.js';
import type { ShardRun } from '../processing/shard-run.js';

/**
 * Waits until the lease's shard may start (ARCHITECTURE §5): every parent lease still present is at
 * SHARD_END. Polls every `parentPollIntervalMs`; a failed read is retried with backoff. Resolves true
 * when the parents are done, false when the consumer halts first.
 */
export async function waitForParents(run: ShardRun): Promise<boolean> {
  const { held, store, clock, settings } = run;
  const parentKeys = parentLeaseKeysOf(held.lease);
  if (parentKeys.length === 0) return true;
  const backoff = new Backoff({ initialMs: 500, maxMs: settings.parentPollIntervalMs, random: run.random });
  while (!run.halted()) {
    try {
      const parents = new Map<string, Lease | null>();
      for (const parentKey of parentKeys) parents.set(parentKey, await store.leases.get(parentKey));
      if (checkParentReadiness(held.lease, (key) => parents.get(key)).ready) return true;
      await clock.sleep(settings.parentPollIntervalMs, run.haltSignal);
    } catch (error) {
      run.logger.warn('reading parent leases failed', { leaseKey: run.leaseKey, error });
      await clock.sleep(backoff.next(), run.haltSignal);
    }
  }
  return false;
}
