import { randomBytes } from 'node:crypto';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { CONSUMER_DEFAULTS } from '@kcl/consumer';
import type { LeaseStore } from '@kcl/core';
import { ExtendedSequenceNumber, guardLeaseStore, hashKeyRange, MAX_HASH_KEY, seededRandom } from '@kcl/core';
import { createLeasePlanner, withStoreDeadlines } from './consumer-internals.js';
import type { LeaseSettings } from './lease-worker.js';
import { LeaseWorker } from './lease-worker.js';
import type { LedgerSnapshot } from './request-ledger.js';
import { ledgerDifference } from './request-ledger.js';
import type { ScaleStore } from './scale-stores.js';
import { scaledClock } from './scaled-clock.js';

/** The consumer's defaults, which every simulated worker runs with (on the scaled clock). */
export const LEASE_SETTINGS: LeaseSettings = {
  leaseRenewIntervalMs: CONSUMER_DEFAULTS.leaseRenewIntervalMs,
  leaseExpiryMs: CONSUMER_DEFAULTS.leaseExpiryMs,
  rebalanceIntervalMs: CONSUMER_DEFAULTS.rebalanceIntervalMs,
  maxLeasesToSteal: CONSUMER_DEFAULTS.maxLeasesToSteal,
  // resolveConsumerOptions: leaseExpiryMs / 2 unless given.
  handoffTimeoutMs: Math.floor(CONSUMER_DEFAULTS.leaseExpiryMs / 2),
  handoffPollIntervalMs: CONSUMER_DEFAULTS.handoffPollIntervalMs,
  shardSyncIntervalMs: CONSUMER_DEFAULTS.shardSyncIntervalMs,
  leaseCleanupIntervalMs: CONSUMER_DEFAULTS.leaseCleanupIntervalMs,
  // resolveConsumerOptions' default.
  livenessCheckIntervalMs: 1_000,
};

/** resolveConsumerOptions: min(storeCallTimeoutMs default, leaseRenewIntervalMs). */
const STORE_CALL_TIMEOUT_MS = Math.min(
  CONSUMER_DEFAULTS.storeCallTimeoutMs,
  CONSUMER_DEFAULTS.leaseRenewIntervalMs,
);

export interface FleetCell {
  readonly workers: number;
  readonly leases: number;
}

export interface FleetRunOptions {
  /** A fixed time scale, or null to pick one from the calibration (`chooseTimeScale`). */
  readonly timeScale: number | null;
  readonly maxTimeScale: number;
  readonly minTimeScale: number;
  /** A cell whose estimated wall time exceeds this is not run (reported as skipped). */
  readonly maxCellWallSeconds: number;
  readonly progress: (message: string) => void;
}

/**
 * What one list-and-plan round and one single-lease call cost on this store, measured before the run:
 * the fastest of several, so that a moment of load from other jobs does not slow the whole fleet down.
 */
export interface Calibration {
  /** `leases.list` + `workers.list` + one plan of the listing, fastest of 3 (wall ms). */
  readonly listAndPlanMs: number;
  /** `leases.get` of one lease, fastest of 10 (wall ms): the price of one small request. */
  readonly oneRequestMs: number;
}

export interface PhaseResult {
  /** Fleet time from the phase's start to a balanced fleet; null: not within the phase's limit. */
  readonly convergedFleetMs: number | null;
  readonly limitFleetMs: number;
  /** Leases taken or handed over during the phase. */
  readonly moves: number;
  readonly tallies: LedgerSnapshot;
}

export interface SteadyWindow {
  /** Renew intervals the window spans, and its length in fleet and wall time. */
  readonly renewIntervals: number;
  readonly fleetMs: number;
  readonly wallMs: number;
  readonly tallies: LedgerSnapshot;
  /** Each renewal round of every worker in the window (renewAll + heartbeat), wall ms. */
  readonly renewRoundWallMs: readonly number[];
  /** CPU seconds of the database for this bench in the window (wall); null where not readable. */
  readonly serverCpuSeconds: number | null;
  /** CPU seconds of the bench process (the fleet, and SQLite) in the window. */
  readonly benchCpuSeconds: number;
  /** The 99th percentile of the bench's event-loop delay in the window: above a few ms, the fleet queued on its own CPU. */
  readonly eventLoopDelayP99Ms: number;
  readonly moves: number;
  readonly leasesLost: number;
  readonly storeErrors: number;
}

