import { compareLeaseKeys } from '@kcl/core';
import { inBatches, LONG_SEQUENCE, sequence, shardId } from '../case-fixtures.js';
import { caseGroup } from '../conformance-case.js';

/** Reading leases back: get, list order, large lists, write results as stored. */
export const readCases = caseGroup('read', {
  'getLease of an absent key is null': async ({ store, assert }) => {
    assert.equal(await store.leases.get(shardId(404)), null);
  },
  'listLeases of a new application is empty': async ({ store, assert }) => {
    assert.equal(await store.leases.list(), []);
  },
  'listLeases returns every lease in lease-key order': async ({ store, assert, check }) => {
    const keys = [shardId(3), shardId(1), shardId(10), shardId(2), 'b', 'a:shardId-1', 'Z'];
    for (const leaseKey of keys) await check.create(store, { leaseKey });
    const listed = (await store.leases.list()).map((lease) => lease.leaseKey);
    assert.equal(listed, [...keys].sort(compareLeaseKeys));
  },
  'lists 1,000 leases, all fields intact': async ({ store, assert, check }) => {
    const keys = Array.from({ length: 1_000 }, (_, index) => shardId(index));
    await inBatches(keys, 50, (leaseKey) =>
      check.create(store, { leaseKey, checkpoint: sequence(`${LONG_SEQUENCE}${leaseKey.slice(-3)}`) }),
    );
    const listed = await store.leases.list();
    assert.equal(listed.length, 1_000, 'all 1,000 listed');
    assert.equal(
      listed.map((lease) => lease.leaseKey),
      [...keys].sort(compareLeaseKeys),
      'in key order',
    );
    const sample = listed[777];
    assert.equal(sample?.checkpoint.toString(), `${LONG_SEQUENCE}777`, 'checkpoint of lease 777');
  },
  'write results return the lease exactly as stored': async ({ store, check }) => {
    const created = await check.create(store, { leaseKey: shardId(1), parentShardIds: [shardId(0)] });
    await check.stored(store, created);
    const taken = check.ok(await store.leases.take(shardId(1), created.leaseCounter, 'w'), 'take');
    await check.stored(store, taken);
    const renewed = check.ok(await store.leases.renew(shardId(1), taken.leaseCounter), 'renew');
    await check.stored(store, renewed);
    const checkpointed = check.ok(
      await store.leases.checkpoint(shardId(1), renewed.leaseCounter, { checkpoint: sequence('12') }),
      'checkpoint',
    );
    await check.stored(store, checkpointed);
    const released = check.ok(await store.leases.release(shardId(1), checkpointed.leaseCounter), 'release');
    await check.stored(store, released);
  },
});
