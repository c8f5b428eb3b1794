import type { KinesisClient } from '@aws-sdk/client-kinesis';
import { type Consumer, type ConsumerOptions, createConsumer } from '@kcl/consumer';
import type { KclEvent, Lease, LeaseStore } from '@kcl/core';
import {
  createFaultyLeaseStore,
  createMemoryLeaseStore,
  type FaultController,
  type FaultyLeaseStore,
  MemoryLeaseTable,
  seededRandom,
} from '@kcl/testkit';
import {
  type KinesisCaller,
  NO_KINESIS_FAULTS,
  SimulatedKinesis,
  simulatedStreamIdentifier,
} from './simulated-kinesis.js';
import { observeLeaseTable, processLeaseStore } from './simulated-lease-store.js';
import { SimulatedSessions } from './simulated-sessions.js';
import { SimulatedStream } from './simulated-stream.js';
import { type FreezableClock, SimulationClock } from './simulation-clock.js';

export interface ScenarioOptions {
  /** The shards of the stream (one stream). */
  readonly shards?: number;
  /**
   * Several streams, by name, with their shard counts (instead of `shards`): each has its own sequence
   * number space, and workers given `streams` or `streamTracker` read them as one application.
   */
  readonly streams?: Readonly<Record<string, number>>;
  readonly seed?: number;
  readonly applicationName?: string;
  /**
   * Session liveness (default false): the store offers database sessions (`capabilities.sessionLiveness`),
   * and `scenario.sessions` ends them — a process dying, a cut connection, a database restart.
   */
  readonly sessions?: boolean;
}

/** One worker of a scenario, with its own clock (a crash freezes it), store faults and Kinesis faults. */
export interface ScenarioWorker {
  readonly workerId: string;
  readonly consumer: Consumer;
  readonly clock: FreezableClock;
  readonly storeFaults: FaultController;
  readonly kinesis: KinesisCaller;
  readonly events: KclEvent[];
  /**
   * Kills the worker: no cleanup, its calls never answer, its timers never fire. With sessions, the
   * database ends its session after `sessionEndsAfterMs` (default 0: at once, as when the kernel closes
   * a dead process's socket; later for a machine that vanished without closing it).
   */
  crash(options?: { readonly sessionEndsAfterMs?: number }): void;
}

/**
 * A hand-written schedule on the simulation's parts: simulated time, a simulated Kinesis and the memory
 * lease store behind fault layers, with real workers (`createConsumer`). For deterministic reproductions
 * of one meeting of mechanisms, where the fleet simulation draws schedules at random.
 */
export class Scenario {
  readonly clock = new SimulationClock();
  /** The stream (with several: the first). */
  readonly stream: SimulatedStream;
  /** Every stream, by name. */
  readonly streams = new Map<string, SimulatedStream>();
  readonly kinesis: SimulatedKinesis;
  readonly table = new MemoryLeaseTable();
  readonly applicationName: string;
  /** The store every worker reaches (through its own fault layer): faults here hit them all. */
  readonly store: FaultyLeaseStore;
  /** Session liveness (`sessions: true`): what ends the workers' database sessions; null without. */
  readonly sessions: SimulatedSessions | null;
  /** Every stored lease change, in order. */
  readonly changes: Array<{ readonly at: number; readonly before?: Lease; readonly after?: Lease }> = [];
  readonly #seed: number;
  readonly #listeners: Array<(before: Lease | undefined, after: Lease | undefined) => void> = [];
  #workers = 0;