export type CellResult =
  | {
      readonly status: 'measured';
      readonly cell: FleetCell;
      readonly timeScale: number;
      readonly calibration: Calibration;
      readonly coldStart: PhaseResult;
      readonly steady: SteadyWindow;
      readonly failover: PhaseResult & { readonly killed: number };
      readonly storeErrors: number;
      readonly storeErrorSamples: readonly string[];
      readonly wallSeconds: number;
    }
  | {
      readonly status: 'skipped';
      readonly cell: FleetCell;
      readonly timeScale: number;
      readonly calibration: Calibration;
      readonly reason: string;
    };

/** Fleet time allowed for each convergence. */
const CONVERGENCE_LIMIT_FLEET_MS = 4 * 60_000;
/** Fraction of the machine the fleet's estimated work may fill at the chosen time scale. */
const TARGET_LOAD = 0.5;

/**
 * One fleet on one store, in four phases on the consumer's default intervals (time scaled):
 * (1) `leases` free leases and `workers` workers started at once, until every worker holds its share
 * (cold start); (2) one rebalance interval to settle, then a steady window of 60 s, whose counted
 * requests give the per-lease-hour figures; (3) a tenth of the workers (at least one) killed, until
 * the others hold every lease evenly (failover); (4) the rest stopped as if killed.
 */
