// One file on purpose: FleetRun is the state of one seeded run (its clock, random draws, workers,
// ledger and story), and its schedule reads top to bottom as the run goes — chaos, calm, the end.
// The parts that stand alone live beside it: fault-schedule.ts (what each fault does),
// fleet-progress.ts (what "caught up" means, the story of events), simulation-timings.ts.
import { type Consumer, createConsumer } from '@kcl/consumer';
import type { KclEvent, Lease, Logger, RandomSource } from '@kcl/core';
import { SEAL_OWNER } from '@kcl/store-migrate';
import { type FaultController, seededRandom } from '@kcl/testkit';
import { ConsumerWatch } from './consumer-watch.js';
import { drawKinesisFaults, type FaultContext, injectStoreFault } from './fault-schedule.js';
import { shardsBehind, storyOfEvent, streamsBehind } from './fleet-progress.js';
import { FleetStreams, KEYS_PER_STREAM } from './fleet-streams.js';
import { Ledger, type Violation } from './ledger.js';
import { type KinesisCaller, NO_KINESIS_FAULTS, SimulatedKinesis } from './simulated-kinesis.js';
import { SimulatedMigration, type SimulatedStores, simulatedMemoryStores } from './simulated-migration.js';
import {
  isExactlyOnceKind,
  PROCESSOR_KINDS,
  type ProcessorKind,
  simulatedProcessorOptions,
} from './simulated-processors.js';
import type { SessionProcess, SimulatedSessions } from './simulated-sessions.js';
import { SimulatedStream } from './simulated-stream.js';
import { type FreezableClock, SimulationClock } from './simulation-clock.js';
import { SIMULATION_TIMINGS } from './simulation-timings.js';

export { SIMULATION_TIMINGS } from './simulation-timings.js';

export interface FleetSimulationOptions {
  readonly seed: number;
  /** How long workers join, crash and stop, shards split and merge, and faults come and go. Default 40 s. */
  readonly chaosMs?: number;
  /** After the chaos: how long the fleet has to read every shard to its end or tip. Default 40 s. */
  readonly settleLimitMs?: number;
  /** The processor behaviour; default: chosen by the seed. */
  readonly processor?: ProcessorKind;
  /** Adds every handling of this key's records to the story. */
  readonly traceKey?: string;
  /** One memory store, or a live migration between two; default: chosen by the seed (memory with several streams). */
  readonly stores?: 'memory' | 'migration';
  /**
   * How many streams the application reads (default 1). With two or more, the workers get a stream
   * tracker whose list the schedule changes: streams are added and dropped, and former streams' leases
   * are deleted after a wait; the invariants are checked per stream.
   */
  readonly streams?: number;
  /**
   * Session liveness: the store offers database sessions, workers hold one and take the leases of a
   * worker whose session ended without waiting for them to expire; the schedule ends sessions (a
   * process dying, a machine vanishing, a cut connection, a database restart). Default: chosen by the
   * seed, about half the runs (drawn apart from the schedule: a run without sessions is the run it was
   * before sessions existed). A live migration has none.
   */
  readonly sessions?: boolean;
}

export interface FleetSimulationResult {
  readonly seed: number;
  readonly processor: ProcessorKind;
  readonly stores: 'memory' | 'migration';
  readonly violations: readonly Violation[];
  /** Session liveness: what ended sessions, and the leases taken because their owner's session had. */
  readonly sessions?: {
    readonly livenessCheckIntervalMs: number;
    /** Database restarts (every session ended, every call failed for a while). */
    readonly restarts: number;
    /** Connections cut under running workers. */
    readonly cuts: number;
    /** Leases taken from an owner judged dead, before they could have expired. */
    readonly deadOwnerTakes: number;
  };
  /** The schedule and what the fleet did, one line each, in time order. */
  readonly story: readonly string[];
  /** Several streams: what happened to the list and to former streams' leases. */
  readonly streams?: {
    readonly count: number;
    readonly added: number;
    readonly removed: number;
    readonly deleted: number;
    readonly recreated: number;
    /** The longest a record waited from its writing to its first handling. */
    readonly longestWaitMs: number;
  };
  readonly stats: {
    readonly produced: number;
    readonly duplicates: number;
    readonly simulatedMs: number;
    readonly steps: number;
    readonly workers: number;
    readonly crashes: number;
    readonly gracefulStops: number;
    readonly splits: number;
    readonly merges: number;
  };
}

const APPLICATION = 'simulated-app';
const STREAM = 'simulated-stream';
const KEYS = 16;
const MAX_WORKERS = 5;
const MAX_OPEN_SHARDS = 6;
const MAX_OPEN_SHARDS_PER_STREAM = 4;
/** How long producing goes on after the chaos, so every lease must still move at the end. */
const TAIL_PRODUCING_MS = 4_000;

interface SimulatedWorker {
  readonly workerId: string;
  readonly startedAt: number;
  readonly clock: FreezableClock;
  readonly storeFaults: FaultController;
  readonly kinesis: KinesisCaller;
  readonly consumer: Consumer;
  /** With sessions: the process as the database sees it. */
  readonly session: SessionProcess | null;
  state: 'running' | 'stopping' | 'stopped' | 'crashed' | 'failed';
}

