import type { KinesisRecord, RecordProcessor, RecordProcessorFactory } from '@kcl/consumer';
import type { Clock } from '@kcl/core';
import { describe, expect, it } from 'vitest';
import { SIMULATION_TIMINGS } from '../src/fleet-simulation.js';
import { Scenario, type ScenarioWorker } from '../src/scenario.js';

/**
 * Planned moves (steals to even out the fleet) on simulated time: with cooperative hand-offs no record
 * is processed twice and no two workers process a shard at once; without them (`handoff: false`) the
 * same schedule does both. Timings: renew 1 s, expiry 3 s, rebalance 1 s; the hand-off timeout is
 * then 1.5 s, checked every 375 ms.
 */

const TIMINGS = { ...SIMULATION_TIMINGS, storeCallTimeoutMs: 1_000 };
const text = (record: Pick<KinesisRecord, 'data'>): string => Buffer.from(record.data).toString();

interface Interval {
  readonly workerId: string;
  readonly shardId: string;
  readonly start: number;
  readonly end: number;
}

/** What a fleet of scenario workers processed: each payload's handlings, and each batch's interval. */
class Processing {
  readonly handled = new Map<string, number>();
  readonly intervals: Interval[] = [];

  constructor(readonly scenario: Scenario) {}

  /**
   * A processor for `workerId` whose batches take `batchMs` of the worker's own time (a crash freezes
   * it) and checkpoint; `onShutdownRequested` runs before the last checkpoint. With
   * `checkpointBatches` false it checkpoints only there, at the last record it handled (a batch that
   * returned after the stop began counts as unfinished for a checkpoint without arguments).
   */
  processor(
    workerId: string,
    clock: () => Clock,
    batchMs: number,
    onShutdownRequested: () => Promise<void> = async () => {},
    checkpointBatches = true,
  ): RecordProcessorFactory {
    return (shardId): RecordProcessor => {
      let lastHandled: KinesisRecord | null = null;
      return {
        processRecords: async ({ records, checkpointer }) => {
          if (records.length === 0) return;
          const start = this.scenario.clock.monotonicNow();
          await clock().sleep(batchMs);
          for (const record of records) {
            const label = text(record);
            this.handled.set(label, (this.handled.get(label) ?? 0) + 1);
          }
          lastHandled = records.at(-1) ?? lastHandled;
          this.intervals.push({ workerId, shardId, start, end: this.scenario.clock.monotonicNow() });
          if (checkpointBatches) await checkpointer.checkpoint().catch(() => undefined);
        },
        shutdownRequested: async ({ checkpointer }) => {
          await onShutdownRequested();
          const at = checkpointBatches ? undefined : lastHandled?.sequenceNumber;
          await checkpointer.checkpoint(at).catch(() => undefined);
        },
        shardEnded: async ({ checkpointer }) => {
          await checkpointer.checkpoint();
        },
      };
    };
  }

  get duplicates(): number {
    let extra = 0;
    for (const count of this.handled.values()) extra += count - 1;
    return extra;
  }

  /** Batches of two workers on one shard that ran at the same time. */
  overlaps(): Array<readonly [Interval, Interval]> {
    const found: Array<readonly [Interval, Interval]> = [];
    for (const [index, first] of this.intervals.entries()) {
      for (const second of this.intervals.slice(index + 1)) {
        if (first.shardId !== second.shardId || first.workerId === second.workerId) continue;
        if (first.start < second.end && second.start < first.end) found.push([first, second]);
      }
    }
    return found;
  }
}

/** Puts one record per key every 50 ms of simulated time while `producing()` holds. */
async function produce(scenario: Scenario, producing: () => boolean): Promise<number> {
  let count = 0;
  while (producing()) {
    for (let key = 0; key < 8; key++)
      scenario.stream.put(`key-${key}`, new TextEncoder().encode(`r-${count++}`));
    await scenario.clock.sleep(50);
  }
  return count;
}

const handoffSteps = (...workers: ScenarioWorker[]): string[] =>
  workers
    .flatMap((worker) => worker.events)
    .flatMap((event) => (event.type === 'lease-handoff' ? [`${event.workerId} ${event.step}`] : []));

/** W1 consumes 4 busy shards; W2 joins under load and evens the fleet out (two planned moves). */
async function stealDuringLoad(handoff: boolean) {
  const scenario = new Scenario({ shards: 4, seed: 7 });
  const processing = new Processing(scenario);
  let producing = true;
  const produced = produce(scenario, () => producing);
  const clocks = new Map<string, Clock>();
  const start = (workerId: string): ScenarioWorker => {
    const worker = scenario.worker(workerId, {
      ...TIMINGS,
      handoff,
      processor: processing.processor(workerId, () => clocks.get(workerId) as Clock, 150),
    });
    clocks.set(workerId, worker.clock);
    return worker;
  };
  const first = start('W1');
  await scenario.run(3_000);
  const second = start('W2');
  const held = (worker: ScenarioWorker) => worker.consumer.status().leases.length;
  const balanced = await scenario.runUntil(() => held(first) === 2 && held(second) === 2, 20_000);
  await scenario.run(3_000);
  producing = false;
  await scenario.run(100);
  const total = await produced;
  await scenario.runUntil(() => processing.handled.size >= total, 20_000);
  expect(balanced).toBe(true);
  expect(processing.handled.size).toBe(total);
  return { processing, steps: handoffSteps(first, second) };
}

