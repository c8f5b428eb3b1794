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
    expect(await requests.check()).toEqual([
      { kind: 'dropped', from: 'owner', leaseKey: 'a', confirmed: true },
    ]);
    await requests.request(await current());
    await store.leases.delete('a');
    expect(await requests.check()).toEqual([
      { kind: 'dropped', from: 'third', leaseKey: 'a', confirmed: true },
    ]);
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
    expect(await requests.check()).toEqual([
      { kind: 'dropped', from: 'owner', leaseKey: 'a', confirmed: true },
    ]);
  });

  it('waits on a request whose answer was lost, and forgets one that never applied', async () => {
    const faulty = createFaultyLeaseStore(createMemoryLeaseStore({ applicationName: 'requests' }));
    const { requests, lease, current } = await setup(faulty);
    // Applied, then the answer lost: the lease is asked for, so it is waited on like any request.
    faulty.faults.loseResponseNext(1, ['leases.requestHandoff']);
    await expect(requests.request(lease)).rejects.toThrow(/lost response/);
    expect(requests.has('a')).toBe(true);
    expect((await current()).handoff?.to).toBe('me');
    expect(await requests.check()).toEqual([]);

    // Failed before it reached the store: waited on until a read shows no such request.
    const other = await setup(
      createFaultyLeaseStore(createMemoryLeaseStore({ applicationName: 'requests' })),
    );
    const otherStore = other.store as ReturnType<typeof createFaultyLeaseStore>;
    otherStore.faults.failNext(1, { operations: ['leases.requestHandoff'] });
    await expect(other.requests.request(other.lease)).rejects.toThrow(/injected outage/);
    expect(other.requests.has('a')).toBe(true);
    expect(await other.requests.check()).toEqual([
      { kind: 'dropped', from: 'owner', leaseKey: 'a', confirmed: false },
    ]);
  });

  it('adopts a listed hand-off to it that nobody here waits on, its timeout counted from the deadline', async () => {
    const { clock, requests, lease, store, current } = await setup();
    // Asked for before a restart: the deadline is 400 ms ahead, so the timeout ends in 400 ms.
    const asked = await store.leases.requestHandoff('a', lease.leaseCounter, {
      from: 'owner',
      to: 'me',
      deadline: new Date(clock.now() + 400),
    });
    if (!asked.ok) throw new Error('request');
    expect(requests.adopt(await current(), clock.monotonicNow())).toBe(true);
    expect(requests.adopt(await current(), clock.monotonicNow())).toBe(false);
    await clock.advance(399);
    expect(await requests.check()).toEqual([]);
    await clock.advance(1);
    expect(await requests.check()).toEqual([{ kind: 'timed-out', from: 'owner', lease: await current() }]);
    // Not adopted: a lease without a hand-off, or a hand-off to another worker.
    expect(requests.adopt(lease, 0)).toBe(false);
    expect(requests.adopt({ ...lease, handoff: { from: 'owner', to: 'third', deadline: null } }, 0)).toBe(
      false,
    );
  });
});
