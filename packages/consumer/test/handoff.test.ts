import { interceptLeaseStore } from '@kcl/core';
import { createMemoryLeaseStore, MemoryLeaseTable } from '@kcl/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ConsumerOptions } from '../src/index.js';
import { FAST_TIMING, Fleet } from './support/fleet.js';
import {
  createStream,
  indexOf,
  type LocalKinesis,
  putRecords,
  records,
  startLocalKinesis,
  until,
} from './support/kinesis.js';

// Planned moves (steals) as cooperative hand-offs, in process: workers on one memory table, real
// runtime, kinesis-local. FAST_TIMING: renew 200, expiry 700, rebalance 150 (±25%); the hand-off
// timeout is then 350 and its check every 87 ms.

let kinesis: LocalKinesis;
beforeAll(async () => {
  kinesis = await startLocalKinesis();
});
afterAll(async () => {
  await kinesis?.stop();
});

let streamCounter = 0;
async function newStream(shards: number): Promise<string> {
  streamCounter += 1;
  const name = `handoff-${streamCounter}`;
  await createStream(kinesis.client, name, shards);
  return name;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A fleet on one memory table whose processors take `processingDelayMs` per batch. */
function handoffFleet(streamName: string, applicationName: string, overrides: Partial<ConsumerOptions> = {}) {
  const table = new MemoryLeaseTable();
  const fleet = new Fleet({
    streamName,
    applicationName,
    newClient: kinesis.newClient,
    store: () => createMemoryLeaseStore({ applicationName, table }),
    processingDelayMs: 60,
    overrides,
  });
  return { fleet, store: createMemoryLeaseStore({ applicationName, table }) };
}

/** Puts records until stopped; `written()` is how many so far. */
function produce(streamName: string, prefix: string) {
  let producing = true;
  let offset = 0;
  const done = (async () => {
    while (producing) {
      await putRecords(kinesis.client, streamName, records(prefix, 40, 40, offset));
      offset += 40;
      await sleep(15);
    }
  })();
  return {
    written: () => offset,
    async stop(): Promise<number> {
      producing = false;
      await done;
      return offset;
    },
  };
}

/**
 * One worker consumes 4 shards under load; a second joins and evens the fleet out (two planned moves).
 * Returns the fleet once every record was processed and the workers stopped.
 */
async function lateJoiner(applicationName: string, overrides: Partial<ConsumerOptions>) {
  const streamName = await newStream(4);
  const { fleet } = handoffFleet(streamName, applicationName, overrides);
  await fleet.add('w1');
  await until(() => fleet.leasesHeldBy('w1').length === 4, 10_000, 'w1 holding every lease');
  const producer = produce(streamName, 'j');
  await until(() => fleet.distinct().size >= 400, 20_000, 'records flowing');
  await fleet.add('w2');
  await until(
    () => fleet.leasesHeldBy('w1').length === 2 && fleet.leasesHeldBy('w2').length === 2,
    10_000,
    'balanced',
  );
  // Keep the load on a little after the moves, then drain.
  const balancedAt = producer.written();
  await until(() => producer.written() >= balancedAt + 400, 10_000, 'more records');
  const written = await producer.stop();
  await until(() => fleet.distinct().size >= written, 20_000, 'all records');
  await fleet.stopAll();
  expect(fleet.distinct().size).toBe(written);
  expect(fleet.orderViolations(indexOf)).toBe(0);
  return fleet;
}

describe('planned moves as hand-offs (in process, memory store)', () => {
  it('lets a late joiner take its share by hand-off: no record twice, never two workers on a shard', async () => {
    // The default timeout under FAST_TIMING (350) leaves the owner under 200 ms after it sees the
    // request (at a renewal or listing up to 190 ms later); 600 keeps a loaded test machine from
    // turning hand-offs into steals.
    const fleet = await lateJoiner('late-joiner', { handoffTimeoutMs: 600 });
    expect(fleet.duplicates()).toBe(0);
    expect(fleet.overlaps()).toEqual([]);
    const steps = fleet.handoffSteps();
    expect(steps.filter((step) => step === 'w2 received')).toHaveLength(2);
    expect(steps.filter((step) => step === 'w1 completed')).toHaveLength(2);
    expect(steps).not.toContain('w2 fell-back');
    expect(fleet.events.filter((event) => event.type === 'lease-lost')).toEqual([]);
  });

  it('steals directly with handoff: false (the behaviour of workers before hand-offs)', async () => {
    const fleet = await lateJoiner('direct-steals', { handoff: false });
    expect(fleet.handoffSteps()).toEqual([]);
    expect(
      fleet.events.filter((event) => event.type === 'lease-taken' && event.workerId === 'w2' && event.stolen),
    ).toHaveLength(2);
    // The old owner learns of each steal only when its next write fails.
    expect(
      fleet.events.filter(
        (event) =>
          event.type === 'lease-lost' && event.workerId === 'w1' && event.reason === 'taken-by-other',
      ),
    ).toHaveLength(2);
  });

  it('moves the lease after the timeout when its owner dies in the middle of a hand-off', async () => {
    const streamName = await newStream(2);
    const { fleet } = handoffFleet(streamName, 'owner-dies');
    let entered = false;
    // w1's processor waits in shutdownRequested: the hand-off cannot complete before w1 is killed.
    await fleet.add(
      'w1',
      {},
      {
        onShutdownRequested: () => {
          entered = true;
          return new Promise(() => {});
        },
      },
    );
    await until(() => fleet.leasesHeldBy('w1').length === 2, 10_000, 'w1 holding both leases');
    const producer = produce(streamName, 'o');
    await until(() => fleet.distinct().size >= 200, 20_000, 'records flowing');
    await fleet.add('w2');
    await until(() => entered, 10_000, 'w1 in shutdownRequested');
    await fleet.workers.get('w1')?.stop({ graceful: false });
    const killedAt = Date.now();
    await until(() => fleet.leasesHeldBy('w2').length === 2, 10_000, 'w2 holding both leases');
    // The hand-off timeout (350) and a check (87), or the expiry (700) and a rebalance (190), with slack.
    expect(Date.now() - killedAt).toBeLessThan(700 + 190 + 1_500);
    expect(fleet.handoffSteps()).toEqual(['w2 requested', 'w2 fell-back']);
    const written = await producer.stop();
    await until(() => fleet.distinct().size >= written, 20_000, 'all records');
    await fleet.stopAll();
    expect(fleet.distinct().size).toBe(written);
    // w1 had checkpointed every batch of the lease it was handing over before it stopped taking its
    // batches. (Its other lease was read until the kill: a batch recorded but not yet checkpointed
    // there is replayed by w2, as after any kill -9.)
    const requested = fleet.events.find(
      (event) => event.type === 'lease-handoff' && event.step === 'requested',
    );
    const handedOver = requested?.type === 'lease-handoff' ? requested.leaseKey : '';
    const ofHandedOver = fleet.processed.filter((record) => record.shardId === handedOver);
    expect(ofHandedOver.length).toBeGreaterThan(0);
    expect(ofHandedOver.length - new Set(ofHandedOver.map((record) => record.data)).size).toBe(0);
    expect(fleet.overlaps()).toEqual([]);
    expect(fleet.orderViolations(indexOf)).toBe(0);
  });

  it('lets the lease expire from a requester that died after asking, then moves it on', async () => {
    const streamName = await newStream(2);
    const { fleet, store } = handoffFleet(streamName, 'requester-dies');
    await fleet.add('w1');
    await until(() => fleet.leasesHeldBy('w1').length === 2, 10_000, 'w1 holding both leases');
    const producer = produce(streamName, 'r');
    await until(() => fleet.distinct().size >= 200, 20_000, 'records flowing');
    const requester = await fleet.add('w2');
    await until(() => fleet.handoffSteps().includes('w2 requested'), 10_000, 'a request');
    await requester.stop({ graceful: false });
    // w1 completes the hand-off to the dead w2; the lease then expires from w2 and w1 takes it back.
    await until(() => fleet.handoffSteps().includes('w1 completed'), 10_000, 'the hand-off');
    const completedAt = Date.now();
    const completed = fleet.events.flatMap((event) =>
      event.type === 'lease-handoff' && event.step === 'completed' ? [event.leaseKey] : [],
    );
    expect((await store.leases.get(completed[0] ?? ''))?.owner).toBe('w2');
    await until(() => fleet.leasesHeldBy('w1').length === 2, 10_000, 'w1 taking it back');
    // The expiry (700) and one rebalance (150 + 25%), with slack for a loaded machine.
    expect(Date.now() - completedAt).toBeLessThan(700 + 190 + 1_500);
    const written = await producer.stop();
    await until(() => fleet.distinct().size >= written, 20_000, 'all records');
    await fleet.stopAll();
    expect(fleet.distinct().size).toBe(written);
    expect(fleet.duplicates()).toBe(0);
    expect(fleet.overlaps()).toEqual([]);
  });

  it('releases the lease, instead of handing it over, when the requester stopped before the hand-off completed', async () => {
    const streamName = await newStream(2);
    const { fleet } = handoffFleet(streamName, 'requester-stops', { handoffTimeoutMs: 600 });
    let requesterStopped = false;
    // w1 checkpoints in shutdownRequested only once w2 has stopped (and left the worker registry).
    await fleet.add(
      'w1',
      {},
      {
        onShutdownRequested: async () => {
          await until(() => requesterStopped, 10_000, 'w2 stopped');
        },
      },
    );
    await until(() => fleet.leasesHeldBy('w1').length === 2, 10_000, 'w1 holding both leases');
    const producer = produce(streamName, 's');
    await until(() => fleet.distinct().size >= 200, 20_000, 'records flowing');
    await fleet.add('w2');
    await until(() => fleet.handoffSteps().includes('w2 requested'), 10_000, 'a request');
    await fleet.workers.get('w2')?.stop();
    requesterStopped = true;
    const stoppedAt = Date.now();
    await until(
      () => fleet.events.some((event) => event.type === 'lease-released' && event.workerId === 'w1'),
      10_000,
      'w1 releasing the lease',
    );
    await until(() => fleet.leasesHeldBy('w1').length === 2, 10_000, 'w1 taking it up again');
    // Released, the lease is free at once: well within the expiry (700) it would otherwise wait for.
    expect(Date.now() - stoppedAt).toBeLessThan(700);
    expect(fleet.handoffSteps()).not.toContain('w1 completed');
    const written = await producer.stop();
    await until(() => fleet.distinct().size >= written, 20_000, 'all records');
    await fleet.stopAll();
    expect(fleet.distinct().size).toBe(written);
    expect(fleet.duplicates()).toBe(0);
    expect(fleet.overlaps()).toEqual([]);
  });

  it('gives a lease handed over while the requester stops straight back, not leaving it to expire', async () => {
    const streamName = await newStream(2);
    const applicationName = 'requester-stopping';
    const table = new MemoryLeaseTable();
    // w1's completion lands 150 ms after it was sent (within the store call timeout, 200), and w2 is stopped in between: w1 read the
    // registry (w2 still in it) before w2's stop began, so the lease becomes w2's while w2 stops.
    let completing = false;
    const slowCompletion = (workerId: string) => {
      const store = createMemoryLeaseStore({ applicationName, table });
      if (workerId !== 'w1') return store;
      return interceptLeaseStore(store, async (operation, options, call) => {
        if (operation !== 'leases.completeHandoff') return call(options);
        completing = true;
        await sleep(150);
        return call(options);
      });
    };
    const fleet = new Fleet({
      streamName,
      applicationName,
      newClient: kinesis.newClient,
      store: slowCompletion,
      processingDelayMs: 60,
      overrides: { leaseExpiryMs: 3_000, handoffTimeoutMs: 1_500 },
    });
    const store = createMemoryLeaseStore({ applicationName, table });
    await fleet.add('w1');
    await until(() => fleet.leasesHeldBy('w1').length === 2, 10_000, 'w1 holding both leases');
    const producer = produce(streamName, 'g');
    await until(() => fleet.distinct().size >= 200, 20_000, 'records flowing');
    await fleet.add('w2');
    await until(() => fleet.handoffSteps().includes('w2 requested'), 10_000, 'a request');
    const asked = fleet.events.flatMap((event) =>
      event.type === 'lease-handoff' && event.step === 'requested' ? [event.leaseKey] : [],
    )[0];
    await until(() => completing, 10_000, 'w1 completing the hand-off');
    await fleet.workers.get('w2')?.stop();
    // The stop waited for the hand-off and gave the lease back: it is nobody's, or w1's again.
    expect(fleet.handoffSteps()).toContain('w1 completed');
    expect((await store.leases.get(asked ?? ''))?.owner).not.toBe('w2');
    const stoppedAt = Date.now();
    await until(() => fleet.leasesHeldBy('w1').length === 2, 10_000, 'w1 taking it up again');
    // Well within the expiry (3 000) that a lease left with the stopped w2 would wait for.
    expect(Date.now() - stoppedAt).toBeLessThan(1_500);
    const written = await producer.stop();
    await until(() => fleet.distinct().size >= written, 20_000, 'all records');
    await fleet.stopAll();
    expect(fleet.distinct().size).toBe(written);
    expect(fleet.duplicates()).toBe(0);
    expect(fleet.overlaps()).toEqual([]);
  });

  it('hands the lease over only once a slow shutdownRequested has returned, even past its budget', async () => {
    const streamName = await newStream(2);
    const { fleet } = handoffFleet(streamName, 'slow-shutdown', { handoffTimeoutMs: 650 });
    const returned = new Map<string, number>();
    // Told to hurry (at four fifths of its budget), w1's shutdownRequested still takes 120 ms more:
    // past the budget, well before the requester's deadline. w1 checkpoints only there, so a lease
    // handed over before it returned would make w2 process w1's records again.
    await fleet.add(
      'w1',
      {},
      {
        checkpointOnlyOnShutdown: true,
        onShutdownRequested: async (shardId, signal) => {
          await until(() => signal?.aborted === true, 10_000, 'the hurry signal');
          await sleep(120);
          returned.set(shardId, performance.now());
        },
      },
    );
    await until(() => fleet.leasesHeldBy('w1').length === 2, 10_000, 'w1 holding both leases');
    const producer = produce(streamName, 'l');
    await until(() => fleet.distinct().size >= 200, 20_000, 'records flowing');
    await fleet.add('w2');
    await until(() => fleet.leasesHeldBy('w2').length === 1, 10_000, 'w2 holding one lease');
    const moved = fleet.leasesHeldBy('w2')[0] ?? '';
    const byW2 = () => fleet.intervals.filter((span) => span.workerId === 'w2' && span.shardId === moved);
    await until(() => byW2().length > 0, 10_000, 'w2 processing the moved shard');
    expect(fleet.handoffSteps()).toContain('w1 completed');
    expect(fleet.handoffSteps()).not.toContain('w2 fell-back');
    // The new owner's first batch began after the old owner's shutdownRequested had returned.
    expect(Math.min(...byW2().map((span) => span.start))).toBeGreaterThan(returned.get(moved) ?? Infinity);
    const written = await producer.stop();
    await until(() => fleet.distinct().size >= written, 20_000, 'all records');
    await fleet.stopAll();
    expect(fleet.distinct().size).toBe(written);
    expect(fleet.overlaps()).toEqual([]);
    expect(fleet.duplicates()).toBe(0);
  });

  it('moves the lease within the hand-off timeout when the processor never returns from shutdownRequested', async () => {
    const streamName = await newStream(2);
    const { fleet } = handoffFleet(streamName, 'hanging-shutdown');
    const hanging: string[] = [];
    await fleet.add(
      'w1',
      {},
      {
        onShutdownRequested: (shardId) => {
          hanging.push(shardId);
          return new Promise(() => {});
        },
      },
    );
    await until(() => fleet.leasesHeldBy('w1').length === 2, 10_000, 'w1 holding both leases');
    const producer = produce(streamName, 'h');
    await until(() => fleet.distinct().size >= 200, 20_000, 'records flowing');
    await fleet.add('w2');
    await until(() => hanging.length === 1, 10_000, 'a shutdownRequested that hangs');
    const hangingSince = Date.now();
    const moving = hanging[0] ?? '';
    await until(() => fleet.leasesHeldBy('w2').includes(moving), 10_000, 'w2 holding the lease');
    // Bounded by the hand-off timeout (350) and one check (87), with slack for a loaded machine.
    expect(Date.now() - hangingSince).toBeLessThan(350 + 90 + 1_000);
    // w1 gives shutdownRequested three quarters of the time left, then hands over without its
    // checkpoint (w2 may replay the last batch, but no two workers process the shard at once); on a
    // machine too busy for that, w2 steals at the timeout.
    const steps = fleet.handoffSteps();
    expect(steps[0]).toBe('w2 requested');
    expect(['w1 completed', 'w2 fell-back']).toContain(steps[1]);
    const written = await producer.stop();
    await until(() => fleet.distinct().size >= written, 20_000, 'all records');
    expect(fleet.distinct().size).toBe(written);
    expect(fleet.overlaps()).toEqual([]);
    await fleet.workers.get('w2')?.stop();
    await fleet.workers.get('w1')?.stop({ graceful: false });
  });
});

// FAST_TIMING is what the fleet runs with; the assertions above assume its figures.
expect(FAST_TIMING).toMatchObject({
  leaseExpiryMs: 700,
  leaseRenewIntervalMs: 200,
  rebalanceIntervalMs: 150,
});