describe('planned moves', () => {
  it('hands leases over under load: no record twice, never two workers on a shard', async () => {
    const { processing, steps } = await stealDuringLoad(true);
    expect(processing.duplicates).toBe(0);
    expect(processing.overlaps()).toEqual([]);
    expect(steps.filter((step) => step === 'W2 received')).toHaveLength(2);
    expect(steps).not.toContain('W2 fell-back');
  });

  it('processes records twice on the same schedule with direct steals (handoff: false)', async () => {
    const { processing, steps } = await stealDuringLoad(false);
    expect(steps).toEqual([]);
    expect(processing.duplicates).toBeGreaterThan(0);
  });

  it('moves the lease at the hand-off timeout when its owner is killed in the middle of the hand-off', async () => {
    const scenario = new Scenario({ shards: 2, seed: 11 });
    const processing = new Processing(scenario);
    let producing = true;
    const produced = produce(scenario, () => producing);
    let w1Clock: Clock | null = null;
    let inShutdown = false;
    const first = scenario.worker('W1', {
      ...TIMINGS,
      processor: processing.processor(
        'W1',
        () => w1Clock as Clock,
        100,
        async () => {
          inShutdown = true;
          await (w1Clock as Clock).sleep(60_000);
        },
      ),
    });
    w1Clock = first.clock;
    await scenario.run(3_000);
    let w2Clock: Clock | null = null;
    const second = scenario.worker('W2', {
      ...TIMINGS,
      processor: processing.processor('W2', () => w2Clock as Clock, 100),
    });
    w2Clock = second.clock;
    expect(await scenario.runUntil(() => inShutdown, 10_000, 10)).toBe(true);
    first.crash();
    const killedAt = scenario.clock.monotonicNow();
    const asked = second.events.flatMap((event) =>
      event.type === 'lease-handoff' && event.step === 'requested' ? [event.leaseKey] : [],
    );
    expect(asked).toHaveLength(1);
    const holds = (leaseKey: string) =>
      second.consumer.status().leases.some((lease) => lease.leaseKey === leaseKey);
    expect(await scenario.runUntil(() => holds(asked[0] as string), 10_000, 10)).toBe(true);
    // W2 steals the lease it asked for at its timeout (1.5 s from the request, plus a check), well
    // before the lease would expire (3 s after W1's last renewal).
    expect(scenario.clock.monotonicNow() - killedAt).toBeLessThan(1_500 + 375 + 50);
    expect(handoffSteps(second)).toEqual(['W2 requested', 'W2 fell-back']);
    // W1's other lease expires and goes to W2 too.
    expect(await scenario.runUntil(() => second.consumer.status().leases.length === 2, 10_000)).toBe(true);
    producing = false;
    await scenario.run(100);
    const total = await produced;
    await scenario.runUntil(() => processing.handled.size >= total, 20_000);
    expect(processing.handled.size).toBe(total);
    // W1 checkpointed every batch it processed before it stopped taking batches.
    expect(processing.duplicates).toBe(0);
    expect(processing.overlaps()).toEqual([]);
  });

  it('gives back a lease handed over while its requester stops gracefully', async () => {
    const scenario = new Scenario({ shards: 2, seed: 13 });
    const processing = new Processing(scenario);
    let producing = true;
    const produced = produce(scenario, () => producing);
    let w1Clock: Clock | null = null;
    const first = scenario.worker('W1', {
      ...TIMINGS,
      processor: processing.processor('W1', () => w1Clock as Clock, 100),
    });
    w1Clock = first.clock;
    await scenario.run(3_000);
    let w2Clock: Clock | null = null;
    const second = scenario.worker('W2', {
      ...TIMINGS,
      processor: processing.processor('W2', () => w2Clock as Clock, 100),
    });
    w2Clock = second.clock;
    // W1's completion takes 400 ms to reach the store: W2 stops in between, after W1 read the registry.
    first.storeFaults.hangNext(1, 400, ['leases.completeHandoff']);
    const completing = () =>
      first.storeFaults.calls('leases.completeHandoff') > 0 || handoffSteps(first).includes('W1 completed');
    expect(await scenario.runUntil(completing, 10_000, 10)).toBe(true);
    const [leaseKey = ''] = second.events.flatMap((event) =>
      event.type === 'lease-handoff' && event.step === 'requested' ? [event.leaseKey] : [],
    );
    const stopTook = await scenario.timed(second.consumer.stop(), 10_000);
    expect(stopTook).not.toBeNull();
    expect(handoffSteps(first)).toContain('W1 completed');
    // Given back at once: not left to expire (3 s) with a worker that has stopped.
    expect(scenario.lease(leaseKey)?.owner).not.toBe('W2');
    expect(await scenario.runUntil(() => first.consumer.status().leases.length === 2, 1_500)).toBe(true);
    producing = false;
    await scenario.run(100);
    const total = await produced;
    await scenario.runUntil(() => processing.handled.size >= total, 20_000);
    expect(processing.handled.size).toBe(total);
    expect(processing.duplicates).toBe(0);
    expect(processing.overlaps()).toEqual([]);
  });

  it('gives back a lease whose request landed while its requester was already stopping', async () => {
    const scenario = new Scenario({ shards: 4, seed: 17 });
    const processing = new Processing(scenario);
    let producing = true;
    const produced = produce(scenario, () => producing);
    let w1Clock: Clock | null = null;
    // W1 checkpoints only in shutdownRequested, so a late request finds its lease's counter unchanged
    // (but for a renewal).
    const first = scenario.worker('W1', {
      ...TIMINGS,
      processor: processing.processor(
        'W1',
        () => w1Clock as Clock,
        100,
        async () => {},
        false,
      ),
    });
    w1Clock = first.clock;
    await scenario.run(3_000);
    let w2Clock: Clock | null = null;
    // W2's consumers take 2 s in shutdownRequested: its stop lasts that long.
    const second = scenario.worker('W2', {
      ...TIMINGS,
      processor: processing.processor(
        'W2',
        () => w2Clock as Clock,
        100,
        async () => {
          await (w2Clock as Clock).sleep(2_000);
        },
      ),
    });
    w2Clock = second.clock;
    const received = () => handoffSteps(second).filter((step) => step === 'W2 received').length;
    expect(await scenario.runUntil(() => received() === 1, 10_000, 10)).toBe(true);
    // W2's second request reaches the store 150 ms late; W2 stops meanwhile.
    second.storeFaults.hangNext(1, 150, ['leases.requestHandoff']);
    const requests = second.storeFaults.calls('leases.requestHandoff');
    expect(
      await scenario.runUntil(() => second.storeFaults.calls('leases.requestHandoff') > requests, 10_000, 10),
    ).toBe(true);
    const stopped = scenario.timed(second.consumer.stop(), 10_000);
    expect(await stopped).not.toBeNull();
    // Nothing is left with the stopped W2 to expire (3 s): W1 holds all four leases again soon.
    for (const shard of [0, 1, 2, 3]) {
      expect(scenario.lease(`shardId-00000000000${shard}`)?.owner).not.toBe('W2');
    }
    expect(await scenario.runUntil(() => first.consumer.status().leases.length === 4, 1_500)).toBe(true);
    producing = false;
    await scenario.run(100);
    const total = await produced;
    await scenario.runUntil(() => processing.handled.size >= total, 20_000);
    expect(processing.handled.size).toBe(total);
    expect(processing.duplicates).toBe(0);
    expect(processing.overlaps()).toEqual([]);
  });

  it('waits on a request whose answer was lost instead of taking the lease while its owner hands it over', async () => {
    const { duplicates, steps } = await lostRequestAnswer(1);
    // A guard more than a reproduction: the planner's pause before a second steal mostly lets W1
    // finish first; HandoffRequests' own tests pin the lost answer down.
    expect(steps).toEqual(['W1 completed', 'W2 received']);
    expect(steps).not.toContain('W2 fell-back');
    expect(duplicates).toBe(0);
  });
});

