import type { KinesisRecord, RecordProcessor, RecordProcessorFactory } from '@kcl/consumer';
import type { Clock, KclEvent, Logger } from '@kcl/core';
import { describe, expect, it } from 'vitest';
import { SIMULATION_TIMINGS } from '../src/fleet-simulation.js';
import { Scenario, type ScenarioWorker } from '../src/scenario.js';

/**
 * Session liveness meeting the other mechanisms, each at a chosen moment on simulated time. The leases
 * last 20 s here, so a takeover because a session ended (within a liveness check, 500 ms, and a
 * rebalance) cannot be mistaken for an expiry; a hand-off then times out after 10 s.
 */

const TIMINGS = {
  ...SIMULATION_TIMINGS,
  leaseExpiryMs: 20_000,
  livenessCheckIntervalMs: 500,
  storeCallTimeoutMs: 1_000,
};
const HANDOFF_TIMEOUT_MS = TIMINGS.leaseExpiryMs / 2;
const text = (record: Pick<KinesisRecord, 'data'>): string => Buffer.from(record.data).toString();

interface Batch {
  readonly workerId: string;
  readonly shardId: string;
  readonly labels: readonly string[];
  readonly start: number;
  end: number | null;
  /** The checkpoint at the batch's end: true (written), false (refused or failed), null (none yet). */
  checkpointed: boolean | null;
}

interface Said {
  readonly at: number;
  readonly workerId: string;
  /** `judges`: found `others` without their session; `revives`: saw `others` write or heartbeat; `lost`: its own session. */
  readonly kind: 'judges' | 'revives' | 'lost';
  readonly others: readonly string[];
}

interface Take {
  readonly at: number;
  readonly workerId: string;
  readonly leaseKey: string;
  readonly from: string | null;
  readonly stolen: boolean;
}

/** A fleet of scenario workers and what they did: batches, checkpoints, events and session judgements. */
class Fleet {
  readonly scenario: Scenario;
  readonly batches: Batch[] = [];
  readonly handled = new Map<string, number>();
  readonly events: Array<{ readonly at: number; readonly event: KclEvent }> = [];
  readonly said: Said[] = [];
  readonly workers = new Map<string, ScenarioWorker>();
  produced = 0;
  #producing = false;

  readonly #timings: typeof TIMINGS;

  constructor(scenario: Scenario, timings: typeof TIMINGS = TIMINGS) {
    this.scenario = scenario;
    this.#timings = timings;
  }

  /** Puts one record on each of 8 keys every 50 ms until `stopProducing`. */
  produce(): void {
    this.#producing = true;
    void (async () => {
      while (this.#producing) {
        for (let key = 0; key < 8; key++) {
          this.scenario.stream.put(`key-${key}`, new TextEncoder().encode(`r-${this.produced++}`));
        }
        await this.scenario.clock.sleep(50);
      }
    })();
  }

  /**
   * Starts a worker whose batches take `batchMs` of its own time (a crash freezes them) and then
   * checkpoint; `shutdownRequested` runs `onShutdownRequested` first (a hand-off, a stop).
   */
  start(
    workerId: string,
    options: {
      readonly batchMs?: number;
      readonly onShutdownRequested?: (shardId: string) => Promise<void>;
    } = {},
  ): ScenarioWorker {
    let clock: Clock | null = null;
    const batchMs = options.batchMs ?? 100;
    const processor: RecordProcessorFactory = (shardId): RecordProcessor => ({
      processRecords: async ({ records, checkpointer }) => {
        if (records.length === 0) return;
        const batch: Batch = {
          workerId,
          shardId,
          labels: records.map(text),
          start: this.scenario.clock.monotonicNow(),
          end: null,
          checkpointed: null,
        };
        this.batches.push(batch);
        await (clock as Clock).sleep(batchMs);
        for (const label of batch.labels) this.handled.set(label, (this.handled.get(label) ?? 0) + 1);
        batch.end = this.scenario.clock.monotonicNow();
        batch.checkpointed = await checkpointer.checkpoint().then(
          () => true,
          () => false,
        );
      },
      shutdownRequested: async ({ checkpointer }) => {
        await options.onShutdownRequested?.(shardId);
        await checkpointer.checkpoint().catch(() => undefined);
      },
      shardEnded: async ({ checkpointer }) => {
        await checkpointer.checkpoint();
      },
    });
    const worker = this.scenario.worker(workerId, {
      ...this.#timings,
      processor,
      logger: this.#logger(workerId),
      onEvent: (event) => this.events.push({ at: this.scenario.clock.monotonicNow(), event }),
    });
    clock = worker.clock;
    this.workers.set(workerId, worker);
    return worker;
  }

