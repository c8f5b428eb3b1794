import type { Lease, LeaseBatchWriteResult, LeaseStore } from '@kcl/core';
import { ExtendedSequenceNumber, LeaseStoreError } from '@kcl/core';
import { createFaultyLeaseStore } from '@kcl/testkit';
import { afterAll, describe, expect, it } from 'vitest';
import { createMigratingLeaseStore, isSealedLease, moveLease } from '../src/index.js';
import { openStorePairs } from './support/store-pairs.js';

// `leases.renewMany` of the migrating store sends the leases still in the source to the source and the
// moved ones to the target, in one batch each. One store's batch call failing must not turn into a
// failure of the leases whose renewals the other store applied: each lease reports its own outcome.

const pairs = await openStorePairs();
afterAll(() => pairs.close());

function written(result: LeaseBatchWriteResult | undefined): Lease {
  if (result === undefined || !result.ok)
    throw new Error(`expected a renewal, got ${JSON.stringify(result)}`);
  return result.lease;
}

/** Three leases held by one worker; `moved` lives in the target, the others in the source. */
async function seed(from: LeaseStore, to: LeaseStore) {
  const faultyFrom = createFaultyLeaseStore(from);
  const faultyTo = createFaultyLeaseStore(to);
  const store = createMigratingLeaseStore({ from: faultyFrom, to: faultyTo });
  const held = new Map<string, number>();
  for (const leaseKey of ['shard-a', 'shard-moved', 'shard-b']) {
    const created = await store.leases.create({ leaseKey, checkpoint: ExtendedSequenceNumber.of('7') });
    if (!created.ok) throw new Error('create failed');
    const taken = await store.leases.take(leaseKey, created.lease.leaseCounter, 'worker-1');
    held.set(leaseKey, written(taken).leaseCounter);
  }
  expect(await moveLease(from, to, 'shard-moved')).toBe('moved');
  // The worker learns of the move through its own reads, as it does in a fleet.
  expect((await store.leases.get('shard-moved'))?.owner).toBe('worker-1');
  const renewals = ['shard-a', 'shard-moved', 'shard-b'].map((leaseKey) => ({
    leaseKey,
    leaseCounter: held.get(leaseKey) as number,
  }));
  return { store, faultyFrom, faultyTo, renewals };
}

describe.each(pairs.kinds)('leases.renewMany of the migrating store ($name)', (kind) => {
  it.skipIf(kind.skip !== null)(
    'reports the moved lease as failed when the target batch call rejects; the source renewals stand',
    async () => {
      const { from, to } = await kind.open('batch-target');
      const { store, faultyTo, renewals } = await seed(from, to);
      faultyTo.faults.failNext(1, { operations: ['leases.renewMany'] });

      const results = await store.leases.renewMany(renewals);

      expect(results).toHaveLength(3);
      const a = written(results[0]);
      const b = written(results[2]);
      expect(a.leaseCounter).toBe((renewals[0]?.leaseCounter ?? 0) + 1);
      expect(b.leaseCounter).toBe((renewals[2]?.leaseCounter ?? 0) + 1);
      expect(results[1]).toMatchObject({ ok: false, reason: 'failed' });
      expect(LeaseStoreError.is((results[1] as { error: unknown }).error)).toBe(true);
      // The renewals were applied in the source, so the worker must keep those leases.
      expect((await from.leases.get('shard-a'))?.leaseCounter).toBe(a.leaseCounter);
      expect((await from.leases.get('shard-b'))?.leaseCounter).toBe(b.leaseCounter);
      // The worker retries the failed one with the counter it holds, and it goes through.
      const retried = await store.leases.renewMany([renewals[1] as (typeof renewals)[number]]);
      expect(written(retried[0]).leaseCounter).toBe((renewals[1]?.leaseCounter ?? 0) + 1);
    },
  );

  it.skipIf(kind.skip !== null)(
    'reports the source leases as failed when the source batch call rejects; the moved lease’s renewal stands',
    async () => {
      const { from, to } = await kind.open('batch-source');
      const { store, faultyFrom, renewals } = await seed(from, to);
      faultyFrom.faults.failNext(1, { operations: ['leases.renewMany'] });

      const results = await store.leases.renewMany(renewals);

      expect(results[0]).toMatchObject({ ok: false, reason: 'failed' });
      expect(results[2]).toMatchObject({ ok: false, reason: 'failed' });
      const moved = written(results[1]);
      expect(moved.leaseCounter).toBe((renewals[1]?.leaseCounter ?? 0) + 1);
      expect((await to.leases.get('shard-moved'))?.leaseCounter).toBe(moved.leaseCounter);
      expect(isSealedLease((await from.leases.get('shard-moved')) as Lease)).toBe(true);
    },
  );

  it.skipIf(kind.skip !== null)(
    'reports a lease whose redirect to the target fails as failed, not the whole batch',
    async () => {
      const { from, to } = await kind.open('batch-redirect');
      const { store, faultyTo, renewals } = await seed(from, to);
      // A second worker's store has not seen the move: its renewal of the moved lease loses in the
      // source and is redirected to the target, where that single call fails.
      const other = createMigratingLeaseStore({ from, to: faultyTo });
      faultyTo.faults.failNext(1, { operations: ['leases.renew'] });
      const results = await other.leases.renewMany(renewals);
      expect(written(results[0]).leaseCounter).toBe((renewals[0]?.leaseCounter ?? 0) + 1);
      expect(results[1]).toMatchObject({ ok: false, reason: 'failed' });
      expect(written(results[2]).leaseCounter).toBe((renewals[2]?.leaseCounter ?? 0) + 1);
      expect(store.phase()).toBe('mirroring');
    },
  );
});
