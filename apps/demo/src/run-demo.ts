import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Clock, systemClock } from '@kcl/core';
import { type RunningEmulator, startKinesisLocal } from '@kcl/testkit';
import type { Cleanup } from './cleanup.js';
import type { DemoOptions } from './demo-options.js';
import {
  DemoStream,
  hashRangeLabel,
  type ShardInfo,
  shardsToMerge,
  shardToSplit,
  shortShardId,
} from './demo-stream.js';
import { Fleet, type FleetEvent, type FleetWorker } from './fleet.js';
import { describeLeaseStore } from './lease-store-config.js';
import { prepareLeaseStore } from './prepare-lease-store.js';
import { Producer } from './producer.js';
import {
  type EventKind,
  formatClock,
  formatEventTime,
  type ShardRow,
  TerminalView,
  type ViewEvent,
  type ViewSnapshot,
  type WorkerRow,
} from './terminal-view.js';
import { planTimeline, type TimelineStep } from './timeline.js';
import {
  describeVerification,
  type LeaseLoss,
  type Verification,
  verificationPassed,
  verifyRun,
} from './verification.js';
import {
  DEMO_TIMING,
  type DemoTiming,
  maxRecordsFor,
  preciseNow,
  type WorkerEvent,
} from './worker-protocol.js';

export interface DemoIo {
  readonly out: NodeJS.WriteStream;
  /** Redraw the view in place. */
  readonly tty: boolean;
  readonly color: boolean;
}

export interface DemoOutcome {
  readonly exitCode: number;
  readonly verification: Verification | null;
}