  #logger(workerId: string): Logger {
    const said = (message: string, fields?: Readonly<Record<string, unknown>>): void => {
      const at = this.scenario.clock.monotonicNow();
      if (message.startsWith('workers lost their database session')) {
        this.said.push({ at, workerId, kind: 'judges', others: fields?.workerIds as string[] });
      } else if (
        message.startsWith('a worker judged dead by its session still writes') ||
        message.startsWith('a worker judged dead by its session heartbeats or registered again')
      ) {
        this.said.push({ at, workerId, kind: 'revives', others: [fields?.workerId as string] });
      } else if (message.startsWith('this worker lost its database session')) {
        this.said.push({ at, workerId, kind: 'lost', others: [] });
      }
    };
    return { debug: () => {}, info: said, warn: said, error: () => {} };
  }

  /** The lease keys a worker's shard consumers hold. */
  holds(workerId: string): string[] {
    return (this.workers.get(workerId)?.consumer.status().leases ?? []).map((lease) => lease.leaseKey).sort();
  }

  /** When anyone judged `owner` dead. */
  judgedDead(owner: string, since = 0): number[] {
    return this.said
      .filter((said) => said.kind === 'judges' && said.at >= since && said.others.includes(owner))
      .map((said) => said.at);
  }

  /** Lease takes (`lease-taken` events) from `since` on. */
  takes(since = 0): Take[] {
    return this.events.flatMap(({ at, event }) =>
      event.type === 'lease-taken' && at >= since
        ? [
            {
              at,
              workerId: event.workerId,
              leaseKey: event.leaseKey,
              from: event.previousOwner,
              stolen: event.stolen,
            },
          ]
        : [],
    );
  }

  /** The steps of the hand-offs a worker asked for (`requested`, `received`, `fell-back`, `dropped`). */
  handoffSteps(workerId: string): string[] {
    return this.events.flatMap(({ event }) =>
      event.type === 'lease-handoff' && event.workerId === workerId && event.to === workerId
        ? [`${event.leaseKey} ${event.step}`]
        : [],
    );
  }

  /** Stored owner changes from one worker to another in [since, until): hand-offs and takes. */
  moves(since: number, until = Number.POSITIVE_INFINITY): number {
    return this.scenario.changes.filter(
      (change) =>
        change.at >= since &&
        change.at < until &&
        change.before?.owner != null &&
        change.after?.owner != null &&
        change.before.owner !== change.after.owner,
    ).length;
  }

  /** Records produced and never handled. */
  lost(): string[] {
    const missing: string[] = [];
    for (let index = 0; index < this.produced; index++) {
      if (!this.handled.has(`r-${index}`)) missing.push(`r-${index}`);
    }
    return missing;
  }

  /** Labels handled more than once. */
  duplicates(): string[] {
    return [...this.handled].filter(([, count]) => count > 1).map(([label]) => label);
  }

  /** Stops producing and runs until every record was handled (at most `limitMs`). */
  async drain(limitMs = 30_000): Promise<void> {
    this.#producing = false;
    await this.scenario.run(100);
    await this.scenario.runUntil(() => this.lost().length === 0, limitMs);
  }
}

/** Starts the workers one by one and runs until each holds `perWorker` leases. */
async function balanced(fleet: Fleet, workerIds: readonly string[], perWorker: number): Promise<boolean> {
  return fleet.scenario.runUntil(
    () => workerIds.every((workerId) => fleet.holds(workerId).length === perWorker),
    30_000,
    50,
  );
}

