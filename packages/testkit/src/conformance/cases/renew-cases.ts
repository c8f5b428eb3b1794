import type { LeaseWriteResult } from '@kcl/core';
import { inBatches, shardId } from '../case-fixtures.js';
import { caseGroup } from '../conformance-case.js';
import { leaseSnapshot } from '../lease-snapshot.js';

/** Renewals, one at a time and in batches. */
export const renewCases = caseGroup('renew', {
  'renew with the current counter increments it and changes nothing else': async ({
    store,
    assert,
    check,
  }) => {
    const held = await check.createTaken(store, shardId(1));
    const renewed = check.ok(await store.leases.renew(shardId(1), held.leaseCounter), 'renew');
    assert.equal(leaseSnapshot(renewed), { ...leaseSnapshot(held), leaseCounter: held.leaseCounter + 1 });
    await check.stored(store, renewed);
  },
  'renew with a stale counter loses with counter-mismatch': async ({ store, check }) => {
    const held = await check.createTaken(store, shardId(1));
    check.lost(
      await store.leases.renew(shardId(1), held.leaseCounter - 1),
      'counter-mismatch',
      'stale renew',
    );
    check.lost(
      await store.leases.renew(shardId(1), held.leaseCounter + 1),
      'counter-mismatch',
      'future renew',
    );
    await check.stored(store, held);
  },
  'renew of an absent lease loses with not-found': async ({ store, check }) => {
    check.lost(await store.leases.renew(shardId(404), 0), 'not-found', 'renew absent');
  },
  'fifty renews in a row count to fifty': async ({ store, assert, check }) => {
    let lease = await check.create(store, { leaseKey: shardId(1) });
    for (let index = 0; index < 50; index++) {
      lease = check.ok(await store.leases.renew(shardId(1), lease.leaseCounter), `renew ${index}`);
    }
    assert.equal(lease.leaseCounter, 50);
    await check.stored(store, lease);
  },
  'renewLeases reports each lease in the order given': async ({ store, assert, check }) => {
    const a = await check.createTaken(store, shardId(1));
    const b = await check.createTaken(store, shardId(2));
    const c = await check.createTaken(store, shardId(3));
    const results = await store.leases.renewMany([
      { leaseKey: shardId(3), leaseCounter: c.leaseCounter },
      { leaseKey: shardId(404), leaseCounter: 0 },
      { leaseKey: shardId(1), leaseCounter: a.leaseCounter + 5 },
      { leaseKey: shardId(2), leaseCounter: b.leaseCounter },
    ]);
    assert.equal(results.length, 4, 'one result per renewal');
    const [first, second, third, fourth] = results as [
      LeaseWriteResult,
      LeaseWriteResult,
      LeaseWriteResult,
      LeaseWriteResult,
    ];
    assert.equal(check.ok(first, 'renew 3').leaseKey, shardId(3));
    check.lost(second, 'not-found', 'renew absent');
    check.lost(third, 'counter-mismatch', 'renew stale');
    assert.equal(check.ok(fourth, 'renew 2').leaseCounter, b.leaseCounter + 1);
    await check.stored(store, a);
    assert.equal((await store.leases.get(shardId(3)))?.leaseCounter, c.leaseCounter + 1, 'lease 3 renewed');
  },
  'renewLeases renews 100 leases and accepts an empty list': async ({ store, assert, check }) => {
    const keys = Array.from({ length: 100 }, (_, index) => shardId(index));
    await inBatches(keys, 25, (leaseKey) => check.createTaken(store, leaseKey, 'worker-batch'));
    const held = await store.leases.list();
    const results = await store.leases.renewMany(
      held.map(({ leaseKey, leaseCounter }) => ({ leaseKey, leaseCounter })),
    );
    assert.equal(results.filter((result) => result.ok).length, 100, 'all renewed');
    const after = await store.leases.list();
    assert.ok(
      after.every((lease, index) => lease.leaseCounter === (held[index]?.leaseCounter ?? -1) + 1),
      'every counter moved by one',
    );
    assert.equal(await store.leases.renewMany([]), []);
  },
});
