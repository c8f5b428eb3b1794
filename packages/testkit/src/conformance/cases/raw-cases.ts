import { ExtendedSequenceNumber } from '@kcl/core';
import { shardId } from '../case-fixtures.js';
import { caseGroup } from '../conformance-case.js';
import { leaseSnapshot } from '../lease-snapshot.js';

/** What was persisted, read through the harness’s raw view. */
export const rawCases = caseGroup('raw', {
  'the stored row exists, names the lease, and disappears on delete': async ({
    store,
    harness,
    applicationName,
    assert,
    check,
  }) => {
    if (harness.readRawLease === undefined) {
      // Nothing to compare for adapters without a raw view; the typed round trips above still apply.
      assert.equal(typeof harness.createStore, 'function');
      return;
    }
    await check.createTaken(store, shardId(1), 'raw-owner');
    const row = await harness.readRawLease(applicationName, shardId(1));
    assert.ok(row !== null, 'a raw row exists');
    const values = JSON.stringify(row, (_key, value: unknown) =>
      typeof value === 'bigint' ? value.toString() : value,
    );
    assert.ok(values.includes(shardId(1)), 'the row holds the lease key');
    assert.ok(values.includes('raw-owner'), 'the row holds the owner');
    await store.leases.delete(shardId(1));
    assert.equal(await harness.readRawLease(applicationName, shardId(1)), null, 'the row is gone');
  },
  'a lost race writes nothing': async ({ store, harness, applicationName, assert, check }) => {
    const held = await check.createTaken(store, shardId(1), 'owner-1');
    const before = (await harness.readRawLease?.(applicationName, shardId(1))) ?? leaseSnapshot(held);
    check.lost(
      await store.leases.take(shardId(1), held.leaseCounter + 3, 'intruder'),
      'counter-mismatch',
      'take',
    );
    check.lost(
      await store.leases.checkpoint(shardId(1), held.leaseCounter - 1, {
        checkpoint: ExtendedSequenceNumber.SHARD_END,
      }),
      'counter-mismatch',
      'checkpoint',
    );
    const after =
      (await harness.readRawLease?.(applicationName, shardId(1))) ??
      leaseSnapshot(await store.leases.get(shardId(1)));
    assert.equal(
      JSON.stringify(after, (_key, value: unknown) => (typeof value === 'bigint' ? value.toString() : value)),
      JSON.stringify(before, (_key, value: unknown) =>
        typeof value === 'bigint' ? value.toString() : value,
      ),
      'row unchanged',
    );
  },
});
