import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { FleetSetup } from './fleet-simulation.js';
import { Fleet, minimumMoves, seededRandom, workerName } from './fleet-simulation.js';

/**
 * The stated slack: when workers rebalance at different moments (what the ±25% jitter gives) and their
 * trackers already know the fleet, a plan moves at most (live workers − 1) leases more than the minimum.
 * The only waste is the first fill of free/expired leases up to ceil(total / workers): every worker filled
 * to the ceiling beyond the N mod W that the even spread allows gives one lease back later.
 */
const slackOf = (liveWorkers: number): number => Math.max(0, liveWorkers - 1);

interface FleetCase {
  readonly workerCount: number;
  readonly owners: readonly (number | null)[];
  readonly dead: ReadonlySet<number>;
  readonly maxLeasesToSteal: number;
  readonly seed: number;
}

/** Random fleets: 1–20 workers, 0–300 leases, random owners (some free), random dead workers (never all). */
const fleetArbitrary: fc.Arbitrary<FleetCase> = fc
  .record({
    workerCount: fc.integer({ min: 1, max: 20 }),
    leaseCount: fc.integer({ min: 0, max: 300 }),
    freeRate: fc.double({ min: 0, max: 1, noNaN: true }),
    deadRate: fc.double({ min: 0, max: 0.6, noNaN: true }),
    maxLeasesToSteal: fc.integer({ min: 1, max: 10 }),
    seed: fc.nat(),
  })
  .map(({ workerCount, leaseCount, freeRate, deadRate, maxLeasesToSteal, seed }) => {
    const random = seededRandom(seed ^ 0x5bd1e995);
    const owners = Array.from({ length: leaseCount }, () =>
      random() < freeRate ? null : Math.floor(random() * workerCount),
    );
    const dead = new Set<number>();
    // Worker 0 always lives, so the fleet can make progress.
    for (let index = 1; index < workerCount; index++) if (random() < deadRate) dead.add(index);
    return { workerCount, owners, dead, maxLeasesToSteal, seed };
  });

/** Rounds a worker needs at one lease per round: the most any live worker is short of the ceiling share. */
function largestNeed(fleet: Fleet): number {
  const counts = [...fleet.liveCounts().values()];
  const share = Math.ceil(fleet.leases.size / counts.length);
  return Math.max(0, ...counts.map((count) => share - count));
}

interface RunResult {
  readonly rounds: number;
  readonly moves: number;
  readonly overTarget: string[];
  readonly failedTakes: number;
}

function runUntilBalanced(fleet: Fleet, maxRounds: number, onRound?: (moves: number) => void): RunResult {
  let rounds = 0;
  let moves = 0;
  let failedTakes = 0;
  const overTarget: string[] = [];
  while (!fleet.isBalanced() && rounds < maxRounds) {
    const report = fleet.round();
    rounds += 1;
    moves += report.moves;
    failedTakes += report.failedTakes;
    overTarget.push(...report.overTarget);
    onRound?.(report.moves);
  }
  return { rounds, moves, overTarget, failedTakes };
}

/** Once balanced, further rounds move nothing: no steals, no takes. */
function expectQuietOnceBalanced(fleet: Fleet, rounds: number): void {
  expect(fleet.isBalanced()).toBe(true);
  for (let round = 0; round < rounds; round++) {
    const report = fleet.round();
    expect(report.moves).toBe(0);
    expect(report.steals).toBe(0);
  }
}

function setup(fleetCase: FleetCase, overrides: Pick<FleetSetup, 'primed' | 'mode'>): FleetSetup {
  return { ...fleetCase, ...overrides };
}

const EXPIRY_ROUNDS = Math.ceil(45_000 / 6_000) + 1;