/**
 * W1 checkpoints only in shutdownRequested (300 ms); W2 joins and its first hand-off request
 * applies but the answer is lost. Taking that lease directly while W1 hands it over would replay
 * everything W1 processed since it took the lease.
 */
async function lostRequestAnswer(seed: number) {
  const scenario = new Scenario({ shards: 2, seed });
  const processing = new Processing(scenario);
  let producing = true;
  const produced = produce(scenario, () => producing);
  let w1Clock: Clock | null = null;
  const first = scenario.worker('W1', {
    ...TIMINGS,
    processor: processing.processor(
      'W1',
      () => w1Clock as Clock,
      150,
      async () => (w1Clock as Clock).sleep(300),
      false,
    ),
  });
  w1Clock = first.clock;
  await scenario.run(3_000);
  let w2Clock: Clock | null = null;
  const second = scenario.worker('W2', {
    ...TIMINGS,
    processor: processing.processor('W2', () => w2Clock as Clock, 150),
  });
  w2Clock = second.clock;
  second.storeFaults.loseResponseNext(1, ['leases.requestHandoff']);
  const held = (worker: ScenarioWorker) => worker.consumer.status().leases.length;
  expect(await scenario.runUntil(() => held(first) === 1 && held(second) === 1, 20_000)).toBe(true);
  await scenario.run(3_000);
  producing = false;
  await scenario.run(100);
  const total = await produced;
  await scenario.runUntil(() => processing.handled.size >= total, 20_000);
  expect(processing.handled.size).toBe(total);
  return { duplicates: processing.duplicates, steps: handoffSteps(first, second) };
}