const STREAM_NAME = 'kcl-demo';
const APPLICATION_NAME = 'kcl-demo';
/** Longest wait, after the producer stops, for every record to be processed. */
const DRAIN_TIMEOUT_MS = 90_000;
/** Longest wait for a worker's graceful stop before it is killed. */
const STOP_TIMEOUT_MS = 45_000;
const STATE_LABELS: Readonly<Record<string, string>> = {
  'waiting-on-parents': 'waiting on parents',
  initializing: 'starting',
  processing: 'processing',
  'shard-ending': 'ending',
  'shutting-down': 'handing over',
  finished: 'ended',
};

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
  readonly #timing: DemoTiming;
  readonly #timeline: TimelineStep[];
  #nextStep = 0;
  #phase = 'starting';
  readonly #events: ViewEvent[] = [];
  readonly #notes = new Map<string, string>();
  readonly #endedShards = new Set<string>();
  readonly #lastOwner = new Map<string, string>();
  #shards: ShardInfo[] = [];
  #stream: DemoStream | null = null;
  #fleet: Fleet | null = null;
  #producer: Producer | null = null;
  readonly #writeSamples: Array<{ at: number; written: number }> = [];
  #killed: { readonly workerId: string; readonly at: number; readonly held: readonly string[] } | null = null;
  #gracefullyStopped: { readonly workerId: string; readonly at: number } | null = null;
  #split: { readonly at: number; readonly parent: string } | null = null;
  #pendingStop: Promise<unknown> = Promise.resolve();
  readonly #background = new AbortController();

  constructor(options: DemoOptions, io: DemoIo, cleanup: Cleanup) {
    this.#options = options;
    this.#cleanup = cleanup;
    this.#durationMs = options.durationSeconds * 1000;
    this.#timing = { ...DEMO_TIMING, maxRecords: maxRecordsFor(options.rate, options.shards) };
    this.#timeline = planTimeline(this.#durationMs);
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

  async run(): Promise<DemoOutcome> {
    const options = this.#options;
    const view = this.#view;
    view.print(
      `kcl demo: ${count(options.workers, 'worker')}, ${count(options.shards, 'shard')}, ${options.rate} records/s over ` +
        `${options.keys} partition keys, ${options.durationSeconds} s script, store ${options.store}`,
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
    const stream = new DemoStream(emulator, STREAM_NAME);
    this.#stream = stream;
    this.#cleanup.add('close the Kinesis client', () => stream.close());
    await this.#step(`creating stream ${STREAM_NAME} with ${count(options.shards, 'shard')}`, () =>
      stream.create(options.shards),
    );
    this.#shards = await stream.shards();

    const fleet = this.#startFleet(emulator, runDirectory, store.config);
    this.#cleanup.add('kill the workers', () => fleet.killAll());
    const workerIds = Array.from({ length: options.workers }, (_, index) => `w${index + 1}`);
    await this.#step(`starting ${count(options.workers, 'worker')}, each its own process`, () =>
      Promise.all(workerIds.map((workerId) => fleet.spawn(workerId))),
    );

    const timing = this.#timing;
    const header = [
      `kcl demo — ${count(options.workers, 'worker')} on ${count(options.shards, 'shard')}, lease store: ${describeLeaseStore(store.config)}`,
      `timings: lease renew ${timing.leaseRenewIntervalMs / 1000} s, expiry ${timing.leaseExpiryMs / 1000} s, ` +
        `rebalance ${timing.rebalanceIntervalMs / 1000} s, poll ${timing.pollIntervalMs} ms ` +
        `(up to ${timing.maxRecords} records), checkpoint every ${timing.checkpointIntervalMs / 1000} s`,
      `script: ${this.#timeline.map((step) => `${formatClock(step.atMs)} ${step.label}`).join(', ')}`,
    ];
    if (!view.tty) for (const line of header) view.print(line, 'dim');

    // The script clock starts with the producer.
    const scriptStartedAt = preciseNow();
    this.#scriptStartedAt = scriptStartedAt;
    const startupMs = scriptStartedAt - this.#programStartedAt;
    const producer = new Producer({
      client: stream.client,
      streamName: STREAM_NAME,
      rate: options.rate,
      keys: options.keys,
      onRetry: (message) => this.#emit('problem', `producer: ${message}`),
    });
    this.#producer = producer;
    producer.start();
    // Not awaited: with the emulator gone its retries would only delay the exit.
    this.#cleanup.add('stop the producer', () => void producer.stop().catch(() => undefined), {
      early: true,
    });
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
    const written = await producer.stop();
    const drainStartedAt = preciseNow();
    this.#phase = 'draining';
    const deadline = this.#clock.monotonicNow() + DRAIN_TIMEOUT_MS;
    while (fleet.distinctProcessed() < written && this.#clock.monotonicNow() < deadline) {
      this.#phase = `draining: ${fleet.distinctProcessed()} of ${written} processed`;
      await this.#clock.sleep(250);
    }
    const drainMs = preciseNow() - drainStartedAt;
    const scriptMs = drainStartedAt - scriptStartedAt;
    if (fleet.distinctProcessed() < written)
      this.#emit(
        'problem',
        `drain timed out after ${DRAIN_TIMEOUT_MS / 1000} s: ${fleet.distinctProcessed()} of ${written} processed`,
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

    const verification = verifyRun({
      produced: written,
      keys: options.keys,
      lines: fleet.processedLines(),
      killed: this.#killedWorker(fleet),
      leaseLosses: this.#leaseLosses(fleet),
    });
    const totalMs = preciseNow() - this.#programStartedAt;
    view.print('');
    for (const line of this.#measurements(fleet)) view.print(line);
    view.print(
      `durations: startup ${seconds(startupMs)}, script ${seconds(scriptMs)}, drain ${seconds(drainMs)}, ` +
        `final stop ${seconds(stopMs)}, total ${seconds(totalMs)}`,
    );
    const problems = [...fleet.workers.values()].filter((worker) => worker.lifecycle === 'exited');
    for (const worker of problems)
      view.print(
        `${worker.workerId} exited on its own (${worker.exitSignal ?? worker.exitCode}): ${worker.stderrTail.slice(-3).join(' | ')}`,
        'problem',
      );
    view.print('');
    const passed = verificationPassed(verification);
    const lines = describeVerification(verification, {
      killedWorkerId: this.#killed?.workerId ?? null,
      checkpointIntervalMs: this.#timing.checkpointIntervalMs,
    });
    lines.forEach((line, index) => {
      view.print(line, index === 0 ? (passed ? 'title' : 'problem') : null);
    });
    view.print(
      passed
        ? 'verified: no record lost, every partition key processed in write order'
        : 'FAILED: records were lost or processed out of order',
      passed ? 'title' : 'problem',
    );
    return { exitCode: passed ? 0 : 1, verification };
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
        this.#view.print(`  still ${what} (${seconds(preciseNow() - startedAt)})…`, 'dim');
      }
    })();
    try {
      const result = await work();
      this.#view.print(`  done in ${seconds(preciseNow() - startedAt)}`, 'dim');
      return result;
    } finally {
      done.abort();
      await ticker;
    }
  }

  #startFleet(
    emulator: RunningEmulator,
    runDirectory: string,
    store: Parameters<typeof describeLeaseStore>[0],
  ) {
    const fleet = new Fleet({
      runDirectory,
      settings: {
        applicationName: APPLICATION_NAME,
        streamName: STREAM_NAME,
        kinesis: { endpoint: emulator.endpoint, region: emulator.region, credentials: emulator.credentials },
        store,
        timing: this.#timing,
        statusIntervalMs: 500,
      },
      onEvent: (event) => this.#onWorkerEvent(event),
    });
    this.#fleet = fleet;
    return fleet;
  }

  // ── the script ──────────────────────────────────────────────────────────────────────────────

  async #execute(step: TimelineStep): Promise<void> {
    const fleet = this.#fleet!;
    const stream = this.#stream!;
    switch (step.action) {
      case 'kill': {
        const victim = busiest(fleet.live());
        if (victim === undefined) return this.#emit('script', 'kill -9 skipped: no worker is running');
        const held = victim.leases.map((lease) => lease.shardId);
        const at = await fleet.kill(victim.workerId);
        this.#killed = { workerId: victim.workerId, at, held };
        this.#notes.set(victim.workerId, `kill -9 at ${formatClock(this.#elapsed(at))}`);
        this.#emit(
          'script',
          `kill -9 ${victim.workerId} (held ${held.map(shortShardId).join(', ') || 'nothing'}): its leases ` +
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
        const target = shardToSplit(await stream.shards());
        if (target === undefined) return this.#emit('script', 'split skipped: no open shard');
        this.#emit('script', `split ${shortShardId(target.shardId)} (keys ${hashRangeLabel(target)})`);
        this.#split = { at: preciseNow(), parent: target.shardId };
        const children = await stream.split(target);
        this.#shards = await stream.shards();
        this.#emit(
          'shard',
          `${shortShardId(target.shardId)} split into ${children.map((child) => shortShardId(child.shardId)).join(' + ')}: ` +
            `they start once ${shortShardId(target.shardId)} is processed to its end`,
        );
        return;
      }
      case 'merge': {
        const pair = shardsToMerge(await stream.shards());
        if (pair === undefined) return this.#emit('script', 'merge skipped: no two adjacent open shards');
        const [lower, upper] = pair;
        const names = `${shortShardId(lower.shardId)} + ${shortShardId(upper.shardId)}`;
        this.#emit('script', `merge ${names} (keys ${hashRangeLabel(lower)} and ${hashRangeLabel(upper)})`);
        const child = await stream.merge(lower, upper);
        this.#shards = await stream.shards();
        this.#emit(
          'shard',
          `${names} merged into ${child === undefined ? 'a new shard' : shortShardId(child.shardId)}: ` +
            'it starts once both parents are processed to their end',
        );
        return;
      }
      case 'stop': {
        const live = fleet.live();
        if (live.length < 2)
          return this.#emit('script', 'graceful stop skipped: it would leave no worker running');
        const victim = busiest(live)!;
        const held = victim.leases.map((lease) => shortShardId(lease.shardId));
        const at = preciseNow();
        this.#gracefullyStopped = { workerId: victim.workerId, at };
        this.#notes.set(victim.workerId, `graceful stop at ${formatClock(this.#elapsed(at))}`);
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
        const written = await this.#producer!.stop();
        this.#emit('script', `producer stopped after ${written} records; draining`);
        return;
      }
    }
  }

  // ── events and the view ─────────────────────────────────────────────────────────────────────

  #emit(kind: EventKind, text: string, at = preciseNow()): void {
    const event: ViewEvent = { time: this.#timeLabel(at), kind, text };
    this.#events.push(event);
    if (this.#events.length > 200) this.#events.shift();
    this.#view.event(event);
  }

  #onWorkerEvent({ at, event }: FleetEvent): void {
    if (event.type === 'shard-ended' && event.leaseKey !== undefined) this.#endedShards.add(event.leaseKey);
    if (event.type === 'lease-deleted' && event.leaseKey !== undefined) this.#endedShards.add(event.leaseKey);
    const described = describeWorkerEvent(event);
    if (described !== null) this.#emit(described.kind, described.text, at);
  }

  async #refreshShardsLoop(): Promise<void> {
    const signal = this.#background.signal;
    while (!signal.aborted) {
      await this.#clock.sleep(2_000, signal);
      if (signal.aborted) return;
      try {
        this.#shards = (await this.#stream?.shards()) ?? this.#shards;
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
      this.#view.draw(this.#snapshot(header));
    } catch (error) {
      this.#view.print(`could not draw the view: ${(error as Error).message}`, 'problem');
    }
  }

  #snapshot(header: readonly string[]): ViewSnapshot {
    const fleet = this.#fleet!;
    const producer = this.#producer;
    const now = preciseNow();
    const written = producer?.written ?? 0;
    this.#writeSamples.push({ at: now, written });
    while (this.#writeSamples.length > 2 && now - (this.#writeSamples[0]?.at ?? now) > 3_000)
      this.#writeSamples.shift();
    const firstSample = this.#writeSamples[0];
    const writeRate =
      firstSample !== undefined && now - firstSample.at > 500
        ? ((written - firstSample.written) * 1000) / (now - firstSample.at)
        : 0;

    const owners = new Map<string, { workerId: string; state: string; lagMs: number | null }>();
    for (const worker of fleet.workers.values()) {
      if (worker.lifecycle !== 'running' && worker.lifecycle !== 'stopping') continue;
      for (const lease of worker.leases) {
        // The lag shown is the largest of the last 2 s, so a backlog read in one call still shows.
        const recentPeak = fleet.peakLag(lease.shardId, now - 2_000);
        owners.set(lease.shardId, {
          workerId: worker.workerId,
          state: STATE_LABELS[lease.state] ?? lease.state,
          lagMs:
            lease.millisBehindLatest === null && recentPeak === 0
              ? null
              : Math.max(lease.millisBehindLatest ?? 0, recentPeak),
        });
        this.#lastOwner.set(lease.shardId, worker.workerId);
      }
    }
    const workers: WorkerRow[] = [...fleet.workers.values()].map((worker) => ({
      workerId: worker.workerId,
      state: worker.lifecycle,
      leases: worker.leases.map((lease) => shortShardId(lease.shardId)),
      recordsPerSecond:
        worker.lifecycle === 'running' || worker.lifecycle === 'stopping'
          ? fleet.rate(worker.workerId)
          : null,
      processed: worker.processed,
      note: this.#notes.get(worker.workerId) ?? '',
    }));
    const shards: ShardRow[] = [...this.#shards]
      .sort((a, b) => shardNumber(a.shardId) - shardNumber(b.shardId))
      .map((shard) => {
        const owner = owners.get(shard.shardId);
        let state: string;
        if (owner !== undefined) state = owner.state;
        else if (this.#endedShards.has(shard.shardId)) state = 'ended';
        else {
          const last = this.#lastOwner.get(shard.shardId);
          const lastWorker = last === undefined ? undefined : fleet.workers.get(last);
          state =
            lastWorker?.lifecycle === 'killed'
              ? `no owner (${last} was killed; waiting for its lease to expire)`
              : lastWorker?.lifecycle === 'stopped' || lastWorker?.lifecycle === 'stopping'
                ? `released by ${last}`
                : 'no owner';
        }
        return {
          shard: shortShardId(shard.shardId),
          keys: hashRangeLabel(shard),
          owner: owner?.workerId ?? null,
          state,
          lagMs: owner?.lagMs ?? null,
          parents: shard.parentShardIds.map(shortShardId),
        };
      });
    const next = this.#timeline[this.#nextStep];
    return {
      header,
      elapsedMs: Math.min(this.#elapsed(now), this.#durationMs),
      durationMs: this.#durationMs,
      phase: this.#phase,
      next: next === undefined ? null : `${next.label} at ${formatClock(next.atMs)}`,
      written,
      writeRate,
      processedDistinct: fleet.distinctProcessed(),
      processedTotal: fleet.processedLines().length,
      workers,
      shards,
      events: this.#events,
    };
  }

  // ── results ─────────────────────────────────────────────────────────────────────────────────

  #killedWorker(fleet: Fleet) {
    const killed = this.#killed;
    if (killed === null) return null;
    const checkpoints = new Map<string, string>();
    for (const { at, event } of fleet.events) {
      if (event.workerId !== killed.workerId || event.type !== 'checkpoint-written') continue;
      if (at <= killed.at && event.leaseKey !== undefined && event.checkpoint !== undefined)
        checkpoints.set(event.leaseKey, event.checkpoint);
    }
    return { workerId: killed.workerId, at: killed.at, checkpoints };
  }

  #leaseLosses(fleet: Fleet): LeaseLoss[] {
    return fleet.events
      .filter(({ event }) => event.type === 'lease-lost' && event.leaseKey !== undefined)
      .map(({ at, event }) => ({
        workerId: event.workerId,
        leaseKey: event.leaseKey ?? '',
        at,
        reason: event.reason ?? 'unknown',
      }));
  }

  /** What the run measured: failover after the kill, hand-over after the graceful stop, the split. */
  #measurements(fleet: Fleet): string[] {
    const lines: string[] = [];
    const takenAfter = (
      leaseKey: string,
      after: number,
      by?: (workerId: string) => boolean,
    ): number | null => {
      const taken = fleet.events.find(
        ({ at, event }) =>
          event.type === 'lease-taken' &&
          event.leaseKey === leaseKey &&
          at > after &&
          (by === undefined || by(event.workerId)),
      );
      return taken?.at ?? null;
    };
    const killed = this.#killed;
    if (killed !== null && killed.held.length > 0) {
      const times = killed.held.map((leaseKey) =>
        takenAfter(leaseKey, killed.at, (workerId) => workerId !== killed.workerId),
      );
      const taken = times.filter((time): time is number => time !== null);
      if (taken.length > 0) {
        const lastTaken = Math.max(...taken);
        const peak = Math.max(...killed.held.map((shardId) => fleet.peakLag(shardId, killed.at)));
        lines.push(
          `failover: ${taken.length} of ${count(killed.held.length, 'lease')} of the killed ${killed.workerId} taken over ` +
            `${seconds(lastTaken - killed.at)} after the kill -9 (lease expiry ${this.#timing.leaseExpiryMs / 1000} s); ` +
            `their shards were up to ${seconds(peak)} behind, then caught up`,
        );
      }
    }
    const stopped = this.#gracefullyStopped;
    if (stopped !== null) {
      const released = fleet.events.filter(
        ({ at, event }) =>
          event.type === 'lease-released' && event.workerId === stopped.workerId && at >= stopped.at,
      );
      const gaps = released
        .map(({ at, event }) => {
          const taken = takenAfter(event.leaseKey ?? '', at - 1);
          return taken === null ? null : taken - at;
        })
        .filter((gap): gap is number => gap !== null);
      if (gaps.length > 0)
        lines.push(
          `graceful stop: ${stopped.workerId} released ${count(released.length, 'lease')}; the others took ${gaps.length} of ` +
            `them within ${seconds(Math.max(...gaps))} (no expiry wait)`,
        );
    }
    const split = this.#split;
    if (split !== null) {
      const ended = fleet.events.find(
        ({ at, event }) => event.type === 'shard-ended' && event.leaseKey === split.parent && at > split.at,
      );
      if (ended !== undefined)
        lines.push(
          `split: ${shortShardId(split.parent)} was processed to its end ${seconds(ended.at - split.at)} after the split; its children started then`,
        );
    }
    return lines;
  }
}

