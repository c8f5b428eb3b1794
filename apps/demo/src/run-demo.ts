// The demo's run from start to end, in the order it happens: setup, the script acting on the fleet,
// the drain, the final stop. What it shows is built in view-model.ts, what it measured and verified in
// measurements.ts, and the lines for worker events in event-text.ts.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startDashboard } from '@kcl/cli';
import { type Clock, systemClock } from '@kcl/core';
import { type LeaseStoreLocation, openLeaseStore } from '@kcl/stores';
import { type RunningEmulator, startKinesisLocal } from '@kcl/testkit';
import type { Cleanup } from './cleanup.js';
import type { DemoOptions } from './demo-options.js';
import {
  DemoStream,
  demoStreamNames,
  hashRangeLabel,
  leaseLabel,
  type ShardInfo,
  type ShardRef,
  shardLabel,
  shardsToMerge,
  shardToSplit,
} from './demo-stream.js';
import { describeWorkerEvent } from './event-text.js';
import { Fleet, type FleetEvent, type FleetWorker } from './fleet.js';
import { reportRun, type ScriptRecord } from './measurements.js';
import { countCommittedRecords, DEMO_OUTPUT_TABLE, readOutputTable } from './output-table.js';
import { prepareLeaseStore } from './prepare-lease-store.js';
import { Producer } from './producer.js';
import {
  type EventKind,
  formatClock,
  formatEventTime,
  formatQuantity,
  formatSeconds,
  TerminalView,
  type ViewEvent,
} from './terminal-view.js';
import { planTimeline, scriptLength, type TimelineStep } from './timeline.js';
import type { RunVerification } from './verification.js';
import { DemoViewModel, demoHeader } from './view-model.js';
import { DEMO_TIMING, type DemoTiming, maxRecordsFor, preciseNow } from './worker-protocol.js';

export interface DemoIo {
  readonly out: NodeJS.WriteStream;
  /** Redraw the view in place. */
  readonly tty: boolean;
  readonly color: boolean;
}

export interface DemoOutcome {
  readonly exitCode: number;
  readonly verification: RunVerification | null;
}

const APPLICATION_NAME = 'kcl-demo';
/** Longest wait, after the producer stops, for every record to be processed. */
const DRAIN_TIMEOUT_MS = 90_000;
/** Longest wait for a worker's graceful stop before it is killed. */
const STOP_TIMEOUT_MS = 45_000;

/** Runs the demo: setup, the script with the live view, the drain, the verification. */
export async function runDemo(options: DemoOptions, io: DemoIo, cleanup: Cleanup): Promise<DemoOutcome> {
  return new DemoRun(options, io, cleanup).run();
}

class DemoRun {
  readonly #options: DemoOptions;
  readonly #cleanup: Cleanup;
  readonly #clock: Clock = systemClock;
  readonly #view: TerminalView;
  readonly #programStartedAt = preciseNow();
  #scriptStartedAt: number | null = null;
  readonly #durationMs: number;
  /** The script's length, set once the startup is over: what it left of `--duration` (see `scriptLength`). */
  #scriptMs: number;
  readonly #timing: DemoTiming;
  #timeline: TimelineStep[];
  #nextStep = 0;
  #phase = 'starting';
  readonly #viewModel = new DemoViewModel();
  #shards: (ShardInfo & ShardRef)[] = [];
  /** The demo's streams: one, or `--streams` of them read by the fleet as one application. */
  #streams: DemoStream[] = [];
  #fleet: Fleet | null = null;
  /** One producer per stream, in the order of `#streams`. */
  #producers: Producer[] = [];
  /** What the script did, for the measurements at the end. */
  #script: ScriptRecord = { killed: null, gracefullyStopped: null, split: null };
  #pendingStop: Promise<unknown> = Promise.resolve();
  readonly #background = new AbortController();

