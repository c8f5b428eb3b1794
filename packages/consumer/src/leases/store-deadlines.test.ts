import { createFaultyLeaseStore, createMemoryLeaseStore, ManualClock, settle } from '@kcl/testkit';
import { describe, expect, it } from 'vitest';
import { withStoreDeadlines } from './store-deadlines.js';

describe('withStoreDeadlines', () => {
  it('keeps session liveness, and cuts a session call that does not answer at the deadline', async () => {
    const clock = new ManualClock({ monotonic: 1_000 });
    const faulty = createFaultyLeaseStore(
      createMemoryLeaseStore({ applicationName: 'deadlines', sessions: true }),
      { clock },
    );
    const store = withStoreDeadlines(faulty, clock, 5_000);
    expect(store.capabilities.sessionLiveness).toBe(true);
    const session = await store.workers.attachSession?.('w');
    expect(await store.workers.liveSessions?.(['w', 'v'])).toEqual(new Set(['w']));

    faulty.faults.hangNext(1, Number.POSITIVE_INFINITY, ['session.check']);
    let outcome: unknown = 'pending';
    session?.check().then(
      (live) => {
        outcome = live;
      },
      (error: unknown) => {
        outcome = error;
      },
    );
    await settle();
    await clock.advance(4_999);
    expect(outcome).toBe('pending');
    await clock.advance(1);
    await settle();
    expect(outcome).toMatchObject({ code: 'LEASE_STORE_UNAVAILABLE', retryable: true });
    expect((outcome as Error).message).toMatch(/session\.check .* did not answer within 5000 ms/);

    expect(await session?.check()).toBe(true);
    await session?.close();
    expect(await store.workers.liveSessions?.(['w'])).toEqual(new Set());
  });

  it('leaves a store without sessions without them', () => {
    const clock = new ManualClock();
    const store = withStoreDeadlines(createMemoryLeaseStore({ applicationName: 'plain' }), clock, 5_000);
    expect(store.capabilities.sessionLiveness).toBe(false);
    expect(store.workers.attachSession).toBeUndefined();
  });
});
