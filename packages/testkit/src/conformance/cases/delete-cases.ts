import { sequence, shardId } from '../case-fixtures.js';
import { caseGroup } from '../conformance-case.js';

/** Deleting leases. */
export const deleteCases = caseGroup('delete', {
  'delete removes the lease; deleting again is fine; the key can be created anew': async ({
    store,
    assert,
    check,
  }) => {
    await check.createTaken(store, shardId(1));
    await check.create(store, { leaseKey: shardId(2) });
    await store.leases.delete(shardId(1));
    assert.equal(await store.leases.get(shardId(1)), null, 'gone');
    assert.equal(
      (await store.leases.list()).map((lease) => lease.leaseKey),
      [shardId(2)],
      'not listed',
    );
    await store.leases.delete(shardId(1));
    await store.leases.delete(shardId(404));
    const again = await check.create(store, { leaseKey: shardId(1) });
    assert.equal([again.leaseCounter, again.owner], [0, null], 'recreated fresh');
  },
  'conditional writes on a deleted lease lose with not-found': async ({ store, assert, check }) => {
    const held = await check.createTaken(store, shardId(1));
    await store.leases.delete(shardId(1));
    check.lost(await store.leases.renew(shardId(1), held.leaseCounter), 'not-found', 'renew');
    check.lost(await store.leases.take(shardId(1), held.leaseCounter, 'w'), 'not-found', 'take');
    check.lost(await store.leases.release(shardId(1), held.leaseCounter), 'not-found', 'release');
    check.lost(
      await store.leases.checkpoint(shardId(1), held.leaseCounter, { checkpoint: sequence('1') }),
      'not-found',
      'checkpoint',
    );
    assert.equal(await store.leases.get(shardId(1)), null, 'still absent');
  },
});
