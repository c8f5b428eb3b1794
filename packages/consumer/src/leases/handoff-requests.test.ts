import type { Lease, LeaseStore } from '@kcl/core';
import { ExtendedSequenceNumber } from '@kcl/core';
import { createFaultyLeaseStore, createMemoryLeaseStore, ManualClock } from '@kcl/testkit';
import { describe, expect, it } from 'vitest';
import { HandoffRequests } from './handoff-requests.js';

async function setup(store: LeaseStore = createMemoryLeaseStore({ applicationName: 'requests' })) {
  const clock = new ManualClock({ monotonic: 0, now: 1_000_000 });
  const readErrors: string[] = [];
  const requests = new HandoffRequests({
    store,
    workerId: 'me',
    timeoutMs: 1_000,
    leaseExpiryMs: 3_000,
    clock,
    onReadError: (leaseKey) => readErrors.push(leaseKey),
  });
  const created = await store.leases.create({
    leaseKey: 'a',
    checkpoint: ExtendedSequenceNumber.TRIM_HORIZON,
    owner: 'owner',
  });
  if (!created.ok) throw new Error('create');
  const current = async (): Promise<Lease> => {
    const lease = await store.leases.get('a');
    if (lease === null) throw new Error('gone');
    return lease;
  };
  return { clock, store, requests, lease: created.lease, current, readErrors };
}

describe('HandoffRequests', () => {
  it('asks the owner with a deadline one timeout ahead, once', async () => {
    const { requests, lease, current } = await setup();
    expect(await requests.request(lease)).toBe(true);
    expect((await current()).handoff).toEqual({ from: 'owner', to: 'me', deadline: new Date(1_001_000) });
    expect(requests.has('a')).toBe(true);
    expect(await requests.request(lease)).toBe(false);
  });

  it('does not wait on a request that lost its race', async () => {
    const { requests, lease, store } = await setup();
    await store.leases.renew('a', lease.leaseCounter);
    expect(await requests.request(lease)).toBe(false);
    expect(requests.size).toBe(0);
  });

  it('waits while the owner renews, and receives the lease once it is handed over', async () => {
    const { clock, requests, lease, store, current } = await setup();
    await requests.request(lease);
    await clock.advance(300);
    await store.leases.renew('a', lease.leaseCounter);
    expect(await requests.check()).toEqual([]);
    await clock.advance(300);
    await store.leases.completeHandoff('a', (await current()).leaseCounter);
    const [outcome] = await requests.check();
    // The lease's expiry counts from the last read that still showed it pending (sent at 300).
    expect(outcome).toMatchObject({ kind: 'received', from: 'owner', writeSentAt: 300 });
    expect(outcome?.kind === 'received' && outcome.lease.owner).toBe('me');
    expect(requests.size).toBe(0);
  });

  it('says to steal once the timeout has passed without a hand-over', async () => {
    const { clock, requests, lease, current } = await setup();
    await requests.request(lease);
    await clock.advance(999);
    expect(await requests.check()).toEqual([]);
    await clock.advance(1);
    expect(await requests.check()).toEqual([{ kind: 'timed-out', from: 'owner', lease: await current() }]);
    expect(requests.size).toBe(0);
  });

  it('drops a request whose lease went to someone else, or was deleted', async () => {
    const { requests, lease, store, current } = await setup();
    await requests.request(lease);
    await store.leases.take('a', (await current()).leaseCounter, 'third');
    expect(await requests.check()).toEqual([{ kind: 'dropped', from: 'owner', leaseKey: 'a' }]);
    await requests.request(await current());
    await store.leases.delete('a');
    expect(await requests.check()).toEqual([{ kind: 'dropped', from: 'third', leaseKey: 'a' }]);
  });

  it('keeps a request through failed reads, for at most the lease expiry past its timeout', async () => {
    const faulty = createFaultyLeaseStore(createMemoryLeaseStore({ applicationName: 'requests' }));
    const { clock, requests, lease, readErrors } = await setup(faulty);
    await requests.request(lease);
    faulty.faults.failNext(100, { operations: ['leases.get'] });
    await clock.advance(3_999);
    expect(await requests.check()).toEqual([]);
    expect(readErrors).toEqual(['a']);
    await clock.advance(1);
    expect(await requests.check()).toEqual([{ kind: 'dropped', from: 'owner', leaseKey: 'a' }]);
  });
});