export async function runFleetCell(
  scaleStore: ScaleStore,
  cell: FleetCell,
  options: FleetRunOptions,
): Promise<CellResult> {
  const started = performance.now();
  const { progress } = options;
  const applicationName = `scale-${cell.workers}x${cell.leases}-${randomBytes(3).toString('hex')}`;
  if (scaleStore.liveness && cell.workers > scaleStore.sessionLimit) {
    return {
      status: 'skipped',
      cell,
      timeScale: 1,
      calibration: { listAndPlanMs: 0, oneRequestMs: 0 },
      reason: `${cell.workers} sessions need ${cell.workers} connections of their own; the server allows ${scaleStore.sessionLimit} besides the fleet's pool (max_connections)`,
    };
  }
  const counted = await scaleStore.application(applicationName);
  progress(`${scaleStore.label} ${cell.workers}×${cell.leases}: creating ${cell.leases} leases`);
  await createLeases(counted, cell.leases);
  const calibration = await calibrate(counted);
  const timeScale =
    options.timeScale ?? chooseTimeScale(cell, calibration, scaleStore.name === 'dynamo', options);
  const estimatedWallSeconds = estimatedFleetSeconds() / timeScale;
  if (estimatedWallSeconds > options.maxCellWallSeconds) {
    return {
      status: 'skipped',
      cell,
      timeScale,
      calibration,
      reason: `needs about ${Math.round(estimatedWallSeconds / 60)} min at time scale ${formatScale(timeScale)} (limit ${Math.round(options.maxCellWallSeconds / 60)} min, --max-cell-minutes)`,
    };
  }
  progress(
    `${scaleStore.label} ${cell.workers}×${cell.leases}: list+plan ${calibration.listAndPlanMs.toFixed(1)} ms, one request ${calibration.oneRequestMs.toFixed(2)} ms → time scale ${formatScale(timeScale)}, about ${Math.round(estimatedWallSeconds)} s`,
  );

  const clock = scaledClock(timeScale);
  const store = withStoreDeadlines(
    guardLeaseStore(counted, 'bench store-scale'),
    clock,
    STORE_CALL_TIMEOUT_MS,
  );
  const ledger = scaleStore.ledger;
  let moves = 0;
  let leasesLost = 0;
  let storeErrors = 0;
  const storeErrorSamples = new Set<string>();
  const renewRounds: number[] = [];
  let recordingRenewals = false;
  const workers = Array.from(
    { length: cell.workers },
    (_, index) =>
      new LeaseWorker({
        workerId: `worker-${String(index + 1).padStart(3, '0')}`,
        store,
        settings: LEASE_SETTINGS,
        liveness: scaleStore.liveness,
        clock,
        random: seededRandom(index + 1),
        onRenewRound: (_round, durationMs) => {
          if (recordingRenewals) renewRounds.push(durationMs / timeScale);
        },
        onStoreError: (operation, error) => {
          storeErrors += 1;
          if (storeErrorSamples.size < 5) storeErrorSamples.add(`${operation}: ${firstLine(error)}`);
        },
        onLeaseTaken: () => {
          moves += 1;
        },
        onLeaseLost: () => {
          leasesLost += 1;
        },
      }),
  );
  let alive = [...workers];
  try {
    // (1) Cold start.
    const coldBefore = ledger.snapshot();
    const coldStart = performance.now();
    await Promise.all(workers.map((worker) => worker.start()));
    const coldWall = await waitUntil(
      () => isBalanced(alive, cell.leases),
      clock.toWallMs(CONVERGENCE_LIMIT_FLEET_MS),
      coldStart,
    );
    const coldPhase: PhaseResult = {
      convergedFleetMs: coldWall === null ? null : clock.toFleetMs(coldWall),
      limitFleetMs: CONVERGENCE_LIMIT_FLEET_MS,
      moves,
      tallies: ledgerDifference(ledger.snapshot(), coldBefore),
    };
    progress(
      `${scaleStore.label} ${cell.workers}×${cell.leases}: cold start ${describeConvergence(coldPhase)}`,
    );

    // (2) Settle, then the steady window: it starts halfway between two renewal rounds (the workers
    // started together, so their renewals, shard syncs and cleanups come at the same moments) and
    // spans whole intervals of each, so every worker's periodic calls are counted whole.
    await clock.sleep(LEASE_SETTINGS.rebalanceIntervalMs);
    const windowFleetMs = STEADY_WINDOW_FLEET_MS;
    const renewIntervals = windowFleetMs / LEASE_SETTINGS.leaseRenewIntervalMs;
    const phase = median(workers.map((worker) => worker.loopsStartedAt));
    const renewMs = LEASE_SETTINGS.leaseRenewIntervalMs;
    const sinceHalfway = clock.monotonicNow() - (phase + renewMs / 2);
    await clock.sleep(renewMs - (((sinceHalfway % renewMs) + renewMs) % renewMs));
    const steadyBefore = ledger.snapshot();
    const movesBefore = moves;
    const lostBefore = leasesLost;
    const errorsBefore = storeErrors;
    const serverCpuBefore = await scaleStore.serverCpuSeconds();
    const benchCpuBefore = process.cpuUsage();
    const loopDelay = monitorEventLoopDelay({ resolution: 10 });
    loopDelay.enable();
    recordingRenewals = true;
    const windowStart = performance.now();
    await clock.sleep(windowFleetMs);
    const windowWallMs = performance.now() - windowStart;
    recordingRenewals = false;
    loopDelay.disable();
    const tallies = ledgerDifference(ledger.snapshot(), steadyBefore);
    const benchCpu = process.cpuUsage(benchCpuBefore);
    const serverCpuAfter = await scaleStore.serverCpuSeconds();
    const steady: SteadyWindow = {
      renewIntervals,
      fleetMs: clock.toFleetMs(windowWallMs),
      wallMs: windowWallMs,
      tallies,
      renewRoundWallMs: [...renewRounds],
      serverCpuSeconds:
        serverCpuBefore === null || serverCpuAfter === null ? null : serverCpuAfter - serverCpuBefore,
      benchCpuSeconds: (benchCpu.user + benchCpu.system) / 1e6,
      eventLoopDelayP99Ms: loopDelay.percentile(99) / 1e6,
      moves: moves - movesBefore,
      leasesLost: leasesLost - lostBefore,
      storeErrors: storeErrors - errorsBefore,
    };
    progress(
      `${scaleStore.label} ${cell.workers}×${cell.leases}: steady window of ${renewIntervals} renew interval(s), ${(windowWallMs / 1_000).toFixed(1)} s wall`,
    );

    // (3) A tenth of the fleet dies, halfway between two renewals (the window ended there): their
    // leases expire 30 s later, the mean of a kill at a random moment.
    const killed = Math.max(1, Math.round(cell.workers / 10));
    const failoverBefore = ledger.snapshot();
    const movesBeforeKill = moves;
    const killStart = performance.now();
    const victims = alive.slice(0, killed);
    alive = alive.slice(killed);
    await Promise.all(victims.map((worker) => worker.kill()));
    const failoverWall =
      alive.length === 0
        ? null
        : await waitUntil(
            () => isBalanced(alive, cell.leases),
            clock.toWallMs(CONVERGENCE_LIMIT_FLEET_MS),
            killStart,
          );
    const failover = {
      killed,
      convergedFleetMs: failoverWall === null ? null : clock.toFleetMs(failoverWall),
      limitFleetMs: CONVERGENCE_LIMIT_FLEET_MS,
      moves: moves - movesBeforeKill,
      tallies: ledgerDifference(ledger.snapshot(), failoverBefore),
    };
    progress(
      `${scaleStore.label} ${cell.workers}×${cell.leases}: after ${killed} killed ${describeConvergence(failover)}`,
    );
    return {
      status: 'measured',
      cell,
      timeScale,
      calibration,
      coldStart: coldPhase,
      steady,
      failover,
      storeErrors,
      storeErrorSamples: [...storeErrorSamples],
      wallSeconds: (performance.now() - started) / 1_000,
    };
  } finally {
    // (4) The rest go as if killed: their leases are left to the throwaway database.
    await Promise.all(alive.map((worker) => worker.kill()));
  }
}