  constructor(options: ScenarioOptions = {}) {
    this.#seed = options.seed ?? 1;
    this.applicationName = options.applicationName ?? 'scenario';
    const shardCounts = Object.entries(options.streams ?? { 'scenario-stream': options.shards ?? 1 });
    for (const [index, [name, shards]] of shardCounts.entries()) {
      this.streams.set(
        name,
        new SimulatedStream(name, shards, () => this.clock.now(), { sequenceSpace: index }),
      );
    }
    this.stream = [...this.streams.values()][0] as SimulatedStream;
    this.kinesis = new SimulatedKinesis([...this.streams.values()], this.clock, seededRandom(this.#seed));
    observeLeaseTable(this.table, this.applicationName, (before, after) => {
      this.changes.push({
        at: this.clock.monotonicNow(),
        ...(before === undefined ? {} : { before }),
        ...(after === undefined ? {} : { after }),
      });
      for (const listener of this.#listeners) listener(before, after);
    });
    const memory = createMemoryLeaseStore({
      applicationName: this.applicationName,
      table: this.table,
      now: () => this.clock.now(),
      yieldBeforeEachCall: () => Promise.resolve(),
      ...(options.sessions === true ? { sessions: true } : {}),
    });
    this.sessions =
      options.sessions === true ? new SimulatedSessions(this.table, this.applicationName, this.clock) : null;
    this.store = createFaultyLeaseStore(this.sessions?.databaseLayer(memory) ?? memory, {
      clock: this.clock,
    });
  }

  /** Calls `listener` with every later change of a stored lease (`after` undefined: deleted). */
  onLeaseChange(listener: (before: Lease | undefined, after: Lease | undefined) => void): void {
    this.#listeners.push(listener);
  }

  /**
   * Starts a worker (not awaited: time only moves in `run`). It reads the scenario's stream unless
   * `options` name `streams` or a `streamTracker`.
   */
  worker(
    workerId: string,
    options: Omit<ConsumerOptions, 'streamName' | 'applicationName' | 'kinesis' | 'leaseStore' | 'workerId'> &
      Partial<Pick<ConsumerOptions, 'leaseStore'>>,
  ): ScenarioWorker {
    const clock = this.clock.processClock();
    const kinesis: KinesisCaller = { clock, faults: NO_KINESIS_FAULTS };
    const faulty = createFaultyLeaseStore(this.store, { clock });
    const events: KclEvent[] = [];
    const sessions = this.sessions;
    const session = sessions?.process(workerId) ?? null;
    const inner = sessions === null || session === null ? faulty : sessions.processLayer(session, faulty);
    const leaseStore: LeaseStore = options.leaseStore ?? processLeaseStore(inner, clock);
    const consumer = createConsumer({
      initialPosition: 'TRIM_HORIZON',
      clock,
      random: seededRandom(this.#seed * 31 + this.#workers++),
      ...options,
      ...(options.streams === undefined && options.streamTracker === undefined
        ? { streamName: this.stream.name }
        : {}),
      applicationName: this.applicationName,
      workerId,
      kinesis: this.kinesis.client(kinesis) as KinesisClient,
      leaseStore,
      onEvent: (event) => {
        events.push(event);
        options.onEvent?.(event);
      },
    });
    void consumer.start().catch(() => undefined);
    return {
      workerId,
      consumer,
      clock,
      storeFaults: faulty.faults,
      kinesis,
      events,
      crash: (crashOptions) => {
        clock.freeze();
        if (sessions !== null && session !== null) {
          sessions.processDied(session, crashOptions?.sessionEndsAfterMs ?? 0);
        }
      },
    };
  }

  /** Appends records `key#1 … key#count` to the stream (or to the stream named `streamName`). */
  put(key: string, count: number, streamName?: string): void {
    const stream = streamName === undefined ? this.stream : this.streams.get(streamName);
    if (stream === undefined) throw new Error(`simulation: no stream ${streamName}`);
    for (let index = 1; index <= count; index++) {
      stream.put(key, new TextEncoder().encode(`${key}#${index}`));
    }
  }

  /** The multi-stream identifier of a stream (`account:name:creationEpochSeconds`): its lease key prefix. */
  identifier(streamName: string): string {
    const stream = this.streams.get(streamName);
    if (stream === undefined) throw new Error(`simulation: no stream ${streamName}`);
    return simulatedStreamIdentifier(stream);
  }

  /** Lets `ms` of simulated time pass. */
  async run(ms: number): Promise<void> {
    await this.clock.runUntil(this.clock.monotonicNow() + ms);
  }

  /** Runs until `condition` holds (checked every `stepMs`), at most `limitMs`; returns whether it held. */
  async runUntil(condition: () => boolean, limitMs: number, stepMs = 100): Promise<boolean> {
    const until = this.clock.monotonicNow() + limitMs;
    while (this.clock.monotonicNow() < until) {
      if (condition()) return true;
      await this.run(stepMs);
    }
    return condition();
  }

  /** The stored lease, read without faults. */
  lease(leaseKey: string): Lease | undefined {
    return this.table.application(this.applicationName).leases.get(leaseKey);
  }

  /** Runs `work` (a stop, say) on simulated time and says how long it took, or null if it did not end within `limitMs`. */
  async timed(work: Promise<unknown>, limitMs: number): Promise<number | null> {
    const started = this.clock.monotonicNow();
    let ended: number | null = null;
    void work.finally(() => {
      ended = this.clock.monotonicNow();
    });
    await this.runUntil(() => ended !== null, limitMs, 10);
    return ended === null ? null : (ended as number) - started;
  }
}
