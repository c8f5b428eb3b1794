import { sequence, shardId } from '../case-fixtures.js';
import { caseGroup } from '../conformance-case.js';
import { leaseSnapshot } from '../lease-snapshot.js';

/** Releasing leases. */
export const releaseCases = caseGroup('release', {
  'release clears the owner, keeps the checkpoint, increments the counter': async ({
    store,
    assert,
    check,
  }) => {
    const held = await check.createTaken(store, shardId(1));
    const checkpointed = check.ok(
      await store.leases.checkpoint(shardId(1), held.leaseCounter, { checkpoint: sequence('777', 3) }),
      'checkpoint',
    );
    const released = check.ok(await store.leases.release(shardId(1), checkpointed.leaseCounter), 'release');
    assert.equal(leaseSnapshot(released), {
      ...leaseSnapshot(checkpointed),
      owner: null,
      leaseCounter: checkpointed.leaseCounter + 1,
    });
    await check.stored(store, released);
    const retaken = check.ok(
      await store.leases.take(shardId(1), released.leaseCounter, 'worker-b'),
      'take after release',
    );
    assert.equal(retaken.owner, 'worker-b');
  },
  'release with a stale counter or of an absent lease loses': async ({ store, check }) => {
    const held = await check.createTaken(store, shardId(1));
    check.lost(
      await store.leases.release(shardId(1), held.leaseCounter - 1),
      'counter-mismatch',
      'stale release',
    );
    check.lost(await store.leases.release(shardId(404), 0), 'not-found', 'release absent');
    await check.stored(store, held);
  },
});