function busiest(workers: readonly FleetWorker[]): FleetWorker | undefined {
  let best: FleetWorker | undefined;
  for (const worker of workers)
    if (best === undefined || worker.leases.length > best.leases.length) best = worker;
  return best;
}

function shardNumber(shardId: string): number {
  const match = /(\d+)$/.exec(shardId);
  return match === null ? 0 : Number(match[1]);
}

function count(value: number, noun: string): string {
  return `${value} ${noun}${value === 1 ? '' : 's'}`;
}

function seconds(ms: number): string {
  return `${(ms / 1000).toFixed(1)} s`;
}

/** A worker's event as a line of the view; null for the frequent ones the view leaves out. */
export function describeWorkerEvent(event: WorkerEvent): { kind: EventKind; text: string } | null {
  const shard = event.leaseKey === undefined ? '' : shortShardId(event.leaseKey);
  const list = (ids: readonly string[] | undefined): string => (ids ?? []).map(shortShardId).join(', ');
  switch (event.type) {
    case 'worker-started':
      return { kind: 'worker', text: `${event.workerId} started` };
    case 'worker-stopped':
      return {
        kind: 'worker',
        text: `${event.workerId} stopped${event.graceful === true ? ' (graceful)' : ''}`,
      };
    case 'worker-exited':
      return { kind: 'problem', text: `${event.workerId} exited on its own (${event.reason ?? 'unknown'})` };
    case 'lease-taken':
      if (event.stolen === true)
        return {
          kind: 'lease',
          text: `${event.workerId} stole ${shard} from ${event.previousOwner ?? '?'} to even out the fleet`,
        };
      return {
        kind: 'lease',
        text:
          event.previousOwner === null || event.previousOwner === undefined
            ? `${event.workerId} took ${shard}`
            : `${event.workerId} took ${shard} (lease of ${event.previousOwner} expired or released)`,
      };
    case 'lease-lost':
      return {
        kind: 'lease',
        text: `${event.workerId} lost ${shard} (${
          event.reason === 'taken-by-other'
            ? 'taken by another worker'
            : event.reason === 'expired'
              ? 'not renewed in time'
              : (event.reason ?? 'unknown')
        })`,
      };
    case 'lease-released':
      return { kind: 'lease', text: `${event.workerId} released ${shard}` };
    case 'leases-created':
      return {
        kind: 'shard',
        text:
          event.cause === 'shard-end'
            ? `${event.workerId} created leases for the children ${list(event.leaseKeys)}`
            : event.cause === 'initial'
              ? `${event.workerId} created the initial leases ${list(event.leaseKeys)}`
              : `${event.workerId} created leases for uncovered shards ${list(event.leaseKeys)}`,
      };
    case 'shard-ended':
      return {
        kind: 'shard',
        text: `${event.workerId} processed ${shard} to its end (children ${list(event.childShardIds)})`,
      };
    case 'lease-deleted':
      return { kind: 'shard', text: `${event.workerId} deleted the finished lease of ${shard}` };
    case 'iterator-expired':
      return { kind: 'lease', text: `${event.workerId}: shard iterator of ${shard} expired; renewed` };
    case 'store-error':
      return {
        kind: 'problem',
        text: `${event.workerId}: lease store error in ${event.operation ?? '?'}: ${event.error ?? ''}`,
      };
    case 'checkpoint-failed':
      return {
        kind: 'problem',
        text: `${event.workerId}: checkpoint of ${shard} failed (tried again later): ${event.error ?? ''}`,
      };
    case 'processing-error':
      return {
        kind: 'problem',
        text: `${event.workerId}: processing error on ${shard}: ${event.error ?? ''}`,
      };
    default:
      return null;
  }
}
