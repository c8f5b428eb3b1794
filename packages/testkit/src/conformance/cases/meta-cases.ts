import type { Lease } from '@kcl/core';
import { hashKeyRange, MAX_HASH_KEY } from '@kcl/core';
import { shardId } from '../case-fixtures.js';
import { caseGroup } from '../conformance-case.js';
import { leaseSnapshot } from '../lease-snapshot.js';

/** Lease metadata: lineage and hash key ranges. */
export const metaCases = caseGroup('meta', {
  'child shard ids are recorded without touching the counter or owner': async ({ store, assert, check }) => {
    const held = await check.createTaken(store, shardId(1));
    const updated = await store.leases.updateMeta(shardId(1), { childShardIds: [shardId(3), shardId(2)] });
    assert.equal(leaseSnapshot(updated), { ...leaseSnapshot(held), childShardIds: [shardId(2), shardId(3)] });
    await check.stored(store, updated as Lease);
    check.ok(
      await store.leases.renew(shardId(1), held.leaseCounter),
      'renew with the old counter still works',
    );
  },
  'the hash range is recorded; an absent lease gives null and is not created': async ({
    store,
    assert,
    check,
  }) => {
    const lease = await check.create(store, { leaseKey: shardId(1) });
    const range = hashKeyRange(170141183460469231731687303715884105728n, MAX_HASH_KEY);
    const updated = await store.leases.updateMeta(shardId(1), { hashKeyRange: range });
    assert.equal(leaseSnapshot(updated), {
      ...leaseSnapshot(lease),
      hashKeyRange: `${range.startingHashKey}-${MAX_HASH_KEY}`,
    });
    assert.equal(await store.leases.updateMeta(shardId(404), { childShardIds: [shardId(5)] }), null);
    assert.equal(await store.leases.get(shardId(404)), null, 'not created');
  },
  'parent ids of a split and of a merge round-trip as sets': async ({ store, assert, check }) => {
    await check.create(store, { leaseKey: shardId(2), parentShardIds: [shardId(0)] });
    await check.create(store, { leaseKey: shardId(3), parentShardIds: [shardId(1), shardId(0)] });
    await check.create(store, { leaseKey: shardId(4), parentShardIds: [], childShardIds: [] });
    assert.equal((await store.leases.get(shardId(2)))?.parentShardIds, [shardId(0)]);
    assert.equal([...((await store.leases.get(shardId(3)))?.parentShardIds ?? [])].sort(), [
      shardId(0),
      shardId(1),
    ]);
    const empty = await store.leases.get(shardId(4));
    assert.equal([empty?.parentShardIds, empty?.childShardIds], [[], []]);
  },
  'hash ranges at both ends of 0 … 2^128 − 1 round-trip': async ({ store, assert, check }) => {
    const half = 1n << 127n;
    const ranges = [
      hashKeyRange(0n, 0n),
      hashKeyRange(0n, half - 1n),
      hashKeyRange(half, MAX_HASH_KEY),
      hashKeyRange(MAX_HASH_KEY, MAX_HASH_KEY),
      hashKeyRange(0n, MAX_HASH_KEY),
    ];
    for (const [index, range] of ranges.entries()) {
      await check.create(store, { leaseKey: shardId(index), hashKeyRange: range });
      const stored = await store.leases.get(shardId(index));
      assert.equal(stored?.hashKeyRange?.startingHashKey, range.startingHashKey, `start of range ${index}`);
      assert.equal(stored?.hashKeyRange?.endingHashKey, range.endingHashKey, `end of range ${index}`);
    }
  },
});