/** The latest write that moved a lease's counter: when, from which owner to which, and when the one before it was. */
interface LeaseWrite {
  readonly at: number;
  readonly previousAt: number | null;
  readonly from: string | null;
  readonly to: string | null;
}

/**
 * Runs one seeded schedule against a fleet of real workers (`createConsumer`) on simulated time, a
 * simulated Kinesis and the memory lease store behind fault layers, and checks the invariants as the
 * run goes and at its end. The same seed always gives the same run.
 */
export async function runFleetSimulation(options: FleetSimulationOptions): Promise<FleetSimulationResult> {
  const run = new FleetRun(options);
  return run.execute();
}

class FleetRun {
  readonly #options: Required<
    Omit<FleetSimulationOptions, 'processor' | 'traceKey' | 'stores' | 'streams' | 'sessions'>
  >;
  readonly #clock = new SimulationClock();
  readonly #random: RandomSource;
  readonly #processor: ProcessorKind;
  readonly #story: string[] = [];
  readonly #ledger: Ledger;
  readonly #watch: ConsumerWatch;
  readonly #stream: SimulatedStream;
  /** Several streams: the streams and their list; null when the application reads one stream. */
  readonly #streams: FleetStreams | null;
  readonly #kinesis: SimulatedKinesis;
  readonly #stores: SimulatedStores;
  readonly #migration: SimulatedMigration | null;
  /** Leases moved to the target (their source row sealed), and shards seen at SHARD_END. */
  readonly #sealed = new Set<string>();
  readonly #ended = new Set<string>();
  readonly #workers = new Map<string, SimulatedWorker>();
  readonly #pendingStops = new Map<string, number>();
  readonly #maxRecords: number;
  /** Per run: how long a store call may take (the deadline), below the expiry. */
  readonly #storeCallTimeoutMs: number;
  readonly #partialFailures: boolean;
  readonly #poisonMessages: boolean;
  /** Session liveness, or null (a store without sessions). */
  readonly #sessions: SimulatedSessions | null;
  /** The draws of session liveness, apart from the schedule's. */
  readonly #sessionRandom: RandomSource;
  readonly #livenessCheckIntervalMs: number;
  /** With sessions: each lease's latest write. */
  readonly #lastWrites = new Map<string, LeaseWrite>();
  #deadOwnerTakes = 0;
  #nextWorker = 1;
  #producing = true;
  #stats = { workers: 0, crashes: 0, gracefulStops: 0, splits: 0, merges: 0 };