  constructor(options: DemoOptions, io: DemoIo, cleanup: Cleanup) {
    this.#options = options;
    this.#cleanup = cleanup;
    this.#durationMs = options.durationSeconds * 1000;
    this.#timing = {
      ...DEMO_TIMING,
      maxRecords: maxRecordsFor(options.rate, options.shards * options.streams),
    };
    // Until the startup is over: the script as if it took no time.
    this.#scriptMs = scriptLength(this.#durationMs, 0);
    this.#timeline = planTimeline(this.#scriptMs);
    this.#view = new TerminalView({
      out: io.out,
      tty: io.tty,
      color: io.color,
      now: () => this.#timeLabel(preciseNow()),
    });
  }

  #elapsed(at = preciseNow()): number {
    return at - (this.#scriptStartedAt ?? this.#programStartedAt);
  }

  /** Time since the script started, or `startup` before it. */
  #timeLabel(at: number): string {
    return this.#scriptStartedAt === null || at < this.#scriptStartedAt
      ? 'startup'
      : formatEventTime(at - this.#scriptStartedAt);
  }

  /** Several streams: shards are shown, and lease keys name their stream (multi-stream mode). */
  get #multiStream(): boolean {
    return this.#streams.length > 1;
  }

  /** Records written so far, over all streams. */
  #written(): number {
    return this.#producers.reduce((total, producer) => total + producer.written, 0);
  }

  /** The shards of every stream, each with its stream when there are several. */
  async #listShards(): Promise<(ShardInfo & ShardRef)[]> {
    const listed = await Promise.all(this.#streams.map((stream) => stream.shards()));
    return listed.flatMap((shards, index) =>
      shards.map((shard) => ({
        ...shard,
        streamName: this.#multiStream ? (this.#streams[index]?.name ?? null) : null,
      })),
    );
  }

  async run(): Promise<DemoOutcome> {
    const options = this.#options;
    const view = this.#view;
    const streamNames = demoStreamNames(options.streams);
    view.print(
      options.streams === 1
        ? `kcl demo: ${formatQuantity(options.workers, 'worker')}, ${formatQuantity(options.shards, 'shard')}, ${options.rate} records/s over ` +
            `${options.keys} partition keys, ${options.durationSeconds} s in all, store ${options.store}`
        : `kcl demo: ${formatQuantity(options.workers, 'worker')}, ${options.streams} streams of ${formatQuantity(options.shards, 'shard')}, ` +
            `${options.rate} records/s in all over ${options.keys} partition keys per stream, ${options.durationSeconds} s in all, store ${options.store}`,
      'title',
    );
    this.#cleanup.add(
      'stop the view',
      () => {
        this.#background.abort();
        view.release();
      },
      { early: true },
    );
    // Later tasks run first: the directory goes last, after the processes that write into it.
    const runDirectory = mkdtempSync(join(tmpdir(), 'kcl-demo-'));
    this.#cleanup.add('remove the run directory', () => {
      if (options.keep) view.print(`kept the run directory: ${runDirectory}`);
      else rmSync(runDirectory, { recursive: true, force: true });
    });

    const emulator = await this.#step('starting the local Kinesis emulator (kinesis-local)', () =>
      startKinesisLocal({
        durations: { createStream: 200, splitShard: 300, mergeShards: 300 },
        startTimeoutMs: 90_000,
      }),
    );
    this.#cleanup.add('stop kinesis-local', () => emulator.stop());
    view.print(`  kinesis-local listens on ${emulator.endpoint}`, 'dim');
    const store = await this.#step(`preparing the lease store (${options.store})`, () =>
      prepareLeaseStore(options, runDirectory),
    );
    this.#cleanup.add('remove the lease store', () => store.teardown());
    const streams = streamNames.map((name) => new DemoStream(emulator, name));
    this.#streams = streams;
    this.#cleanup.add('close the Kinesis clients', () => {
      for (const stream of streams) stream.close();
    });
    await this.#step(
      streams.length === 1
        ? `creating stream ${streamNames.join('')} with ${formatQuantity(options.shards, 'shard')}`
        : `creating ${streams.length} streams (${streamNames.join(', ')}) with ${formatQuantity(options.shards, 'shard')} each`,
      () => Promise.all(streams.map((stream) => stream.create(options.shards))),
    );
    this.#shards = await this.#listShards();

    const fleet = this.#startFleet(emulator, runDirectory, store.location, streamNames);
    this.#cleanup.add('kill the workers', () => fleet.killAll());
    const workerIds = Array.from({ length: options.workers }, (_, index) => `w${index + 1}`);
    await this.#step(`starting ${formatQuantity(options.workers, 'worker')}, each its own process`, () =>
      Promise.all(workerIds.map((workerId) => fleet.spawn(workerId))),
    );

    if (options.dashboardPort !== null) await this.#serveDashboard(store.location, options.dashboardPort);

    // The script clock starts with the producer, and gets what the startup left of --duration.
    const scriptStartedAt = preciseNow();
    this.#scriptStartedAt = scriptStartedAt;
    const startupMs = scriptStartedAt - this.#programStartedAt;
    this.#scriptMs = scriptLength(this.#durationMs, startupMs);
    this.#timeline = planTimeline(this.#scriptMs);
    const header = demoHeader({
      options,
      timing: this.#timing,
      timeline: this.#timeline,
      store: store.location,
    });
    if (!view.tty) for (const line of header) view.print(line, 'dim');
    if (startupMs + this.#scriptMs > this.#durationMs + 500) {
      this.#emit(
        'problem',
        `the startup took ${formatSeconds(startupMs)}: the script still runs ${formatSeconds(this.#scriptMs)}, so the run ends after --duration`,
      );
    }
    // `--rate` is the rate in all: each stream gets an even share.
    const producers = streams.map(
      (stream) =>
        new Producer({
          client: stream.client,
          streamName: stream.name,
          streamInPayload: this.#multiStream,
          rate: options.rate / streams.length,
          keys: options.keys,
          onRetry: (message) =>
            this.#emit('problem', `producer${this.#multiStream ? ` ${stream.name}` : ''}: ${message}`),
        }),
    );
    this.#producers = producers;
    for (const producer of producers) producer.start();
    // Not awaited: with the emulator gone their retries would only delay the exit.
    this.#cleanup.add(
      producers.length === 1 ? 'stop the producer' : 'stop the producers',
      () => {
        for (const producer of producers) void producer.stop().catch(() => undefined);
      },
      { early: true },
    );
    this.#phase = 'producing';
    void this.#refreshShardsLoop();
    void this.#drawLoop(header);

    for (const step of this.#timeline) {
      await this.#clock.sleep(Math.max(0, step.atMs - this.#elapsed()));
      this.#nextStep += 1;
      await this.#execute(step).catch((error: unknown) =>
        this.#emit('problem', `${step.label} failed: ${(error as Error).message}`),
      );
    }

    // Normally stopped by the script already; this also covers a failed step.
    const written = (await Promise.all(producers.map((producer) => producer.stop()))).reduce(
      (total, count) => total + count,
      0,
    );
    const drainStartedAt = preciseNow();
    this.#phase = 'draining';
    const deadline = this.#clock.monotonicNow() + DRAIN_TIMEOUT_MS;
    // With --exactly-once the table is what counts: a worker killed between a commit and appending
    // the batch's lines to its file leaves records only there.
    const outputFile = store.location.kind === 'sqlite' ? store.location.file : null;
    const processedSoFar = (): number =>
      options.exactlyOnce && outputFile !== null
        ? countCommittedRecords(outputFile)
        : fleet.distinctProcessed();
    while (processedSoFar() < written && this.#clock.monotonicNow() < deadline) {
      this.#phase = `draining: ${processedSoFar()} of ${written} processed`;
      await this.#clock.sleep(250);
    }
    const drainMs = preciseNow() - drainStartedAt;
    const scriptMs = drainStartedAt - scriptStartedAt;
    if (processedSoFar() < written)
      this.#emit(
        'problem',
        `drain timed out after ${DRAIN_TIMEOUT_MS / 1000} s: ${processedSoFar()} of ${written} processed`,
      );
    else
      this.#emit(
        'script',
        `every record processed ${(drainMs / 1000).toFixed(1)} s after the producer stopped`,
      );

    this.#phase = 'stopping the workers gracefully';
    const stopStartedAt = preciseNow();
    await this.#pendingStop;
    await fleet.stopAll(STOP_TIMEOUT_MS);
    const stopMs = preciseNow() - stopStartedAt;
    this.#phase = 'done';
    this.#background.abort();
    this.#draw(header);
    view.release();

    const report = reportRun({
      fleet,
      script: this.#script,
      streams: producers.map((producer, index) => ({
        name: this.#multiStream ? (streamNames[index] ?? null) : null,
        produced: producer.written,
      })),
      keys: options.keys,
      timing: this.#timing,
      ...(options.exactlyOnce && outputFile !== null ? { committed: readOutputTable(outputFile) } : {}),
      durations: {
        startupMs,
        scriptMs,
        drainMs,
        stopMs,
        totalMs: preciseNow() - this.#programStartedAt,
        plannedMs: this.#durationMs,
      },
    });
    for (const line of report.lines) view.print(line.text, line.style);
    return { exitCode: report.passed ? 0 : 1, verification: report.verification };
  }

  /** Runs a setup step, saying what it waits for and, every 10 s, that it still waits. */
  async #step<T>(what: string, work: () => Promise<T>): Promise<T> {
    const startedAt = preciseNow();
    this.#view.print(`${what}…`);
    const done = new AbortController();
    const ticker = (async () => {
      for (;;) {
        await this.#clock.sleep(10_000, done.signal);
        if (done.signal.aborted) return;
        this.#view.print(`  still ${what} (${formatSeconds(preciseNow() - startedAt)})…`, 'dim');
      }
    })();
    try {
      const result = await work();
      this.#view.print(`  done in ${formatSeconds(preciseNow() - startedAt)}`, 'dim');
      return result;
    } finally {
      done.abort();
      await ticker;
    }
  }

  /** `--dashboard`: the lease dashboard of `kcl dashboard`, on the fleet's store, until the demo ends. */
  async #serveDashboard(location: LeaseStoreLocation, port: number): Promise<void> {
    const store = await openLeaseStore(location, { applicationName: APPLICATION_NAME });
    this.#cleanup.add('close the dashboard store', () => store.close());
    const dashboard = await startDashboard({
      store,
      port,
      intervalMs: 1_000,
      // Workers heartbeat every renew interval; one silent for a lease expiry is gone.
      workerExpiryMs: this.#timing.leaseExpiryMs,
    });
    this.#cleanup.add('stop the dashboard', () => dashboard.stop(), { early: true });
    this.#view.print(`  the lease dashboard: ${dashboard.url}`);
  }

  #startFleet(
    emulator: RunningEmulator,
    runDirectory: string,
    store: LeaseStoreLocation,
    streams: readonly string[],
  ) {
    const fleet = new Fleet({
      runDirectory,
      settings: {
        applicationName: APPLICATION_NAME,
        streams,
        kinesis: { endpoint: emulator.endpoint, region: emulator.region, credentials: emulator.credentials },
        store,
        timing: this.#timing,
        statusIntervalMs: 500,
        ...(this.#options.exactlyOnce ? { outputTable: DEMO_OUTPUT_TABLE } : {}),
      },
      onEvent: (event) => this.#onWorkerEvent(event),
    });
    this.#fleet = fleet;
    return fleet;
  }

  // ── the script ──────────────────────────────────────────────────────────────────────────────

  async #execute(step: TimelineStep): Promise<void> {
    const fleet = this.#fleet!;
    switch (step.action) {
      case 'kill': {
        const victim = busiest(fleet.live());
        if (victim === undefined) return this.#emit('script', 'kill -9 skipped: no worker is running');
        const held = victim.leases.map((lease) => lease.leaseKey);
        const at = await fleet.kill(victim.workerId);
        this.#script = { ...this.#script, killed: { workerId: victim.workerId, at, held } };
        this.#viewModel.noteWorker(victim.workerId, `kill -9 at ${formatClock(this.#elapsed(at))}`);
        this.#emit(
          'script',
          `kill -9 ${victim.workerId} (held ${held.map(leaseLabel).join(', ') || 'nothing'}): its leases ` +
            `expire after ${this.#timing.leaseExpiryMs / 1000} s, then the others take them`,
        );
        return;
      }
      case 'join': {
        const workerId = `w${fleet.workers.size + 1}`;
        this.#emit('script', `${workerId} joins: it will steal leases until the fleet is even`);
        await fleet.spawn(workerId);
        return;
      }
      case 'split': {
        // With several streams the split happens on the first, the merge on the last that has a pair.
        const stream = this.#streams[0]!;
        const target = shardToSplit(await stream.shards());
        if (target === undefined) return this.#emit('script', 'split skipped: no open shard');
        const label = (shardId: string): string => shardLabel(this.#shardOf(stream, shardId));
        this.#emit('script', `split ${label(target.shardId)} (keys ${hashRangeLabel(target)})`);
        this.#script = {
          ...this.#script,
          split: { at: preciseNow(), parent: this.#shardOf(stream, target.shardId) },
        };
        const children = await stream.split(target);
        this.#shards = await this.#listShards();
        this.#emit(
          'shard',
          `${label(target.shardId)} split into ${children.map((child) => label(child.shardId)).join(' + ')}: ` +
            `they start once ${label(target.shardId)} is processed to its end`,
        );
        return;
      }
      case 'merge': {
        let found: { stream: DemoStream; pair: [ShardInfo, ShardInfo] } | undefined;
        for (const stream of [...this.#streams].reverse()) {
          const pair = shardsToMerge(await stream.shards());
          if (pair !== undefined) {
            found = { stream, pair };
            break;
          }
        }
        if (found === undefined) return this.#emit('script', 'merge skipped: no two adjacent open shards');
        const { stream } = found;
        const [lower, upper] = found.pair;
        const label = (shardId: string): string => shardLabel(this.#shardOf(stream, shardId));
        const names = `${label(lower.shardId)} + ${label(upper.shardId)}`;
        this.#emit('script', `merge ${names} (keys ${hashRangeLabel(lower)} and ${hashRangeLabel(upper)})`);
        const child = await stream.merge(lower, upper);
        this.#shards = await this.#listShards();
        this.#emit(
          'shard',
          `${names} merged into ${child === undefined ? 'a new shard' : label(child.shardId)}: ` +
            'it starts once both parents are processed to their end',
        );
        return;
      }
      case 'stop': {
        const live = fleet.live();
        if (live.length < 2)
          return this.#emit('script', 'graceful stop skipped: it would leave no worker running');
        const victim = busiest(live)!;
        const held = victim.leases.map((lease) => leaseLabel(lease.leaseKey));
        const at = preciseNow();
        this.#script = { ...this.#script, gracefullyStopped: { workerId: victim.workerId, at } };
        this.#viewModel.noteWorker(victim.workerId, `graceful stop at ${formatClock(this.#elapsed(at))}`);
        this.#emit(
          'script',
          `stop ${victim.workerId} gracefully (SIGTERM): it checkpoints and releases ${held.join(', ') || 'nothing'}, ` +
            'the others take them at their next rebalance',
        );
        this.#pendingStop = fleet.stop(victim.workerId, STOP_TIMEOUT_MS).then(({ forced }) => {
          if (forced)
            this.#emit(
              'problem',
              `${victim.workerId} did not stop within ${STOP_TIMEOUT_MS / 1000} s: killed`,
            );
        });
        return;
      }
      case 'stop-producing': {
        const counts = await Promise.all(this.#producers.map((producer) => producer.stop()));
        const written = counts.reduce((total, count) => total + count, 0);
        this.#emit(
          'script',
          counts.length === 1
            ? `producer stopped after ${written} records; draining`
            : `producers stopped after ${written} records (${counts.join(' + ')}); draining`,
        );
        return;
      }
    }
  }

  /** A shard of one of the demo's streams, named as lease keys name it (no stream with one stream). */
  #shardOf(stream: DemoStream, shardId: string): ShardRef {
    return { streamName: this.#multiStream ? stream.name : null, shardId };
  }

  // ── events and the view ─────────────────────────────────────────────────────────────────────

  #emit(kind: EventKind, text: string, at = preciseNow()): void {
    const event: ViewEvent = { time: this.#timeLabel(at), kind, text };
    this.#viewModel.addEvent(event);
    this.#view.event(event);
  }

  #onWorkerEvent({ at, event }: FleetEvent): void {
    if ((event.type === 'shard-ended' || event.type === 'lease-deleted') && event.leaseKey !== undefined)
      this.#viewModel.shardEnded(event.leaseKey);
    const described = describeWorkerEvent(event);
    if (described !== null) this.#emit(described.kind, described.text, at);
  }

  async #refreshShardsLoop(): Promise<void> {
    const signal = this.#background.signal;
    while (!signal.aborted) {
      await this.#clock.sleep(2_000, signal);
      if (signal.aborted) return;
      try {
        this.#shards = await this.#listShards();
      } catch {
        // The next refresh tries again; the view keeps the last listing.
      }
    }
  }

  async #drawLoop(header: readonly string[]): Promise<void> {
    const signal = this.#background.signal;
    const interval = this.#view.tty ? 1_000 : 5_000;
    while (!signal.aborted) {
      this.#draw(header);
      await this.#clock.sleep(interval, signal);
    }
  }

  #draw(header: readonly string[]): void {
    try {
      const now = preciseNow();
      const next = this.#timeline[this.#nextStep];
      const frame = {
        header,
        elapsedMs: Math.min(this.#elapsed(now), this.#scriptMs),
        durationMs: this.#scriptMs,
        phase: this.#phase,
        next: next === undefined ? null : `${next.label} at ${formatClock(next.atMs)}`,
        written: this.#written(),
        shards: this.#shards,
      };
      this.#view.draw(this.#viewModel.snapshot(this.#fleet!, frame, now));
    } catch (error) {
      this.#view.print(`could not draw the view: ${(error as Error).message}`, 'problem');
    }
  }
}

/** The live worker holding the most leases: the script's victim. */
function busiest(workers: readonly FleetWorker[]): FleetWorker | undefined {
  let best: FleetWorker | undefined;
  for (const worker of workers)
    if (best === undefined || worker.leases.length > best.leases.length) best = worker;
  return best;
}