describe('session liveness meeting the other mechanisms', () => {
  it('(a) a session cut inside a batch: the leases are taken at once, the batch’s checkpoint is refused, the worker attaches again and rejoins; only its unfinished batches are handled twice', async () => {
    const scenario = new Scenario({ shards: 4, seed: 5, sessions: true });
    const sessions = scenario.sessions as NonNullable<Scenario['sessions']>;
    const fleet = new Fleet(scenario);
    fleet.produce();
    const first = fleet.start('W1', { batchMs: 1_500 });
    await scenario.run(2_000);
    fleet.start('W2');
    expect(await balanced(fleet, ['W1', 'W2'], 2)).toBe(true);
    await scenario.run(2_000);
    const seen = fleet.batches.length;
    expect(
      await scenario.runUntil(() => fleet.batches.slice(seen).some((b) => b.workerId === 'W1'), 5_000, 10),
    ).toBe(true);
    const inFlight = fleet.batches.slice(seen).find((b) => b.workerId === 'W1') as Batch;
    const held = fleet.holds('W1');
    // Its connection is cut: the database ends its session at once, and its first attach again fails.
    first.storeFaults.failNext(1, { operations: ['workers.attachSession'] });
    expect(sessions.cut('W1', 0)).toBe(true);
    const cutAt = scenario.clock.monotonicNow();

    expect(
      await scenario.runUntil(() => held.every((key) => fleet.holds('W2').includes(key)), 5_000, 10),
    ).toBe(true);
    expect(scenario.clock.monotonicNow() - cutAt).toBeLessThan(TIMINGS.livenessCheckIntervalMs + 1_000);
    expect(fleet.judgedDead('W1', cutAt)).toHaveLength(1);
    const taken = fleet.takes(cutAt).filter((take) => take.from === 'W1');
    expect(taken.map((take) => [take.workerId, take.leaseKey, take.stolen]).sort()).toEqual(
      held.map((key) => ['W2', key, false]),
    );
    // The batch W1 was in when its session went ends after the take: its checkpoint is refused.
    expect(await scenario.runUntil(() => inFlight.checkpointed !== null, 5_000, 10)).toBe(true);
    expect(inFlight.start).toBeLessThanOrEqual(cutAt);
    expect(inFlight.end).toBeGreaterThan(Math.max(...taken.map((take) => take.at)));
    expect(inFlight.checkpointed).toBe(false);

    expect(await scenario.runUntil(() => sessions.held('W1'), 5_000, 10)).toBe(true);
    expect(await balanced(fleet, ['W1', 'W2'], 2)).toBe(true);
    await fleet.drain();
    expect(fleet.lost()).toEqual([]);
    const unfinished = new Set(
      fleet.batches.filter((b) => b.workerId === 'W1' && b.checkpointed === false).flatMap((b) => b.labels),
    );
    const duplicates = fleet.duplicates();
    expect(duplicates.length).toBeGreaterThan(0);
    expect(duplicates.filter((label) => !unfinished.has(label))).toEqual([]);
  });

  it('(b) a database restart under the fleet: every worker finds its own session gone and attaches again; nobody is judged dead, no lease moves, nothing is lost', async () => {
    const scenario = new Scenario({ shards: 6, seed: 7, sessions: true });
    const sessions = scenario.sessions as NonNullable<Scenario['sessions']>;
    const fleet = new Fleet(scenario);
    fleet.produce();
    fleet.start('W1');
    await scenario.run(1_000);
    fleet.start('W2');
    await scenario.run(1_000);
    fleet.start('W3');
    expect(await balanced(fleet, ['W1', 'W2', 'W3'], 2)).toBe(true);
    await scenario.run(3_000);
    const restartAt = scenario.clock.monotonicNow();
    expect(sessions.restart(2_000)).toBe(3);
    await scenario.run(15_000);

    for (const workerId of ['W1', 'W2', 'W3']) {
      expect(sessions.held(workerId)).toBe(true);
      expect(
        fleet.events.some(
          ({ at, event }) =>
            event.type === 'store-error' &&
            event.workerId === workerId &&
            at >= restartAt &&
            at < restartAt + 2_000,
        ),
      ).toBe(true);
      expect(fleet.said.filter((said) => said.kind === 'lost' && said.workerId === workerId)).toHaveLength(1);
      expect(fleet.holds(workerId)).toHaveLength(2);
    }
    expect(fleet.said.filter((said) => said.kind === 'judges')).toEqual([]);
    expect(fleet.moves(restartAt)).toBe(0);
    await fleet.drain();
    expect(fleet.lost()).toEqual([]);
    expect(fleet.duplicates()).toEqual([]);
  });

  // With the simulation's 3 s leases an outage of the database lets leases expire: the moves that follow
  // are expiry's, and the same outage without sessions makes as many.
  it.each([2_000, 4_000, 6_000])(
    '(b′) a database restart of %i ms with 3 s leases moves no more leases than the same outage without sessions',
    async (downMs) => {
      const moves = async (sessions: boolean): Promise<number> => {
        const scenario = new Scenario({ shards: 6, seed: 7, sessions });
        const fleet = new Fleet(scenario, { ...TIMINGS, leaseExpiryMs: SIMULATION_TIMINGS.leaseExpiryMs });
        fleet.produce();
        for (const workerId of ['W1', 'W2', 'W3']) {
          fleet.start(workerId);
          await scenario.run(1_000);
        }
        expect(await balanced(fleet, ['W1', 'W2', 'W3'], 2)).toBe(true);
        await scenario.run(3_000);
        const restartAt = scenario.clock.monotonicNow();
        if (scenario.sessions === null) {
          scenario.store.faults.setUnavailable();
          void scenario.clock.sleep(downMs).then(() => scenario.store.faults.restore());
        } else {
          expect(scenario.sessions.restart(downMs)).toBe(3);
        }
        await scenario.run(15_000);
        expect(fleet.said.filter((said) => said.kind === 'judges')).toEqual([]);
        expect(await balanced(fleet, ['W1', 'W2', 'W3'], 2)).toBe(true);
        await fleet.drain();
        expect(fleet.lost()).toEqual([]);
        return fleet.moves(restartAt);
      };
      const withSessions = await moves(true);
      expect(withSessions).toBeLessThanOrEqual(await moves(false));
    },
  );

  it('(c) an owner killed in the middle of a hand-off it was asked for: the requester takes the lease at once, not at the hand-off timeout', async () => {
    const scenario = new Scenario({ shards: 2, seed: 11, sessions: true });
    const fleet = new Fleet(scenario);
    fleet.produce();
    let inShutdown = false;
    const first = fleet.start('W1', {
      onShutdownRequested: async () => {
        inShutdown = true;
        await first.clock.sleep(60_000);
      },
    });
    await scenario.run(3_000);
    expect(fleet.holds('W1')).toHaveLength(2);
    fleet.start('W2');
    expect(await scenario.runUntil(() => inShutdown, 10_000, 10)).toBe(true);
    const asked = fleet.handoffSteps('W2');
    expect(asked).toHaveLength(1);
    const leaseKey = (asked[0] as string).split(' ')[0] as string;
    expect(asked).toEqual([`${leaseKey} requested`]);
    await scenario.run(1_000);
    first.crash();
    const killedAt = scenario.clock.monotonicNow();

    expect(await scenario.runUntil(() => fleet.holds('W2').length === 2, 5_000, 10)).toBe(true);
    expect(scenario.clock.monotonicNow() - killedAt).toBeLessThan(TIMINGS.livenessCheckIntervalMs + 1_000);
    expect(scenario.clock.monotonicNow() - killedAt).toBeLessThan(HANDOFF_TIMEOUT_MS / 4);
    expect(fleet.judgedDead('W1')).toHaveLength(1);
    // Dropped and taken, not fallen back on at the timeout.
    expect(fleet.handoffSteps('W2')).toEqual([`${leaseKey} requested`]);
    expect(fleet.takes(killedAt).map((take) => [take.workerId, take.from, take.stolen])).toEqual([
      ['W2', 'W1', false],
      ['W2', 'W1', false],
    ]);
    await fleet.drain();
    expect(fleet.lost()).toEqual([]);
  });

  it('(d) a requester killed while its hand-off is pending: the lease is not left with it for longer than a rebalance or two', async () => {
    const scenario = new Scenario({ shards: 2, seed: 13, sessions: true });
    const fleet = new Fleet(scenario);
    fleet.produce();
    let inShutdown = false;
    const first = fleet.start('W1', {
      onShutdownRequested: async () => {
        inShutdown = true;
        await first.clock.sleep(3_000);
      },
    });
    await scenario.run(3_000);
    fleet.start('W2');
    expect(await scenario.runUntil(() => inShutdown, 10_000, 10)).toBe(true);
    const asked = fleet.handoffSteps('W2');
    expect(asked).toHaveLength(1);
    const leaseKey = (asked[0] as string).split(' ')[0] as string;
    await scenario.run(1_000);
    (fleet.workers.get('W2') as ScenarioWorker).crash();
    const killedAt = scenario.clock.monotonicNow();

    // The hand-off was still pending when W2 died.
    expect(scenario.lease(leaseKey)?.handoff?.to).toBe('W2');
    expect(scenario.lease(leaseKey)?.owner).toBe('W1');
    await scenario.run(12_000);

    // W1 hands the lease over when its shutdownRequested returns (W2 is still registered); from then on
    // the lease is W2's in the store, until a live worker takes it: within a rebalance or two.
    const owners = scenario.changes
      .filter((change) => change.at >= killedAt && change.after?.leaseKey === leaseKey)
      .map((change) => ({ at: change.at, owner: change.after?.owner ?? null }));
    const handedAt = owners.find((entry) => entry.owner === 'W2')?.at;
    expect(handedAt).toBeDefined();
    const backAt = owners.find((entry) => entry.at > (handedAt as number) && entry.owner !== 'W2')?.at;
    expect(backAt).toBeDefined();
    expect((backAt as number) - (handedAt as number)).toBeLessThanOrEqual(
      2 * 1.25 * TIMINGS.rebalanceIntervalMs + TIMINGS.livenessCheckIntervalMs,
    );
    expect(fleet.judgedDead('W2')).toHaveLength(1);
    expect(fleet.holds('W1')).toHaveLength(2);
    await fleet.drain();
    expect(fleet.lost()).toEqual([]);
  });

  /**
   * W1's machine vanishes (the database ends its session only 8 s later) and W1 runs again at once under
   * its worker id: it cannot attach while the earlier session holds its lock.
   */
  async function restartedUnderHeldSession() {
    const scenario = new Scenario({ shards: 4, seed: 17, sessions: true });
    const sessions = scenario.sessions as NonNullable<Scenario['sessions']>;
    const fleet = new Fleet(scenario);
    fleet.produce();
    fleet.start('W1');
    await scenario.run(2_000);
    fleet.start('W2');
    expect(await balanced(fleet, ['W1', 'W2'], 2)).toBe(true);
    await scenario.run(2_000);
    const leases = fleet.holds('W1');
    (fleet.workers.get('W1') as ScenarioWorker).crash({ sessionEndsAfterMs: 8_000 });
    const restartedAt = scenario.clock.monotonicNow();
    const again = fleet.start('W1');
    await scenario.run(7_000);
    // It could not attach (the lock is held), took its leases up again and works; nobody judges it.
    expect(again.storeFaults.calls('workers.attachSession')).toBeGreaterThan(5);
    expect(sessions.held('W1')).toBe(true);
    expect(fleet.holds('W1')).toEqual(leases);
    expect(fleet.batches.some((batch) => batch.workerId === 'W1' && batch.start > restartedAt + 1_000)).toBe(
      true,
    );
    expect(fleet.judgedDead('W1')).toEqual([]);
    expect(fleet.moves(restartedAt)).toBe(0);
    const attachesBefore = again.storeFaults.calls('workers.attachSession');
    const endedAt = restartedAt + 8_000;
    // The earlier session ends; W1 attaches its own at its next check.
    await scenario.run(6_000);
    expect(sessions.held('W1')).toBe(true);
    expect(again.storeFaults.calls('workers.attachSession')).toBeLessThan(attachesBefore + 4);
    return { scenario, fleet, leases, endedAt };
  }

  it('(e) a worker restarted while its earlier session still holds its lock works without one and is not judged dead; it attaches its own once that session ends', async () => {
    const { fleet, leases } = await restartedUnderHeldSession();
    expect(await balanced(fleet, ['W1', 'W2'], 2)).toBe(true);
    await fleet.drain();
    expect(fleet.lost()).toEqual([]);
    expect(leases).toHaveLength(2);
  });

  // A known gap (reported): when the earlier session ends, the others may check before W1's next
  // attach — W1 is then judged dead (seen holding a session, then without one) and loses its leases at
  // once, though it is running; it attaches, is seen again, and takes its share back by hand-offs.
  it.fails('(e′) … and is not judged dead when that earlier session ends either', async () => {
    const { fleet, endedAt } = await restartedUnderHeldSession();
    expect(fleet.judgedDead('W1')).toEqual([]);
    expect(fleet.moves(endedAt)).toBe(0);
  });

  it('(h) a worker stopped gracefully after a crash was taken over: its released leases are taken within a rebalance or two', async () => {
    for (const seed of [21, 22, 23]) {
      const scenario = new Scenario({ shards: 4, seed, sessions: true });
      const fleet = new Fleet(scenario);
      fleet.produce();
      fleet.start('S');
      await scenario.run(2_000);
      const first = fleet.start('V1');
      expect(await balanced(fleet, ['S', 'V1'], 2)).toBe(true);
      await scenario.run(1_500);
      first.crash();
      expect(await balanced(fleet, ['S'], 4)).toBe(true);
      const second = fleet.start('V2');
      expect(await balanced(fleet, ['S', 'V2'], 2)).toBe(true);
      await scenario.run(1_500);
      const stoppedAt = scenario.clock.monotonicNow();
      expect(await scenario.timed(second.consumer.stop(), 30_000)).not.toBeNull();
      expect(await balanced(fleet, ['S'], 4)).toBe(true);
      const takenAfter = scenario.clock.monotonicNow() - stoppedAt;
      expect(takenAfter, `seed ${seed}`).toBeLessThanOrEqual(
        2 * 1.25 * TIMINGS.rebalanceIntervalMs + TIMINGS.livenessCheckIntervalMs,
      );
      await fleet.drain();
      expect(fleet.lost()).toEqual([]);
    }
  });

  it('(i) a worker stopped gracefully and started again at once under its id is not judged dead once it registered: no lease is taken from it without a hand-off', async () => {
    for (const seed of [31, 32, 33, 34]) {
      const scenario = new Scenario({ shards: 4, seed, sessions: true });
      const fleet = new Fleet(scenario);
      fleet.produce();
      fleet.start('S');
      await scenario.run(2_000);
      const first = fleet.start('W');
      expect(await balanced(fleet, ['S', 'W'], 2)).toBe(true);
      await scenario.run(1_500);
      expect(await scenario.timed(first.consumer.stop(), 30_000)).not.toBeNull();
      const restartedAt = scenario.clock.monotonicNow();
      fleet.start('W');
      expect(await balanced(fleet, ['S', 'W'], 2)).toBe(true);
      await scenario.run(3_000);
      // Whatever S took from the restarted W, it took by a hand-off (W finished its batch first).
      const direct = fleet
        .takes(restartedAt)
        .filter((take) => take.from === 'W' && take.workerId !== 'W' && !take.stolen);
      expect(direct, `seed ${seed}`).toEqual([]);
      await fleet.drain();
      expect(fleet.lost()).toEqual([]);
    }
  });

  it('(f) a slow store, calls taking about the call deadline: liveness checks are slow or time out, and nobody is judged dead', async () => {
    const scenario = new Scenario({ shards: 6, seed: 19, sessions: true });
    const sessions = scenario.sessions as NonNullable<Scenario['sessions']>;
    const fleet = new Fleet(scenario);
    fleet.produce();
    fleet.start('W1');
    await scenario.run(1_000);
    fleet.start('W2');
    await scenario.run(1_000);
    fleet.start('W3');
    expect(await balanced(fleet, ['W1', 'W2', 'W3'], 2)).toBe(true);
    await scenario.run(2_000);
    const slowFrom = scenario.clock.monotonicNow();
    // 80–110% of storeCallTimeoutMs, drawn from a seeded source: most calls answer just in time.
    let state = 7;
    const draw = (): number => {
      state = (state * 1_103_515_245 + 12_345) % 2 ** 31;
      return state / 2 ** 31;
    };
    scenario.store.faults.setLatency(() => Math.floor(TIMINGS.storeCallTimeoutMs * (0.8 + 0.3 * draw())));
    await scenario.run(20_000);
    scenario.store.faults.setLatency(0);
    await scenario.run(5_000);

    const timedOut = fleet.events.filter(
      ({ at, event }) =>
        at >= slowFrom &&
        event.type === 'store-error' &&
        /(session\.check|workers\.liveSessions) .*did not answer/.test(
          String((event.error as Error).message),
        ),
    );
    expect(timedOut.length).toBeGreaterThan(0);
    expect(fleet.said.filter((said) => said.kind === 'judges')).toEqual([]);
    // No lease moved between workers (a worker takes up its own lease again after failed renewals).
    expect(fleet.takes(slowFrom).filter((take) => take.from !== null && take.from !== take.workerId)).toEqual(
      [],
    );
    expect(fleet.moves(slowFrom)).toBe(0);
    for (const workerId of ['W1', 'W2', 'W3']) expect(sessions.held(workerId)).toBe(true);
    await fleet.drain();
    expect(fleet.lost()).toEqual([]);
  });

  /** W1 and W2 hold two leases each; W1's connection is cut and it cannot attach again for ~15 s. */
  async function judgedDeadWithoutSession(seed: number, beforeCut: (fleet: Fleet) => void = () => {}) {
    const scenario = new Scenario({ shards: 4, seed, sessions: true });
    const sessions = scenario.sessions as NonNullable<Scenario['sessions']>;
    const fleet = new Fleet(scenario);
    fleet.produce();
    const first = fleet.start('W1');
    await scenario.run(2_000);
    fleet.start('W2');
    expect(await balanced(fleet, ['W1', 'W2'], 2)).toBe(true);
    await scenario.run(2_000);
    const leases = fleet.holds('W1');
    beforeCut(fleet);
    first.storeFaults.failNext(30, { operations: ['workers.attachSession'] });
    expect(sessions.cut('W1', 0)).toBe(true);
    const cutAt = scenario.clock.monotonicNow();
    expect(await scenario.runUntil(() => sessions.held('W1'), 30_000, 10)).toBe(true);
    const attachedAt = scenario.clock.monotonicNow();
    expect(attachedAt - cutAt).toBeGreaterThan(10_000);
    expect(fleet.judgedDead('W1', cutAt).length).toBeGreaterThan(0);
    return { scenario, fleet, leases, cutAt, attachedAt };
  }

  it('(g) a worker judged dead that keeps writing without a session: it takes its share back and is not judged again while it has none — no endless churn', async () => {
    const { scenario, fleet, leases, cutAt, attachedAt } = await judgedDeadWithoutSession(23);
    // W2 took both leases at once; W1, running, asked for its share back.
    const taken = fleet.takes(cutAt).filter((take) => take.from === 'W1');
    expect(taken.map((take) => take.leaseKey).sort()).toEqual(leases);
    expect(Math.max(...taken.map((take) => take.at)) - cutAt).toBeLessThan(1_500);
    const back = fleet.takes(cutAt).filter((take) => take.workerId === 'W1');
    expect(back.length).toBe(2);
    expect(back.every((take) => take.stolen && take.at < attachedAt)).toBe(true);
    // Then nothing moves while W1 still has no session, nor after it attached.
    const settledAt = Math.max(...back.map((take) => take.at));
    await scenario.run(5_000);
    expect(fleet.judgedDead('W1')).toHaveLength(1);
    expect(fleet.moves(settledAt + 1)).toBe(0);
    expect(fleet.holds('W1')).toHaveLength(2);
    await fleet.drain();
    expect(fleet.lost()).toEqual([]);
  });

  it('(g′) a worker judged dead keeps a lease whose take failed: its counter moves, it is revived and keeps it', async () => {
    const { scenario, fleet, cutAt, attachedAt } = await judgedDeadWithoutSession(29, (fleet) => {
      // W2's first take fails: one of W1's leases stays W1's past the judgement.
      (fleet.workers.get('W2') as ScenarioWorker).storeFaults.failNext(1, { operations: ['leases.take'] });
    });
    const taken = fleet.takes(cutAt).filter((take) => take.from === 'W1');
    expect(taken).toHaveLength(1);
    const revived = fleet.said.filter((said) => said.kind === 'revives' && said.others.includes('W1'));
    expect(revived).toHaveLength(1);
    const revivedAt = (revived[0] as Said).at;
    expect(revivedAt).toBeLessThan(cutAt + 3_000);
    expect(revivedAt).toBeLessThan(attachedAt);
    await scenario.run(5_000);
    // Not judged again, though without a session for 10 s more; the fleet evens out and stays so.
    expect(fleet.judgedDead('W1')).toHaveLength(1);
    expect(fleet.moves(revivedAt)).toBeLessThanOrEqual(1);
    expect(fleet.holds('W1')).toHaveLength(2);
    await fleet.drain();
    expect(fleet.lost()).toEqual([]);
  });
});
