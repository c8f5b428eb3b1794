import type { LeaseStore } from '@kcl/core';
import { FLEET_TIMINGS, waitUntil } from '@kcl/testkit';
import { describe, expect, it } from 'vitest';
import { balanced, type FleetEvent, type FleetHarness, verify, waitFor } from './harness.js';
import { produceContinuously, type TestStream } from './stream.js';

/** What the planned-move scenarios need from the store's fleet suite. */
export interface FleetContext {
  stream(): TestStream;
  fleet(
    shards: number,
    consumer?: FleetHarness['options']['consumer'],
  ): Promise<{ harness: FleetHarness; streamName: string; applicationName: string }>;
  openApplicationStore(applicationName: string): Promise<LeaseStore>;
}

const TIMING = FLEET_TIMINGS.processes;

/** Leases a worker took from a living owner (a steal, or a completed hand-off), by its events. */
const movesTo = (events: readonly FleetEvent[], workerId: string): FleetEvent[] =>
  events.filter(
    (event) => event.type === 'lease-taken' && event.workerId === workerId && event.stolen === true,
  );

/** True when one of `workers` moved two or more leases to itself within one rebalance interval. */
const movedSeveralAtOnce = (events: readonly FleetEvent[], workers: readonly string[]): boolean =>
  workers.some((workerId) => {
    const times = movesTo(events, workerId).map((event) => event.at);
    return times.some(
      (at, index) => index > 0 && at - (times[index - 1] as number) < TIMING.rebalanceIntervalMs,
    );
  });

/**
 * Moves a fleet plans — steals by a late joiner, a balance that steals several leases at once, a rolling
 * restart — and a crash in the middle of one (ARCHITECTURE §4, hand-offs). Workers are OS processes
 * that checkpoint in shutdownRequested; each batch is recorded with its worker, shard, start and end.
 */
export function describePlannedMoves(context: FleetContext): void {
  describe('planned moves', () => {
    it('planned moves process nothing twice: late joiners stealing several leases at once and a rolling restart of every worker, 8 shards, records flowing', async () => {
      const stream = context.stream();
      // maxLeasesToSteal 8: a worker joining a fleet takes its whole share in one plan where it can.
      const { harness, streamName } = await context.fleet(8, { maxLeasesToSteal: 8 });
      const workers = ['w1', 'w2', 'w3', 'w4'];
      await harness.spawn('w1');
      await waitFor(balanced(harness, ['w1'], 8), 20_000, 'w1 holding all 8 leases');
      const producer = produceContinuously(stream, streamName, 20, 100);
      await waitFor(() => harness.processedCount() >= 100, 30_000, 'records flowing');

      // A steal-heavy balance: w2 and w3 join a fleet where w1 holds every lease, far above its share.
      await Promise.all([harness.spawn('w2'), harness.spawn('w3')]);
      await waitFor(
        balanced(harness, ['w1', 'w2', 'w3'], 8),
        20_000,
        'three workers holding 8 leases evenly',
      );
      expect(movedSeveralAtOnce(harness.events, ['w2', 'w3'])).toBe(true);

      // A late joiner: every lease is held by a living worker, so it gets its share only by moves.
      await harness.spawn('w4');
      await waitFor(balanced(harness, workers, 8), 20_000, 'the late joiner’s share');
      expect(movesTo(harness.events, 'w4').length).toBeGreaterThanOrEqual(2);

      // A rolling restart: each worker stopped gracefully and started again, joining a full fleet.
      for (const workerId of workers) {
        await harness.stop(workerId);
        const others = workers.filter((other) => other !== workerId);
        await waitFor(balanced(harness, others, 8), 20_000, `${workerId}’s leases on the others`);
        await harness.spawn(workerId);
        await waitFor(balanced(harness, workers, 8), 20_000, `${workerId} back with its share`);
      }

      await producer.stop();
      await waitFor(() => harness.distinctCount() >= stream.written.length, 120_000, 'every record');
      await harness.stopAll();
      const result = verify(stream.written, harness.processed());
      // Every worker's batches were recorded: the overlap check has something to look at.
      expect(new Set(harness.batches().map((batch) => batch.w))).toEqual(new Set(workers));
      expect({
        lost: result.lost,
        orderViolations: result.orderViolations,
        duplicates: result.duplicates,
        concurrentOwners: harness.concurrentOwners(),
      }).toEqual({ lost: 0, orderViolations: 0, duplicates: 0, concurrentOwners: [] });
    });

    it('moves the leases of an owner killed with -9 mid-hand-off within the lease expiry and a rebalance interval, losing nothing', async () => {
      const stream = context.stream();
      const { harness, streamName, applicationName } = await context.fleet(4, { maxLeasesToSteal: 4 });
      const leaseStore = await context.openApplicationStore(applicationName);
      // w1 is slow to checkpoint in shutdownRequested (below the hand-off timeout), so the kill lands
      // while its hand-offs are pending rather than after they completed.
      await harness.spawn('w1', harness.options.store, { shutdownRequestedDelayMs: 300 });
      await waitFor(balanced(harness, ['w1'], 4), 20_000, 'w1 holding all 4 leases');
      const producer = produceContinuously(stream, streamName, 20, 100);
      await waitFor(() => harness.processedCount() >= 100, 30_000, 'records flowing');

      await harness.spawn('w2');
      // Polled every 25 ms: a pending hand-off lasts a few hundred milliseconds.
      await waitUntil(
        async () => {
          const leases = await leaseStore.leases.list();
          return leases.some(
            (lease) => lease.handoff !== null && lease.handoff.from === 'w1' && lease.owner === 'w1',
          );
        },
        20_000,
        'a hand-off requested from w1',
        25,
      );
      const killedAt = await harness.kill('w1');

      let movedAt = Number.POSITIVE_INFINITY;
      await waitUntil(
        async () => {
          const leases = await leaseStore.leases.list();
          if (leases.length !== 4 || leases.some((lease) => lease.owner === 'w1' || lease.owner === null))
            return false;
          movedAt = performance.timeOrigin + performance.now();
          return true;
        },
        20_000,
        'w1’s leases moving to w2',
        25,
      );

      await producer.stop();
      await waitFor(() => harness.distinctCount() >= stream.written.length, 120_000, 'every record');
      await harness.stopAll();

      // A listing may see w1's last renewal only after the kill; from then, the lease expiry and the
      // next rebalance (interval + 25% jitter) at most.
      const listingDelayMs = TIMING.rebalanceIntervalMs * 1.25;
      expect(movedAt - killedAt).toBeLessThan(
        TIMING.leaseExpiryMs + TIMING.rebalanceIntervalMs * 1.25 + listingDelayMs,
      );
      const processed = harness.processed();
      const result = verify(stream.written, processed);
      expect(result.lost).toBe(0);
      expect(result.orderViolations).toBe(0);
      // A crash keeps its window: a record processed twice was processed first by the killed owner.
      const first = new Map<string, string>();
      const repeatedAfter = new Set<string>();
      for (const line of processed) {
        const earlier = first.get(line.d);
        if (earlier === undefined) first.set(line.d, line.w);
        else repeatedAfter.add(earlier);
      }
      expect([...repeatedAfter].filter((workerId) => workerId !== 'w1')).toEqual([]);
    });
  });
}