/** Every live worker holds its share (⌊L/n⌋ or ⌈L/n⌉), no lease twice, none missing, no hand-off pending. */
function isBalanced(alive: readonly LeaseWorker[], leaseCount: number): boolean {
  const least = Math.floor(leaseCount / alive.length);
  const most = Math.ceil(leaseCount / alive.length);
  const keys = new Set<string>();
  let total = 0;
  for (const worker of alive) {
    if (worker.pendingHandoffs > 0) return false;
    const held = worker.heldLeaseKeys();
    if (held.length < least || held.length > most) return false;
    total += held.length;
    for (const key of held) keys.add(key);
  }
  return total === leaseCount && keys.size === leaseCount;
}

/** Polls `done` every 20 ms until it holds; the wall ms since `since`, or null after `limitWallMs`. */
async function waitUntil(done: () => boolean, limitWallMs: number, since: number): Promise<number | null> {
  for (;;) {
    if (done()) return performance.now() - since;
    if (performance.now() - since > limitWallMs) return null;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** Leases of `count` shards that split the hash key space evenly, so the shard sync finds no hole. */
async function createLeases(store: LeaseStore, count: number): Promise<void> {
  const stripe = (MAX_HASH_KEY + 1n) / BigInt(count);
  let next = 0;
  const lane = async (): Promise<void> => {
    while (next < count) {
      const index = next;
      next += 1;
      const start = stripe * BigInt(index);
      const end = index === count - 1 ? MAX_HASH_KEY : start + stripe - 1n;
      const result = await store.leases.create({
        leaseKey: `shardId-${String(index).padStart(12, '0')}`,
        checkpoint: ExtendedSequenceNumber.of(
          String(49590338271490256608559692538361571095921575989136588898n + BigInt(index)),
        ),
        hashKeyRange: hashKeyRange(start, end),
      });
      if (!result.ok) throw new Error(`bench: creating lease ${index} failed (${result.reason})`);
    }
  };
  await Promise.all(Array.from({ length: Math.min(32, count) }, lane));
}

async function calibrate(store: LeaseStore): Promise<Calibration> {
  const planner = createLeasePlanner({
    workerId: 'calibration',
    leaseExpiryMs: LEASE_SETTINGS.leaseExpiryMs,
    maxLeasesToSteal: LEASE_SETTINGS.maxLeasesToSteal,
    maxLeasesForWorker: Number.POSITIVE_INFINITY,
    random: seededRandom(0),
  });
  const rounds: number[] = [];
  for (let round = 0; round < 3; round++) {
    const start = performance.now();
    const [leases, workers] = await Promise.all([
      store.leases.list(),
      store.workers.list({ metadata: false }),
    ]);
    planner.plan({ leases, workers, heldLeaseKeys: new Set(), now: performance.now() });
    rounds.push(performance.now() - start);
  }
  const requests: number[] = [];
  for (let request = 0; request < 10; request++) {
    const start = performance.now();
    await store.leases.get(`shardId-${String(request).padStart(12, '0')}`);
    requests.push(performance.now() - start);
  }
  return { listAndPlanMs: Math.min(...rounds), oneRequestMs: Math.min(...requests) };
}

/**
 * The time scale at which the fleet's estimated work fills about half of the wall time: each worker
 * lists and plans every rebalance interval and twice a minute more (shard sync, cleanup), and renews
 * every renew interval (one request per lease on DynamoDB, one statement per worker on SQL).
 */
export function chooseTimeScale(
  cell: FleetCell,
  calibration: Calibration,
  renewsPerLease: boolean,
  options: Pick<FleetRunOptions, 'minTimeScale' | 'maxTimeScale'>,
): number {
  const listsPerFleetMs = 1 / LEASE_SETTINGS.rebalanceIntervalMs + 2 / 60_000;
  const renewRequestsPerFleetMs =
    (renewsPerLease ? cell.leases + cell.workers : 2 * cell.workers) / LEASE_SETTINGS.leaseRenewIntervalMs;
  const load =
    cell.workers * calibration.listAndPlanMs * listsPerFleetMs +
    renewRequestsPerFleetMs * calibration.oneRequestMs;
  const scale = TARGET_LOAD / Math.max(load, 1e-6);
  return Math.min(options.maxTimeScale, Math.max(options.minTimeScale, roundScale(scale)));
}

/**
 * The steady window (fleet ms): whole renew, shard-sync and cleanup intervals (60 s with the
 * defaults: two renewals, one shard sync and one cleanup of every worker).
 */
const STEADY_WINDOW_FLEET_MS = leastCommonMultiple([
  LEASE_SETTINGS.leaseRenewIntervalMs,
  LEASE_SETTINGS.shardSyncIntervalMs,
  LEASE_SETTINGS.leaseCleanupIntervalMs,
]);

function leastCommonMultiple(values: readonly number[]): number {
  const gcd = (a: number, b: number): number => (b === 0 ? a : gcd(b, a % b));
  return values.reduce((multiple, value) => (multiple * value) / gcd(multiple, value));
}

/**
 * Fleet seconds a cell takes, about: the cold start, a settle, the wait for the window's phase, the
 * window, the failover (the killed workers' leases expire 30 s after the kill, then a few rounds).
 */
function estimatedFleetSeconds(): number {
  const { rebalanceIntervalMs, leaseRenewIntervalMs } = LEASE_SETTINGS;
  return (
    30 + rebalanceIntervalMs / 1_000 + leaseRenewIntervalMs / 2_000 + STEADY_WINDOW_FLEET_MS / 1_000 + 45
  );
}

/** Two significant digits, so the printed scale is the one used. */
function roundScale(scale: number): number {
  return Number(scale.toPrecision(2));
}

export function formatScale(scale: number): string {
  return `${scale}×`;
}

function describeConvergence(phase: PhaseResult): string {
  return phase.convergedFleetMs === null
    ? `not balanced within ${phase.limitFleetMs / 1_000} s`
    : `balanced after ${(phase.convergedFleetMs / 1_000).toFixed(1)} s (fleet time), ${phase.moves} moves`;
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1
    ? (sorted[middle] as number)
    : ((sorted[middle - 1] as number) + (sorted[middle] as number)) / 2;
}

function firstLine(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  return message.split('\n')[0] ?? message;
}
