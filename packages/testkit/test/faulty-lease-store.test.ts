import { ExtendedSequenceNumber, LeaseStoreError } from '@kcl/core';
import { describe, expect, it } from 'vitest';
import { createFaultyLeaseStore, createMemoryLeaseStore, ManualClock } from '../src/index.js';

const setup = () => createFaultyLeaseStore(createMemoryLeaseStore({ applicationName: 'faults' }));

describe('createFaultyLeaseStore', () => {
  it('fails the next N calls with a retryable error, then recovers', async () => {
    const store = setup();
    store.faults.failNext(2);
    await expect(store.listLeases()).rejects.toMatchObject({
      retryable: true,
      code: 'LEASE_STORE_UNAVAILABLE',
    });
    await expect(store.getLease('x')).rejects.toBeInstanceOf(LeaseStoreError);
    await expect(store.listLeases()).resolves.toEqual([]);
    expect(store.faults.calls('listLeases')).toBe(2);
  });

  it('fails only the named operations, with a fatal error when asked', async () => {
    const store = setup();
    store.faults.failNext(1, { retryable: false, operations: ['renewLease'] });
    await expect(store.listLeases()).resolves.toEqual([]);
    await expect(store.renewLease('x', 0)).rejects.toMatchObject({ retryable: false });
    await expect(store.renewLease('x', 0)).resolves.toEqual({ ok: false, reason: 'not-found' });
  });

  it('throttles and goes unavailable until restored', async () => {
    const store = setup();
    store.faults.throttleNext(1, ['heartbeatWorker']);
    await expect(store.heartbeatWorker('w')).rejects.toMatchObject({
      code: 'LEASE_STORE_THROTTLED',
      retryable: true,
    });
    store.faults.setUnavailable();
    await expect(
      store.createLeaseIfAbsent({ leaseKey: 'k', checkpoint: ExtendedSequenceNumber.LATEST }),
    ).rejects.toThrow(/unavailable/);
    expect(store.faults.isUnavailable).toBe(true);
    store.faults.restore();
    await expect(store.heartbeatWorker('w')).resolves.toMatchObject({ heartbeat: 1 });
  });

  it('adds latency on the injected clock', async () => {
    const clock = new ManualClock();
    const store = createFaultyLeaseStore(createMemoryLeaseStore({ applicationName: 'slow' }), { clock });
    store.faults.setLatency((operation) => (operation === 'listLeases' ? 5_000 : 0));
    let done = false;
    const listing = store.listLeases().then(() => {
      done = true;
    });
    await clock.waitForSleepers(1);
    await clock.advance(4_999);
    expect(done).toBe(false);
    await clock.advance(1);
    await listing;
    expect(done).toBe(true);
  });
});
