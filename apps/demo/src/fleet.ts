import { type ChildProcess, spawn } from 'node:child_process';
import { appendFileSync, closeSync, existsSync, fstatSync, openSync, readSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import type { LeaseStatus } from '@kcl/consumer';
import { type Clock, systemClock } from '@kcl/core';
import {
  type DemoWorkerConfig,
  type ProcessedLine,
  preciseNow,
  type WorkerEvent,
  type WorkerMessage,
} from './worker-protocol.js';

const workerScript = join(dirname(fileURLToPath(import.meta.url)), 'worker.js');

export type WorkerLifecycle = 'starting' | 'running' | 'stopping' | 'stopped' | 'killed' | 'exited';

export interface FleetWorker {
  readonly workerId: string;
  readonly outputFile: string;
  lifecycle: WorkerLifecycle;
  /** Leases the worker reported last (empty once it is gone). */
  leases: readonly LeaseStatus[];
  /** Records processed, from its last status. */
  processed: number;
  /** Recent (time, processed) samples, for records per second. */
  readonly samples: Array<{ readonly at: number; readonly processed: number }>;
  exitCode: number | null;
  exitSignal: string | null;
  readonly stderrTail: string[];
}

/** An event of a worker, or of the fleet itself (a process that exited on its own). */
export interface FleetEvent {
  readonly at: number;
  readonly event: WorkerEvent;
}

export type WorkerSettings = Omit<DemoWorkerConfig, 'workerId' | 'outputFile'>;

interface Handle {
  readonly child: ChildProcess;
  readonly exited: Promise<void>;
}

/** The demo's worker processes: spawning, kill -9, graceful stops, their events, and what they processed. */
export class Fleet {
  readonly workers = new Map<string, FleetWorker>();
  /** Every event every worker reported, in arrival order. */
  readonly events: FleetEvent[] = [];
  /** Peaks of `millisBehindLatest` above zero, per lease, as the workers reported them. */
  readonly lags: Array<{ readonly at: number; readonly leaseKey: string; readonly lagMs: number }> = [];
  readonly #handles = new Map<string, Handle>();
  readonly #outputs = new Map<string, { offset: number; partial: string }>();
  readonly #lines: ProcessedLine[] = [];
  readonly #distinct = new Set<string>();

  constructor(
    readonly options: {
      readonly runDirectory: string;
      readonly settings: WorkerSettings;
      readonly onEvent?: (event: FleetEvent) => void;
      readonly clock?: Clock;
    },
  ) {}

  /** Starts a worker process; resolves once its consumer runs. */
  async spawn(workerId: string, readyTimeoutMs = 120_000): Promise<void> {
    const outputFile = join(this.options.runDirectory, `${workerId}.jsonl`);
    const config: DemoWorkerConfig = { ...this.options.settings, workerId, outputFile };
    const worker: FleetWorker = {
      workerId,
      outputFile,
      lifecycle: 'starting',
      leases: [],
      processed: 0,
      samples: [],
      exitCode: null,
      exitSignal: null,
      stderrTail: [],
    };
    this.workers.set(workerId, worker);
    this.#outputs.set(outputFile, { offset: 0, partial: '' });
    const child = spawn(process.execPath, [workerScript, JSON.stringify(config)], {
      // stdin stays open: the worker exits when it closes, so no worker outlives the demo.
      stdio: ['pipe', 'pipe', 'pipe'],
      env: { ...process.env, AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true' },
    });
    child.stdin?.on('error', () => undefined);
    child.stderr?.setEncoding('utf8');
    child.stderr?.on('data', (chunk: string) => {
      for (const line of chunk.split('\n')) {
        if (line.trim() === '') continue;
        worker.stderrTail.push(line);
        if (worker.stderrTail.length > 20) worker.stderrTail.shift();
      }
    });
    const exited = new Promise<void>((resolve) => {
      child.once('exit', (code, signal) => {
        worker.exitCode = code;
        worker.exitSignal = signal;
        worker.leases = [];
        if (worker.lifecycle !== 'killed') {
          const expected = worker.lifecycle === 'stopping' && code === 0;
          worker.lifecycle = expected ? 'stopped' : 'exited';
          if (!expected) {
            this.#record({
              at: preciseNow(),
              event: {
                type: 'worker-exited',
                workerId,
                reason: `exit ${signal ?? code}${worker.stderrTail.length > 0 ? `: ${worker.stderrTail.at(-1)}` : ''}`,
              },
            });
          }
        }
        resolve();
      });
    });
    this.#handles.set(workerId, { child, exited });

    const ready = new Promise<void>((resolve, reject) => {
      const lines = createInterface({ input: child.stdout! });
      lines.on('line', (line) => {
        let message: WorkerMessage;
        try {
          message = JSON.parse(line) as WorkerMessage;
        } catch {
          return;
        }
        if (message.type === 'ready') {
          if (worker.lifecycle === 'starting') worker.lifecycle = 'running';
          resolve();
        } else if (message.type === 'status') {
          if (worker.lifecycle === 'killed') return;
          worker.leases = message.leases;
          worker.processed = message.processed;
          worker.samples.push({ at: message.at, processed: message.processed });
          for (const [leaseKey, lagMs] of Object.entries(message.peakLagMs))
            if (lagMs > 0) this.lags.push({ at: message.at, leaseKey, lagMs });
          while (worker.samples.length > 2 && message.at - (worker.samples[0]?.at ?? 0) > 3_000)
            worker.samples.shift();
        } else if (message.type === 'event') {
          this.#record({ at: message.at, event: message.event });
        }
      });
      void exited.then(() =>
        reject(
          new Error(
            `worker ${workerId} exited (${worker.exitSignal ?? worker.exitCode}) before it was ready:\n` +
              worker.stderrTail.join('\n'),
          ),
        ),
      );
    });
    const timeout = new AbortController();
    const timer = (this.options.clock ?? systemClock).sleep(readyTimeoutMs, timeout.signal).then(() => {
      if (!timeout.signal.aborted)
        throw new Error(`worker ${workerId} did not start within ${readyTimeoutMs / 1000} s`);
    });
    try {
      await Promise.race([ready, timer]);
    } finally {
      timeout.abort();
    }
  }

  #record(event: FleetEvent): void {
    this.events.push(event);
    // Kept with the processed records (see --keep), to examine a run afterwards.
    appendFileSync(join(this.options.runDirectory, 'events.jsonl'), `${JSON.stringify(event)}\n`);
    this.options.onEvent?.(event);
  }

  /** Workers whose process runs and is not being stopped. */
  live(): FleetWorker[] {
    return [...this.workers.values()].filter(
      (worker) => worker.lifecycle === 'running' || worker.lifecycle === 'starting',
    );
  }

  /** kill -9: the worker dies at once, without checkpointing or releasing anything. Returns when it happened. */
  async kill(workerId: string): Promise<number> {
    const worker = this.workers.get(workerId);
    const handle = this.#handles.get(workerId);
    if (worker === undefined || handle === undefined) throw new Error(`no worker ${workerId}`);
    const at = preciseNow();
    worker.lifecycle = 'killed';
    worker.leases = [];
    handle.child.kill('SIGKILL');
    await handle.exited;
    return at;
  }

  /** SIGTERM: a graceful stop (checkpoint, release the leases). Kills the process if it takes longer than `timeoutMs`. */
  async stop(
    workerId: string,
    timeoutMs = 45_000,
  ): Promise<{ readonly at: number; readonly forced: boolean }> {
    const worker = this.workers.get(workerId);
    const handle = this.#handles.get(workerId);
    if (worker === undefined || handle === undefined) throw new Error(`no worker ${workerId}`);
    const at = preciseNow();
    if (handle.child.exitCode !== null || handle.child.signalCode !== null) return { at, forced: false };
    worker.lifecycle = 'stopping';
    handle.child.kill('SIGTERM');
    const timeout = new AbortController();
    const expired = await Promise.race([
      handle.exited.then(() => false),
      (this.options.clock ?? systemClock).sleep(timeoutMs, timeout.signal).then(() => true),
    ]);
    timeout.abort();
    if (expired) {
      worker.lifecycle = 'killed';
      handle.child.kill('SIGKILL');
      await handle.exited;
    }
    return { at, forced: expired };
  }

  async stopAll(timeoutMs?: number): Promise<void> {
    await Promise.all(
      [...this.workers.values()]
        .filter((worker) => worker.lifecycle === 'running' || worker.lifecycle === 'starting')
        .map((worker) => this.stop(worker.workerId, timeoutMs)),
    );
  }

  /** For cleanup: SIGKILL every worker process still running, and wait for them. */
  async killAll(): Promise<void> {
    await Promise.all(
      [...this.#handles.entries()].map(async ([workerId, handle]) => {
        if (handle.child.exitCode !== null || handle.child.signalCode !== null) return;
        const worker = this.workers.get(workerId);
        if (worker !== undefined) worker.lifecycle = 'killed';
        handle.child.kill('SIGKILL');
        await handle.exited;
      }),
    );
  }

  /** The largest lag reported for a lease between `from` and `to` (epoch milliseconds), or 0. */
  peakLag(leaseKey: string, from: number, to = Number.POSITIVE_INFINITY): number {
    let peak = 0;
    for (let index = this.lags.length - 1; index >= 0; index--) {
      const sample = this.lags[index]!;
      if (sample.at < from) break;
      if (sample.leaseKey === leaseKey && sample.at <= to) peak = Math.max(peak, sample.lagMs);
    }
    return peak;
  }

  /** Records per second of one worker over its last few seconds. */
  rate(workerId: string): number {
    const samples = this.workers.get(workerId)?.samples ?? [];
    const first = samples[0];
    const last = samples.at(-1);
    if (first === undefined || last === undefined || last.at - first.at < 500) return 0;
    return ((last.processed - first.processed) * 1000) / (last.at - first.at);
  }

  /** Reads what the workers appended since the last call. */
  refresh(): void {
    for (const [file, state] of this.#outputs) {
      if (!existsSync(file)) continue;
      const descriptor = openSync(file, 'r');
      try {
        const size = fstatSync(descriptor).size;
        if (size <= state.offset) continue;
        const buffer = Buffer.alloc(size - state.offset);
        readSync(descriptor, buffer, 0, buffer.length, state.offset);
        state.offset = size;
        const lines = (state.partial + buffer.toString('utf8')).split('\n');
        state.partial = lines.pop() ?? '';
        for (const text of lines) {
          if (text === '') continue;
          try {
            const line = JSON.parse(text) as ProcessedLine;
            this.#lines.push(line);
            this.#distinct.add(line.d);
          } catch {
            // A line cut short by kill -9: the record was not processed completely.
          }
        }
      } finally {
        closeSync(descriptor);
      }
    }
  }

  /** Every processed line so far, counting repeats, in no particular order. */
  processedLines(): readonly ProcessedLine[] {
    this.refresh();
    return this.#lines;
  }

  /** Distinct records processed so far. */
  distinctProcessed(): number {
    this.refresh();
    return this.#distinct.size;
  }
}
