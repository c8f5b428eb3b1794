import { ExtendedSequenceNumber } from '@kcl/core';
import { createMemoryLeaseStore, ManualClock, settle } from '@kcl/testkit';
import { describe, expect, it } from 'vitest';
import { watchSourceActivity } from './watch-source-activity.js';

async function seeded() {
  const store = createMemoryLeaseStore({ applicationName: 'billing' });
  for (const [leaseKey, owner] of [
    ['shard-1', 'worker-a'],
    ['shard-2', 'worker-b'],
    ['shard-3', null],
  ] as const) {
    await store.leases.create({ leaseKey, checkpoint: ExtendedSequenceNumber.TRIM_HORIZON, owner });
  }
  return store;
}

describe('watchSourceActivity', () => {
  it('sees an idle source as idle after the whole window', async () => {
    const store = await seeded();
    await store.workers.heartbeat('worker-a');
    const clock = new ManualClock();
    const ticks: number[] = [];
    const watching = watchSourceActivity({
      store,
      watchMs: 3_000,
      clock,
      onTick: (elapsed) => ticks.push(elapsed),
    });
    await clock.waitForSleepers(1);
    await clock.advance(3_000);
    const activity = await watching;
    expect(activity.live).toBe(false);
    expect(activity.watchedMs).toBe(3_000);
    expect(ticks).toEqual([1_000, 2_000, 3_000]);
    expect(activity.leases).toHaveLength(3);
  });

  it('names the owners of leases whose counters moved', async () => {
    const store = await seeded();
    const clock = new ManualClock();
    const watching = watchSourceActivity({ store, watchMs: 2_000, clock });
    await clock.waitForSleepers(1);
    const lease = await store.leases.get('shard-2');
    await store.leases.renew('shard-2', lease?.leaseCounter ?? 0);
    await store.leases.create({ leaseKey: 'shard-4', checkpoint: ExtendedSequenceNumber.LATEST });
    await clock.advance(2_000);
    const activity = await watching;
    expect(activity.live).toBe(true);
    expect(activity.changedLeases).toEqual([
      { leaseKey: 'shard-2', owner: 'worker-b', counterBefore: 0, counterAfter: 1 },
      { leaseKey: 'shard-4', owner: null, counterBefore: null, counterAfter: 0 },
    ]);
    expect(activity.leasesByOwner).toEqual({ 'worker-b': ['shard-2'], '(none)': ['shard-4'] });
  });

  it('stops early when a worker heartbeat moves, unless asked to watch the whole window', async () => {
    const store = await seeded();
    await store.workers.heartbeat('worker-a');
    const clock = new ManualClock();
    const early = watchSourceActivity({ store, watchMs: 45_001, clock });
    await clock.waitForSleepers(1);
    await store.workers.heartbeat('worker-a');
    await clock.advance(1_000);
    const activity = await early;
    expect(activity.watchedMs).toBe(1_000);
    expect(
      activity.liveWorkers.map((worker) => [worker.workerId, worker.heartbeatBefore, worker.heartbeatAfter]),
    ).toEqual([['worker-a', 1, 2]]);

    const whole = watchSourceActivity({ store, watchMs: 3_000, clock, stopEarly: false });
    await clock.waitForSleepers(1);
    await store.workers.heartbeat('worker-a');
    await clock.advance(1_000);
    await settle();
    expect(clock.pendingSleeps).toBe(1);
    await clock.advance(2_000);
    expect((await whole).watchedMs).toBe(3_000);
  });
});