  constructor(options: FleetSimulationOptions) {
    this.#options = {
      seed: options.seed,
      chaosMs: options.chaosMs ?? 40_000,
      settleLimitMs: options.settleLimitMs ?? 40_000,
    };
    this.#random = seededRandom(options.seed);
    this.#sessionRandom = seededRandom((options.seed ^ 0x5e551075) >>> 0);
    // Drawn whatever the options say, so a seed's session draws are the same when sessions are asked for.
    const drawn = this.#sessionRandom() < 0.5;
    const sessions = options.sessions ?? (options.stores !== 'migration' && drawn);
    if (sessions && options.stores === 'migration') {
      throw new Error(
        'simulation: a live migration has no session liveness (sessions and stores: migration)',
      );
    }
    // The consumer's default (1 s), or twice as often as the renewals; always drawn, as above.
    const checkIntervalMs = this.#sessionRandom() < 0.5 ? 500 : 1_000;
    this.#livenessCheckIntervalMs = sessions ? checkIntervalMs : 0;
    this.#processor =
      options.processor ??
      (PROCESSOR_KINDS[Math.floor(this.#random() * PROCESSOR_KINDS.length)] as ProcessorKind);
    this.#maxRecords = 3 + Math.floor(this.#random() * 25);
    this.#storeCallTimeoutMs = 500 + 500 * Math.floor(this.#random() * 5);
    this.#partialFailures = this.#processor === 'pipeline' && this.#random() < 0.5;
    this.#poisonMessages = this.#processor === 'pipeline' && this.#random() < 0.5;
    const now = (): number => this.#clock.monotonicNow();
    this.#ledger = new Ledger(
      now,
      options.traceKey === undefined ? null : { key: options.traceKey, tell: (line) => this.#tell(line) },
    );
    this.#ledger.orderChecked = !this.#partialFailures;
    this.#watch = new ConsumerWatch(this.#ledger, now, SIMULATION_TIMINGS.leaseExpiryMs);
    const firstShards = 2 + Math.floor(this.#random() * 3);
    this.#streams =
      (options.streams ?? 1) > 1
        ? new FleetStreams({
            count: options.streams ?? 1,
            firstShards,
            random: this.#random,
            clock: this.#clock,
            ledger: this.#ledger,
            tell: (line) => this.#tell(line),
            // Longer than the longest a record waits for its first handling under the chaos (seeds
            // 1–300 of three streams: 16 s; with poison messages, which block a key for up to 15 s
            // each, 33 s).
            graceMs: this.#poisonMessages ? 40_000 : 25_000,
          })
        : null;
    this.#stream =
      this.#streams?.all[0]?.stream ?? new SimulatedStream(STREAM, firstShards, () => this.#clock.now());
    this.#kinesis = new SimulatedKinesis(this.#stream, this.#clock, seededRandom(options.seed ^ 0x5eed));
    this.#streams?.serve(this.#kinesis);
    // Several streams: the checks of former streams follow one lease table (no live migration).
    this.#watch.checkDeliveriesAfterLoss = this.#streams !== null;
    // With sessions the store is memory; the draw is made all the same, so the schedule stays the one
    // the seed has without sessions.
    const useMigration =
      this.#streams === null &&
      (options.stores ?? (this.#random() < 0.25 ? 'migration' : 'memory')) === 'migration' &&
      !sessions &&
      // A live migration cannot checkpoint in a transaction (the draw above is made all the same).
      !isExactlyOnceKind(this.#processor);
    const onChange = (table: string, before: Lease | undefined, after: Lease | undefined): void =>
      this.#leaseChanged(table, before, after);
    this.#migration = useMigration ? new SimulatedMigration(APPLICATION, this.#clock, onChange) : null;
    const memory =
      this.#migration === null
        ? simulatedMemoryStores(APPLICATION, this.#clock, onChange, { sessions })
        : null;
    this.#stores = this.#migration ?? (memory as SimulatedStores);
    this.#sessions = memory?.sessions ?? null;
  }

  async execute(): Promise<FleetSimulationResult> {
    const { chaosMs, settleLimitMs } = this.#options;
    this.#tell(
      `seed ${this.#options.seed}: store calls time out after ${this.#storeCallTimeoutMs} ms, processor ${this.#processor}${this.#partialFailures ? ', failing single messages' : ''}${this.#poisonMessages ? ', poison messages' : ''}, ${this.#streams?.describe() ?? `${this.#stream.openShards().length} shards`}, maxRecords ${this.#maxRecords}${this.#migration === null ? '' : ', a live store migration'}${this.#sessions === null ? '' : `, database sessions checked every ${this.#livenessCheckIntervalMs} ms`}`,
    );
    void this.#produce();
    if (this.#sessions !== null) void this.#sessionChaos(this.#sessions, chaosMs);
    let operating: Promise<void> = Promise.resolve();
    if (this.#migration !== null) {
      const liveAt = 2_000 + Math.floor(this.#random() * 8_000);
      const kills = Math.floor(this.#random() * 4);
      operating = this.#migration.operate(
        {
          liveAt,
          liveAgainAt: liveAt + 2_000 + Math.floor(this.#random() * 6_000),
          cutOverAt: 15_000 + Math.floor(this.#random() * 10_000),
          killBeforeWrites: Array.from({ length: kills }, () => 1 + Math.floor(this.#random() * 15)),
        },
        (line) => this.#tell(line),
      );
    }
    const initial = 2 + Math.floor(this.#random() * 2);
    for (let index = 0; index < initial; index++) this.#startWorker();

    // The chaos: one random action at a time, about every 1.5 s.
    let at = 0;
    for (;;) {
      at += 200 + Math.floor(-Math.log(1 - this.#random()) * 1_300);
      if (at >= chaosMs) break;
      await this.#clock.runUntil(at);
      if (this.#streams === null) this.#act();
      else this.#actOnStreams(this.#streams);
    }
    await this.#clock.runUntil(chaosMs);

    // The calm: faults end, at least two workers run, producing stops soon; the fleet must catch up.
    this.#tell('chaos ends: faults cleared');
    this.#clearFaults();
    if (this.#streams !== null) {
      // Every stream is read by the end: those never listed are listed now (their backlog is required).
      for (const entry of this.#streams.all) {
        if (entry.state === 'dormant') this.#streams.add(entry, false);
      }
    }
    while (this.#running().length < 2) this.#startWorker();
    const settleBy = chaosMs + settleLimitMs;
    await this.#clock.runUntil(chaosMs + TAIL_PRODUCING_MS);
    this.#producing = false;
    this.#tell('producing stops');
    let settled = false;
    while (this.#clock.monotonicNow() < settleBy) {
      await this.#clock.runUntil(this.#clock.monotonicNow() + 1_000);
      if (await this.#caughtUp()) {
        settled = true;
        break;
      }
    }
    if (settled) {
      this.#tell('every shard is read to its end or tip');
      // One more record per key, read by a settled fleet: whatever a previous owner wrote late in a
      // steal window is overwritten now, so the final table must hold every key's last record.
      if (this.#streams === null) {
        for (let key = 0; key < KEYS; key++) this.#put(`key-${key}`);
      } else {
        for (const entry of this.#streams.listed()) {
          for (let key = 0; key < KEYS_PER_STREAM; key++) this.#streams.put(entry, key);
        }
      }
      this.#tell('a last record per key');
      settled = false;
      const lastBy = this.#clock.monotonicNow() + settleLimitMs;
      while (this.#clock.monotonicNow() < lastBy) {
        await this.#clock.runUntil(this.#clock.monotonicNow() + 1_000);
        if (await this.#caughtUp()) {
          settled = true;
          break;
        }
      }
    }
    if (!settled) await this.#reportStall();

    if (this.#migration !== null) {
      // The operator may still be re-running a cut-over it had to kill: give it its time.
      let operated = false;
      void operating.then(() => {
        operated = true;
      });
      const operatorBy = this.#clock.monotonicNow() + 60_000;
      while (!operated && this.#clock.monotonicNow() < operatorBy) {
        await this.#clock.runUntil(this.#clock.monotonicNow() + 1_000);
      }
      if (!this.#migration.complete)
        this.#ledger.violate('stall', 'the live migration’s cut-over never completed');
    }
    if (this.#streams !== null) this.#checkFormerStreamsDeleted(this.#streams);
    // Everyone stops gracefully; each stop must end within the shutdown timeout.
    for (const worker of this.#running()) this.#stopWorker(worker);
    await this.#clock.runUntil(this.#clock.monotonicNow() + SIMULATION_TIMINGS.shutdownTimeoutMs + 2_000);
    for (const [workerId, since] of this.#pendingStops) {
      this.#ledger.violate('stop-timeout', `${workerId}: the graceful stop begun at ${since} ms never ended`);
    }
    // With several streams, a stream whose leases were deleted and that is listed again starts over
    // from its initial position: its records are handled again by design, so the check is single-stream.
    if (isExactlyOnceKind(this.#processor) && this.#streams === null) {
      for (const twice of this.#ledger.handledTwice(5)) {
        this.#ledger.violate('duplicate', `committed more than once: ${twice}`);
      }
    }
    // A lost record makes its key stale too; the final state says something only when nothing was lost.
    const lost = this.#ledger.unhandled > 0;
    // Several streams: the streams listed at the end got the last record per key.
    const listedAtEnd = this.#streams?.listed().map((entry) => `${entry.stream.name}:`) ?? null;
    const include = (key: string): boolean =>
      listedAtEnd === null || listedAtEnd.some((prefix) => key.startsWith(prefix));
    for (const stale of lost ? [] : this.#ledger.staleKeys(include)) {
      this.#ledger.violate(
        'final-state',
        `key ${stale.key}: the last write was #${stale.actual ?? 'none'}, not the last record #${stale.expected}`,
      );
    }
    return {
      seed: this.#options.seed,
      processor: this.#processor,
      stores: this.#stores.kind,
      violations: this.#ledger.violations,
      story: this.#story,
      ...(this.#sessions === null
        ? {}
        : {
            sessions: {
              livenessCheckIntervalMs: this.#livenessCheckIntervalMs,
              restarts: this.#sessions.restarts,
              cuts: this.#sessions.cuts,
              deadOwnerTakes: this.#deadOwnerTakes,
            },
          }),
      ...(this.#streams === null
        ? {}
        : {
            streams: {
              count: this.#streams.all.length,
              ...this.#streams.stats,
              longestWaitMs: this.#ledger.longestWaitMs,
            },
          }),
      stats: {
        produced: this.#ledger.producedCount,
        duplicates: this.#ledger.duplicates(),
        simulatedMs: this.#clock.monotonicNow(),
        steps: this.#clock.steps,
        ...this.#stats,
      },
    };
  }

  // ── the schedule ────────────────────────────────────────────────────────────────────────────

  #act(): void {
    const roll = this.#random();
    const running = this.#running();
    if (roll < 0.14) {
      if (running.length < MAX_WORKERS) this.#startWorker();
    } else if (roll < 0.26) {
      if (running.length > 1) this.#crash(this.#pick(running));
    } else if (roll < 0.34) {
      if (running.length > 1) this.#stopWorker(this.#pick(running));
    } else if (roll < 0.4) {
      const crashed = [...this.#workers.values()].filter((worker) => worker.state === 'crashed');
      if (crashed.length > 0) this.#startWorker(this.#pick(crashed).workerId);
    } else if (roll < 0.5) {
      const open = this.#stream.openShards();
      if (open.length < MAX_OPEN_SHARDS) {
        const parent = this.#pick(open);
        const [low, high] = this.#stream.split(parent.shardId);
        this.#stats.splits += 1;
        this.#tell(`split ${parent.shardId} into ${low.shardId} and ${high.shardId}`);
      }
    } else if (roll < 0.58) {
      const pairs = this.#stream.adjacentOpenPairs();
      if (pairs.length > 0) {
        const [low, high] = this.#pick(pairs);
        const child = this.#stream.merge(low.shardId, high.shardId);
        this.#stats.merges += 1;
        this.#tell(`merge ${low.shardId} and ${high.shardId} into ${child.shardId}`);
      }
    } else if (roll < 0.8) {
      this.#storeFault();
    } else {
      this.#kinesisFault();
    }
  }

  /** The schedule of a multi-stream run: the single-stream actions, and the list of streams changing. */
  #actOnStreams(streams: FleetStreams): void {
    const roll = this.#random();
    const running = this.#running();
    if (roll < 0.12) {
      if (running.length < MAX_WORKERS) this.#startWorker();
    } else if (roll < 0.22) {
      if (running.length > 1) this.#crash(this.#pick(running));
    } else if (roll < 0.29) {
      if (running.length > 1) this.#stopWorker(this.#pick(running));
    } else if (roll < 0.34) {
      const crashed = [...this.#workers.values()].filter((worker) => worker.state === 'crashed');
      if (crashed.length > 0) this.#startWorker(this.#pick(crashed).workerId);
    } else if (roll < 0.42) {
      const { stream } = this.#pick(streams.all);
      const open = stream.openShards();
      if (open.length < MAX_OPEN_SHARDS_PER_STREAM) {
        const parent = this.#pick(open);
        const [low, high] = stream.split(parent.shardId);
        this.#stats.splits += 1;
        this.#tell(`split ${stream.name}/${parent.shardId} into ${low.shardId} and ${high.shardId}`);
      }
    } else if (roll < 0.48) {
      const { stream } = this.#pick(streams.all);
      const pairs = stream.adjacentOpenPairs();
      if (pairs.length > 0) {
        const [low, high] = this.#pick(pairs);
        const child = stream.merge(low.shardId, high.shardId);
        this.#stats.merges += 1;
        this.#tell(`merge ${stream.name}/${low.shardId} and ${high.shardId} into ${child.shardId}`);
      }
    } else if (roll < 0.56) {
      const removable = streams.all.filter((entry) => streams.removable(entry));
      if (removable.length > 0 && streams.listed().length > 1) streams.remove(this.#pick(removable));
    } else if (roll < 0.64) {
      const unlisted = streams.all.filter((entry) => entry.state !== 'listed');
      if (unlisted.length > 0) {
        const entry = this.#pick(unlisted);
        streams.add(entry, entry.state !== 'former' && this.#random() < 0.3);
      }
    } else if (roll < 0.67) {
      const durationMs = 500 + Math.floor(this.#random() * 4_000);
      streams.trackerFailing = true;
      this.#tell(`the stream tracker fails for ${durationMs} ms`);
      void this.#clock.sleep(durationMs).then(() => {
        streams.trackerFailing = false;
      });
    } else if (roll < 0.84) {
      this.#storeFault();
    } else {
      this.#kinesisFault();
    }
  }

  #storeFault(): void {
    const running = this.#running();
    const worker = running.length > 0 && this.#random() < 0.5 ? this.#pick(running) : null;
    const global = this.#pick(this.#stores.globalFaults);
    const faults = worker?.storeFaults ?? global.faults;
    const where = worker === null ? `every worker (${global.name})` : worker.workerId;
    const durationMs = 500 + Math.floor(this.#random() * 4_000);
    injectStoreFault(faults, where, durationMs, this.#faultContext());
  }

  #kinesisFault(): void {
    const running = this.#running();
    const worker = running.length > 0 && this.#random() < 0.5 ? this.#pick(running) : null;
    const durationMs = 500 + Math.floor(this.#random() * 4_000);
    const faults = drawKinesisFaults(this.#random);
    const described = Object.entries(faults)
      .filter(([, value]) => value > 0)
      .map(([name, value]) => `${name} ${value}`)
      .join(', ');
    if (worker === null) this.#kinesis.faults = faults;
    else worker.kinesis.faults = faults;
    this.#tell(
      `kinesis: ${described || 'no'} faults for ${worker?.workerId ?? 'every worker'} for ${durationMs} ms`,
    );
    void this.#clock.sleep(durationMs).then(() => {
      if (worker === null) this.#kinesis.faults = NO_KINESIS_FAULTS;
      else worker.kinesis.faults = NO_KINESIS_FAULTS;
    });
  }

  /**
   * What ends sessions besides a crash, during the chaos, about every 3 s (its own draws): a database
   * restart (every session ends, every call fails for a while), or a running worker's connection cut —
   * the database ends its session at once, or only after a while (until then the worker cannot attach
   * again and the others still see it), or at once while the worker cannot attach again for a few tries.
   */
  async #sessionChaos(sessions: SimulatedSessions, chaosMs: number): Promise<void> {
    const random = this.#sessionRandom;
    for (;;) {
      const waitMs = 500 + Math.floor(-Math.log(1 - random()) * 2_500);
      if (this.#clock.monotonicNow() + waitMs >= chaosMs) return;
      await this.#clock.sleep(waitMs);
      const roll = random();
      if (roll < 0.2) {
        const downMs = 200 + Math.floor(random() * 3_000);
        const ended = sessions.restart(downMs);
        this.#tell(`the database restarts: ${ended} session(s) end, every call fails for ${downMs} ms`);
        continue;
      }
      const running = this.#running();
      if (running.length === 0) continue;
      const worker = running[Math.floor(random() * running.length)] as SimulatedWorker;
      if (roll < 0.6) {
        if (sessions.cut(worker.workerId, 0)) {
          this.#tell(
            `network: ${worker.workerId}'s connection is cut; the database ends its session at once`,
          );
        }
      } else if (roll < 0.85) {
        const noticedAfterMs = 1_000 + Math.floor(random() * 7_000);
        if (sessions.cut(worker.workerId, noticedAfterMs)) {
          this.#tell(
            `network: ${worker.workerId}'s connection is cut; the database ends its session only after ${noticedAfterMs} ms`,
          );
        }
      } else {
        const attempts = 2 + Math.floor(random() * 8);
        if (sessions.cut(worker.workerId, 0)) {
          worker.storeFaults.failNext(attempts, { operations: ['workers.attachSession'] });
          this.#tell(
            `network: ${worker.workerId}'s connection is cut; the database ends its session at once, and its next ${attempts} attach(es) fail`,
          );
        }
      }
    }
  }

  #faultContext(): FaultContext {
    return {
      random: this.#random,
      clock: this.#clock,
      storeCallTimeoutMs: this.#storeCallTimeoutMs,
      tell: (line) => this.#tell(line),
    };
  }

  #clearFaults(): void {
    this.#sessions?.up();
    if (this.#streams !== null) this.#streams.trackerFailing = false;
    for (const { faults } of this.#stores.globalFaults) faults.restore().setLatency(0);
    this.#kinesis.faults = NO_KINESIS_FAULTS;
    for (const worker of this.#workers.values()) {
      worker.storeFaults.restore().setLatency(0);
      worker.kinesis.faults = NO_KINESIS_FAULTS;
    }
  }

  async #produce(): Promise<void> {
    const random = seededRandom(this.#options.seed ^ 0x9e3779b9);
    while (this.#producing) {
      await this.#clock.sleep(40 + Math.floor(random() * 120));
      if (!this.#producing) return;
      if (this.#streams === null) {
        this.#put(`key-${Math.floor(random() * KEYS)}`);
      } else {
        const entry = this.#streams.all[Math.floor(random() * this.#streams.all.length)];
        if (entry !== undefined) this.#streams.put(entry, Math.floor(random() * KEYS_PER_STREAM));
      }
    }
  }

  #put(key: string): void {
    const value = this.#ledger.nextValue(key);
    const { shardId, record } = this.#stream.put(key, new TextEncoder().encode(`${key}#${value}`));
    this.#ledger.produced(shardId, record.sequenceNumber, key, value);
  }

  // ── workers ─────────────────────────────────────────────────────────────────────────────────

  #running(): SimulatedWorker[] {
    return [...this.#workers.values()].filter((worker) => worker.state === 'running');
  }

  #startWorker(reuseId?: string): void {
    const workerId = reuseId ?? `W${this.#nextWorker++}`;
    const clock = this.#clock.processClock();
    const kinesis: KinesisCaller = { clock, faults: NO_KINESIS_FAULTS };
    const plainTarget = this.#migration?.complete === true && this.#random() < 0.5;
    const session = this.#sessions?.process(workerId) ?? null;
    const heldBefore = this.#sessions?.held(workerId) === true;
    const { store, faults: storeFaults } =
      this.#migration === null
        ? this.#stores.workerStore(clock, session ?? undefined)
        : this.#migration.workerStore(clock, undefined, plainTarget);
    const random = seededRandom((this.#options.seed * 31 + this.#stats.workers * 7919) >>> 0);
    const streams =
      this.#streams === null
        ? { streamName: STREAM }
        : {
            streamTracker: this.#streams.tracker,
            streamSyncIntervalMs: this.#streams.syncIntervalMs,
            formerStreams: this.#streams.formerStreams,
          };
    const consumer = createConsumer({
      ...streams,
      applicationName: APPLICATION,
      workerId,
      kinesis: this.#kinesis.client(kinesis),
      leaseStore: store,
      initialPosition: 'TRIM_HORIZON',
      maxRecords: this.#maxRecords,
      ...SIMULATION_TIMINGS,
      storeCallTimeoutMs: this.#storeCallTimeoutMs,
      ...(this.#sessions === null ? {} : { livenessCheckIntervalMs: this.#livenessCheckIntervalMs }),
      clock,
      random,
      logger: this.#logger(workerId),
      onEvent: (event) => this.#event(event),
      ...simulatedProcessorOptions(this.#processor, {
        workerId,
        clock,
        random: seededRandom((this.#options.seed * 17 + this.#stats.workers * 104_729) >>> 0),
        ledger: this.#ledger,
        watch: this.#watch,
        alive: () => !clock.frozen,
        partialFailures: this.#partialFailures,
        poisonMessages: this.#poisonMessages,
        chaos: () => this.#clock.monotonicNow() < this.#options.chaosMs,
      }),
    });
    const worker: SimulatedWorker = {
      workerId,
      startedAt: this.#clock.monotonicNow(),
      clock,
      storeFaults,
      kinesis,
      consumer,
      session,
      state: 'running',
    };
    const previous = this.#workers.get(workerId);
    if (previous !== undefined) previous.state = 'stopped';
    this.#workers.set(workerId, worker);
    this.#stats.workers += 1;
    this.#tell(
      `${workerId} starts${reuseId === undefined ? '' : ' again (same worker id)'}${plainTarget ? ' on the target store' : ''}${heldBefore ? ', its earlier session still held' : ''}`,
    );
    consumer.start().catch((error: unknown) => {
      if (worker.state === 'crashed') return;
      worker.state = 'failed';
      this.#tell(`${workerId} could not start: ${describe(error)}`);
    });
    consumer.stopped().catch((error: unknown) => {
      if (worker.state === 'crashed' || worker.state === 'failed') return;
      worker.state = 'failed';
      this.#ledger.violate('worker-failed', `${workerId} stopped on its own: ${describe(error)}`);
    });
  }

  #crash(worker: SimulatedWorker): void {
    worker.state = 'crashed';
    worker.clock.freeze();
    this.#watch.crashed(worker.workerId);
    this.#stats.crashes += 1;
    if (this.#sessions === null || worker.session === null) {
      this.#tell(`${worker.workerId} crashes (kill -9)`);
      return;
    }
    // The kernel closes a dead process's socket and the database ends its session; a machine that
    // vanishes closes nothing, and the database notices only when TCP gives up on the connection.
    const vanishes = this.#sessionRandom() < 0.3;
    const afterMs = vanishes ? 2_000 + Math.floor(this.#sessionRandom() * 10_000) : 0;
    this.#sessions.processDied(worker.session, afterMs);
    this.#tell(
      vanishes
        ? `${worker.workerId}'s machine vanishes; the database ends its session after ${afterMs} ms`
        : `${worker.workerId} crashes (kill -9); the database ends its session at once`,
    );
  }

  #stopWorker(worker: SimulatedWorker): void {
    worker.state = 'stopping';
    const since = this.#clock.monotonicNow();
    this.#pendingStops.set(worker.workerId, since);
    this.#stats.gracefulStops += 1;
    this.#tell(`${worker.workerId} stops gracefully`);
    void worker.consumer.stop().then(() => {
      this.#pendingStops.delete(worker.workerId);
      worker.state = 'stopped';
      const took = this.#clock.monotonicNow() - since;
      this.#tell(`${worker.workerId} stopped after ${took} ms`);
      if (took > SIMULATION_TIMINGS.shutdownTimeoutMs) {
        this.#ledger.violate(
          'stop-timeout',
          `${worker.workerId}: the graceful stop took ${took} ms (shutdownTimeoutMs ${SIMULATION_TIMINGS.shutdownTimeoutMs})`,
        );
      }
    });
  }

  // ── observation ─────────────────────────────────────────────────────────────────────────────

  #leaseChanged(table: string, before: Lease | undefined, after: Lease | undefined): void {
    if (this.#streams !== null) {
      this.#streams.leaseChanged(before, after);
      // A deleted lease has no owner: its last owner delivers nothing later than the window after.
      if (after === undefined && before !== undefined) this.#watch.ownerChanged(before.leaseKey, null);
    }
    if (after === undefined) return;
    const key = after.leaseKey;
    // A write that moved the counter (a hand-off request does not: it leaves the owner's lease alone).
    if (this.#sessions !== null && after.leaseCounter !== before?.leaseCounter) {
      this.#lastWrites.set(key, {
        at: this.#clock.monotonicNow(),
        previousAt: this.#lastWrites.get(key)?.at ?? null,
        from: before?.owner ?? null,
        to: after.owner,
      });
    }
    if (table === 'source') {
      if (after.owner === SEAL_OWNER) this.#sealed.add(key);
    }
    const who = after.owner ?? before?.owner ?? 'nobody';
    if (before !== undefined && after.checkpoint.isBefore(before.checkpoint)) {
      this.#ledger.violate(
        'checkpoint-backwards',
        `${who} moved the checkpoint of ${key} in ${table} back from ${before.checkpoint} to ${after.checkpoint}`,
      );
    }
    if (after.checkpoint.isShardEnd && !this.#ended.has(key)) {
      this.#ended.add(key);
      this.#ledger.shardEndWritten(key, who);
      this.#tell(`${key} reaches SHARD_END (written by ${who}${table === 'store' ? '' : ` in ${table}`})`);
    }
    // Ownership as the fleet sees it: the source row until the lease is moved, the target row after;
    // the tool's own markers (seals, repair locks) are not owners.
    const authoritative =
      table === 'store' || (table === 'source' ? !this.#sealed.has(key) : this.#sealed.has(key));
    const toolOwner = after.owner?.startsWith('kcl-migrate:') === true;
    if (authoritative && !toolOwner && (before === undefined || before.owner !== after.owner)) {
      this.#watch.ownerChanged(key, after.owner);
    }
  }

  #event(event: KclEvent): void {
    if (this.#streams !== null && event.type === 'lease-lost') {
      this.#watch.lossNoticed(event.workerId, event.leaseKey);
    }
    const line = storyOfEvent(event);
    const deadOwner = event.type === 'lease-taken' && this.#deadOwnerTake(event);
    if (line !== null) this.#tell(deadOwner ? `${line}, its owner judged dead by its session` : line);
  }

  /**
   * Session liveness: whether a take moved a lease from an owner judged dead — not stolen, and sooner
   * after the lease's previous write than an expiry allows. Such a take must follow an end of the
   * owner's session that the taker could have seen (`SimulatedSessions.couldJudgeDead`).
   */
  #deadOwnerTake(event: Extract<KclEvent, { type: 'lease-taken' }>): boolean {
    const sessions = this.#sessions;
    const { workerId: taker, leaseKey, previousOwner: owner } = event;
    if (sessions === null || event.stolen || owner === null || owner === taker) return false;
    const write = this.#lastWrites.get(leaseKey);
    if (write === undefined || write.to !== taker || write.from !== owner || write.previousAt === null) {
      return false;
    }
    const { leaseExpiryMs, rebalanceIntervalMs } = SIMULATION_TIMINGS;
    if (write.at - write.previousAt >= leaseExpiryMs) return false;
    this.#deadOwnerTakes += 1;
    // A judgement stands until a later check sees the session again; checks fail and take time.
    const staleMs =
      leaseExpiryMs +
      rebalanceIntervalMs +
      2 * (this.#livenessCheckIntervalMs + 2 * this.#storeCallTimeoutMs);
    if (!sessions.couldJudgeDead(taker, owner, write.at, staleMs)) {
      this.#ledger.violate(
        'taken-from-live-session',
        `${taker} took ${leaseKey} from ${owner} ${write.at - write.previousAt} ms after its previous write, as a dead owner's, but ${taker} could not have seen ${owner}'s session end (none ended while ${taker} held its own, within ${staleMs} ms)`,
      );
    }
    return true;
  }

  #logger(workerId: string): Logger {
    const error = (message: string, fields?: Readonly<Record<string, unknown>>): void => {
      this.#tell(
        `${workerId} logs an error: ${message}${fields?.error === undefined ? '' : ` (${describe(fields.error)})`}`,
      );
    };
    if (this.#sessions === null) return { debug: () => {}, info: () => {}, warn: () => {}, error };
    // With sessions, the judgements of session liveness are part of the story.
    const said = (message: string, fields?: Readonly<Record<string, unknown>>): void => {
      const line = sessionLogLine(workerId, message, fields);
      if (line !== null) this.#tell(line);
    };
    return { debug: () => {}, info: said, warn: said, error };
  }

  // ── the end ─────────────────────────────────────────────────────────────────────────────────

  /** Every record accounted for, every closed shard at SHARD_END (or its lease gone), every open one at its tip. */
  async #caughtUp(): Promise<boolean> {
    if (this.#ledger.unhandled > 0) return false;
    return (await this.#behind()).length === 0;
  }

  #behind(): Promise<string[]> {
    const ownerState = (lease: Lease): string => this.#ownerState(lease);
    if (this.#streams !== null) return streamsBehind(this.#stores, this.#streams, this.#ledger, ownerState);
    return shardsBehind(this.#stores, this.#stream, this.#ledger, ownerState);
  }

  /** Former streams whose leases should be gone by now (the wait and two stream syncs passed). */
  #checkFormerStreamsDeleted(streams: FleetStreams): void {
    const running = this.#running();
    if (running.length === 0) return;
    const oldest = Math.min(...running.map((worker) => worker.startedAt));
    for (const entry of streams.overdue(this.#clock.monotonicNow(), oldest)) {
      this.#ledger.violate(
        'former-stream',
        `${entry.stream.name} was dropped from the list at ${entry.removedAt} ms and ${entry.leases} of its leases are still in the table (waitMs ${streams.formerStreams.waitMs}, stream sync every ${streams.syncIntervalMs} ms)`,
      );
    }
  }

  /** The lease's owner and what its shard consumer there is doing, for a stall report. */
  #ownerState(lease: Lease): string {
    if (lease.owner === null) return 'no owner';
    const worker = this.#workers.get(lease.owner);
    const consumer = worker?.consumer.status().leases.find((status) => status.leaseKey === lease.leaseKey);
    return `owner ${lease.owner} (${worker?.state ?? 'unknown'}, its consumer ${consumer === undefined ? 'not running' : consumer.state})`;
  }

  async #reportStall(): Promise<void> {
    const missing = this.#ledger.unaccounted();
    if (missing.length > 0) {
      const first = missing[0];
      this.#ledger.violate(
        'lost',
        `${missing.length} record(s) never handled ${this.#options.settleLimitMs} ms after the faults ended (first: ${first?.key}#${first?.value} on ${first?.shardId})`,
      );
    }
    const behind = await this.#behind();
    if (behind.length > 0) {
      this.#ledger.violate(
        'stall',
        `not caught up ${this.#options.settleLimitMs} ms after the faults ended: ${behind.join('; ')}`,
      );
    }
  }

  #pick<T>(items: readonly T[]): T {
    return items[Math.floor(this.#random() * items.length)] as T;
  }

  #tell(line: string): void {
    const told = this.#streams?.shorten(line) ?? line;
    this.#story.push(`${(this.#clock.monotonicNow() / 1_000).toFixed(3).padStart(8)}s  ${told}`);
  }
}

/** The story line of a session liveness log line, or null for the others. */
function sessionLogLine(
  workerId: string,
  message: string,
  fields: Readonly<Record<string, unknown>> | undefined,
): string | null {
  if (message.startsWith('workers lost their database session')) {
    return `${workerId} judges ${String(fields?.workerIds)} dead: their database session ended`;
  }
  if (message.startsWith('a worker judged dead by its session still writes')) {
    return `${workerId} sees ${String(fields?.workerId)} write its leases: alive after all`;
  }
  if (message.startsWith('a worker judged dead by its session heartbeats or registered again')) {
    return `${workerId} sees ${String(fields?.workerId)} in the registry again: alive after all`;
  }
  if (message.startsWith('this worker lost its database session')) {
    return `${workerId} finds its own database session gone`;
  }
  return null;
}

function describe(error: unknown): string {
  return error instanceof Error ? `${error.name}: ${error.message}` : String(error);
}
