import { ExtendedSequenceNumber, LeaseStoreError } from '@kcl/core';
import { describe, expect, it } from 'vitest';
import { createFaultyLeaseStore, createMemoryLeaseStore, ManualClock } from '../src/index.js';

const setup = () => createFaultyLeaseStore(createMemoryLeaseStore({ applicationName: 'faults' }));

describe('createFaultyLeaseStore', () => {
  it('fails the next N calls with a retryable error, then recovers', async () => {
    const store = setup();
    store.faults.failNext(2);
    await expect(store.leases.list()).rejects.toMatchObject({
      retryable: true,
      code: 'LEASE_STORE_UNAVAILABLE',
    });
    await expect(store.leases.get('x')).rejects.toBeInstanceOf(LeaseStoreError);
    await expect(store.leases.list()).resolves.toEqual([]);
    expect(store.faults.calls('leases.list')).toBe(2);
  });

  it('fails only the named operations, with a fatal error when asked', async () => {
    const store = setup();
    store.faults.failNext(1, { retryable: false, operations: ['leases.renew'] });
    await expect(store.leases.list()).resolves.toEqual([]);
    await expect(store.leases.renew('x', 0)).rejects.toMatchObject({ retryable: false });
    await expect(store.leases.renew('x', 0)).resolves.toEqual({ ok: false, reason: 'not-found' });
  });

  it('throttles and goes unavailable until restored', async () => {
    const store = setup();
    store.faults.throttleNext(1, ['workers.heartbeat']);
    await expect(store.workers.heartbeat('w')).rejects.toMatchObject({
      code: 'LEASE_STORE_THROTTLED',
      retryable: true,
    });
    store.faults.setUnavailable();
    await expect(
      store.leases.create({ leaseKey: 'k', checkpoint: ExtendedSequenceNumber.LATEST }),
    ).rejects.toThrow(/unavailable/);
    expect(store.faults.isUnavailable).toBe(true);
    store.faults.restore();
    await expect(store.workers.heartbeat('w')).resolves.toMatchObject({ heartbeat: 1 });
  });

  it('adds latency on the injected clock', async () => {
    const clock = new ManualClock();
    const store = createFaultyLeaseStore(createMemoryLeaseStore({ applicationName: 'slow' }), { clock });
    store.faults.setLatency((operation) => (operation === 'leases.list' ? 5_000 : 0));
    let done = false;
    const listing = store.leases.list().then(() => {
      done = true;
    });
    await clock.waitForSleepers(1);
    await clock.advance(4_999);
    expect(done).toBe(false);
    await clock.advance(1);
    await listing;
    expect(done).toBe(true);
  });

  it('passes sessions through, and injects faults into their calls too', async () => {
    const store = createFaultyLeaseStore(
      createMemoryLeaseStore({ applicationName: 'faults', sessions: true }),
    );
    expect(store.capabilities.sessionLiveness).toBe(true);
    const session = await store.workers.attachSession?.('w');
    store.faults.failNext(1, { operations: ['session.check'] });
    await expect(session?.check()).rejects.toMatchObject({ code: 'LEASE_STORE_UNAVAILABLE' });
    expect(await session?.check()).toBe(true);
    store.faults.failNext(1, { operations: ['workers.liveSessions'] });
    await expect(store.workers.liveSessions?.(['w'])).rejects.toBeInstanceOf(LeaseStoreError);
    expect(await store.workers.liveSessions?.(['w'])).toEqual(new Set(['w']));
    await session?.close();
    expect(store.faults.calls('session.check')).toBe(2);
    expect(store.faults.calls('session.close')).toBe(1);
    expect(await store.inner.workers.liveSessions?.(['w'])).toEqual(new Set());
    expect(setup().capabilities.sessionLiveness).toBe(false);
  });

  it('closes a session whose answer it loses, so the worker can attach again', async () => {
    const store = createFaultyLeaseStore(
      createMemoryLeaseStore({ applicationName: 'faults', sessions: true }),
    );
    store.faults.loseResponseNext(1, ['workers.attachSession']);
    await expect(store.workers.attachSession?.('w')).rejects.toMatchObject({ retryable: true });
    expect(await store.workers.liveSessions?.(['w'])).toEqual(new Set());
    const session = await store.workers.attachSession?.('w');
    expect(await session?.check()).toBe(true);
  });
});
