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
   * it) and checkpoint; `onShutdownRequested` runs before the last checkpoint.
   */
  processor(
    workerId: string,
    clock: () => Clock,
    batchMs: number,
    onShutdownRequested: () => Promise<void> = async () => {},
  ): RecordProcessorFactory {
    return (shardId): RecordProcessor => ({
      processRecords: async ({ records, checkpointer }) => {
        if (records.length === 0) return;
        const start = this.scenario.clock.monotonicNow();
        await clock().sleep(batchMs);
        for (const record of records) {
          const label = text(record);
          this.handled.set(label, (this.handled.get(label) ?? 0) + 1);
        }
        this.intervals.push({ workerId, shardId, start, end: this.scenario.clock.monotonicNow() });
        await checkpointer.checkpoint().catch(() => undefined);
      },
      shutdownRequested: async ({ checkpointer }) => {
        await onShutdownRequested();
        await checkpointer.checkpoint().catch(() => undefined);
      },
      shardEnded: async ({ checkpointer }) => {
        await checkpointer.checkpoint();
      },
    });
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
});