describe('a fleet of rebalancers over a shared lease table', () => {
  it('converges, stays within its targets and the stated slack, steals nothing once balanced, and absorbs a crash of 25% of its workers', () => {
    fc.assert(
      fc.property(fleetArbitrary, (fleetCase) => {
        const fleet = new Fleet(setup(fleetCase, { primed: true, mode: 'sequential' }));
        const optimum = fleet.minimumMoves();
        const need = largestNeed(fleet);
        const first = runUntilBalanced(fleet, 1_000);
        expect(fleet.isBalanced()).toBe(true);
        expect(first.rounds).toBeLessThanOrEqual(need + 1);
        expect(first.overTarget).toEqual([]);
        expect(first.moves).toBeLessThanOrEqual(optimum + slackOf(fleet.alive.size));
        expectQuietOnceBalanced(fleet, 3);

        // Crash a quarter of the live workers (at least one when two or more live).
        const live = [...fleet.alive].sort();
        const victims = live.slice(0, Math.floor(live.length / 4)).map((workerId) => workerId);
        if (victims.length === 0) return;
        for (const workerId of victims) fleet.kill(workerId);
        const lastRenewal = fleet.now - fleet.intervalMs;
        const deadLeases = new Set(
          [...fleet.leases.values()].filter((l) => victims.includes(l.owner ?? '')).map((l) => l.leaseKey),
        );
        const crashOptimum = minimumMoves(fleet.leases.size, [...fleet.liveCounts().values()]);
        // Until the expiry passes, the dead still count: the fleet is balanced, so nothing moves.
        while (fleet.now - lastRenewal <= fleet.leaseExpiryMs) {
          expect(fleet.round().moves).toBe(0);
        }
        // The first round after the expiry takes every lease of the dead workers.
        const recovery = fleet.round();
        const stillDead = [...deadLeases].filter((key) =>
          victims.includes(fleet.leases.get(key)?.owner ?? ''),
        );
        expect(stillDead).toEqual([]);
        const rest = runUntilBalanced(fleet, 1_000);
        expect(fleet.isBalanced()).toBe(true);
        expect([...recovery.overTarget, ...rest.overTarget]).toEqual([]);
        expect(recovery.moves + rest.moves).toBeLessThanOrEqual(crashOptimum + slackOf(fleet.alive.size));
        expectQuietOnceBalanced(fleet, 2);
      }),
      { numRuns: 150 },
    );
  });

  it('with trackers that start cold, converges after the dead expire; the extra moves are those made while the dead looked alive', () => {
    fc.assert(
      fc.property(fleetArbitrary, (fleetCase) => {
        const fleet = new Fleet(setup(fleetCase, { primed: false, mode: 'sequential' }));
        const optimum = fleet.minimumMoves();
        const need = largestNeed(fleet);
        let movesWhileDeadLookAlive = 0;
        const run = runUntilBalanced(fleet, 1_000, (moves) => {
          // A dead worker is first seen at time 0 and looks alive until the expiry has passed.
          if (fleet.now - fleet.intervalMs <= fleet.leaseExpiryMs) movesWhileDeadLookAlive += moves;
        });
        expect(fleet.isBalanced()).toBe(true);
        expect(run.rounds).toBeLessThanOrEqual(EXPIRY_ROUNDS + need);
        expect(run.overTarget).toEqual([]);
        expect(run.moves).toBeLessThanOrEqual(optimum + slackOf(fleet.alive.size) + movesWhileDeadLookAlive);
        expectQuietOnceBalanced(fleet, 3);
        // Every lease of a dead worker ended with a live one.
        expect(fleet.orphanedLeases()).toEqual([]);
      }),
      { numRuns: 150 },
    );
  });

  it('when every worker plans from the same listing, conditional takes settle the races and the fleet still converges', () => {
    let failedTakes = 0;
    fc.assert(
      fc.property(fleetArbitrary, (fleetCase) => {
        const fleet = new Fleet(setup(fleetCase, { primed: true, mode: 'snapshot' }));
        const need = largestNeed(fleet);
        const run = runUntilBalanced(fleet, 1_000);
        failedTakes += run.failedTakes;
        expect(fleet.isBalanced()).toBe(true);
        expect(run.rounds).toBeLessThanOrEqual(2 * need + 10);
        expect(run.overTarget).toEqual([]);
        // Each lease has exactly one owner at any time, and it is a worker of the fleet.
        for (const lease of fleet.leases.values())
          expect(fleet.rebalancers.has(lease.owner ?? '')).toBe(true);
        expectQuietOnceBalanced(fleet, 3);
      }),
      { numRuns: 150 },
    );
    // Simultaneous plans do collide: the conditional take is what keeps them safe.
    expect(failedTakes).toBeGreaterThan(0);
  });

  it('a new worker joining a balanced fleet only steals, one lease per check by default, until it is within one of the rest', () => {
    const owners = Array.from({ length: 100 }, (_, index) => index % 4);
    const fleet = new Fleet({
      workerCount: 5,
      owners,
      dead: new Set(),
      maxLeasesToSteal: 1,
      seed: 7,
      primed: true,
      mode: 'sequential',
    });
    const run = runUntilBalanced(fleet, 100);
    expect(fleet.isBalanced()).toBe(true);
    // 100 leases over 5 workers: the newcomer needs 20, stolen one per round.
    expect(run.moves).toBe(20);
    expect(run.rounds).toBe(20);
    expect(fleet.liveCounts().get(workerName(4))).toBe(20);
  });
});
