import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { closeSync, existsSync, fstatSync, openSync, readSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { concurrentOwners, FLEET_TIMINGS, waitUntil } from '@kcl/testkit';
import type { StoreConfig } from '../../src/store-config.js';
import type { BatchLine, ProcessedLine, WorkerProcessConfig } from '../../src/worker-process.js';

const workerScript = join(dirname(fileURLToPath(import.meta.url)), '../../dist/worker-process.js');

export interface FleetEvent {
  readonly type: string;
  readonly workerId: string;
  readonly leaseKey?: string;
  readonly at: number;
  readonly [field: string]: unknown;
}

interface WorkerHandle {
  readonly workerId: string;
  readonly child: ChildProcess;
  readonly exited: Promise<unknown>;
  readonly stderr: string[];
}

/** A JSON-lines file a worker appends to, read incrementally. */
class JsonLinesFile<T> {
  readonly lines: T[] = [];
  #offset = 0;
  #partial = '';

  constructor(readonly file: string) {}

  /** Reads what was appended since the last call; returns every line so far. */
  read(): readonly T[] {
    if (!existsSync(this.file)) return this.lines;
    const descriptor = openSync(this.file, 'r');
    try {
      const size = fstatSync(descriptor).size;
      if (size > this.#offset) {
        const buffer = Buffer.alloc(size - this.#offset);
        readSync(descriptor, buffer, 0, buffer.length, this.#offset);
        this.#offset = size;
        const text = this.#partial + buffer.toString('utf8');
        const lines = text.split('\n');
        this.#partial = lines.pop() ?? '';
        for (const line of lines) {
          if (line === '') continue;
          try {
            this.lines.push(JSON.parse(line) as T);
          } catch {
            // A line cut short by kill -9.
          }
        }
      }
    } finally {
      closeSync(descriptor);
    }
    return this.lines;
  }
}

/** Worker processes of one fleet, their events and what they processed. */
export class FleetHarness {
  readonly events: FleetEvent[] = [];
  readonly #workers = new Map<string, WorkerHandle>();
  readonly #outputs = new Map<string, JsonLinesFile<ProcessedLine>>();
  readonly #batches = new Map<string, JsonLinesFile<BatchLine>>();

  constructor(
    readonly options: {
      readonly dir: string;
      readonly store: StoreConfig;
      readonly kinesisEndpoint: string;
      readonly applicationName: string;
      /** The one stream the workers read… */
      readonly streamName?: string;
      /** …or several. */
      readonly streams?: WorkerProcessConfig['streams'];
      readonly initialPosition?: WorkerProcessConfig['initialPosition'];
      readonly timing?: WorkerProcessConfig['timing'];
      /** Consumer options for every worker beyond the timings. */
      readonly consumer?: WorkerProcessConfig['consumer'];
    },
  ) {}

  /**
   * Starts a worker process (on the fleet's store, or `store`) and waits until its consumer runs;
   * `extra` changes this worker's processor.
   */
  async spawn(
    workerId: string,
    store: StoreConfig = this.options.store,
    extra: Pick<
      WorkerProcessConfig,
      'shutdownRequestedDelayMs' | 'outputTable' | 'transactionWorkDelayMs'
    > = {},
  ): Promise<void> {
    const outputFile = join(this.options.dir, `${workerId}.jsonl`);
    const batchFile = join(this.options.dir, `${workerId}.batches.jsonl`);
    if (!this.#outputs.has(outputFile)) this.#outputs.set(outputFile, new JsonLinesFile(outputFile));
    if (!this.#batches.has(batchFile)) this.#batches.set(batchFile, new JsonLinesFile(batchFile));
    const config: WorkerProcessConfig = {
      workerId,
      applicationName: this.options.applicationName,
      ...(this.options.streams === undefined
        ? { streamName: this.options.streamName ?? '' }
        : { streams: this.options.streams }),
      ...(this.options.initialPosition === undefined
        ? {}
        : { initialPosition: this.options.initialPosition }),
      kinesisEndpoint: this.options.kinesisEndpoint,
      store,
      outputFile,
      batchFile,
      timing: this.options.timing ?? FLEET_TIMINGS.processes,
      ...(this.options.consumer === undefined ? {} : { consumer: this.options.consumer }),
      ...extra,
    };
    const child = spawn(process.execPath, [workerScript, JSON.stringify(config)], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true' },
    });
    const stderr: string[] = [];
    child.stderr?.on('data', (chunk: Buffer) => {
      stderr.push(chunk.toString());
      if (stderr.length > 200) stderr.shift();
    });
    const exited = once(child, 'exit');
    const handle: WorkerHandle = { workerId, child, exited, stderr };
    this.#workers.set(workerId, handle);
    const ready = new Promise<void>((resolve, reject) => {
      const lines = createInterface({ input: child.stdout! });
      lines.on('line', (line) => {
        let event: FleetEvent;
        try {
          event = JSON.parse(line) as FleetEvent;
        } catch {
          return;
        }
        this.events.push(event);
        if (event.type === 'ready') resolve();
      });
      void exited.then(() =>
        reject(new Error(`worker ${workerId} exited before it was ready:\n${stderr.join('')}`)),
      );
    });
    await ready;
  }

  /** kill -9: the worker dies without releasing anything. */
  async kill(workerId: string): Promise<number> {
    const handle = this.#workers.get(workerId);
    if (handle === undefined) throw new Error(`no worker ${workerId}`);
    const at = performance.timeOrigin + performance.now();
    handle.child.kill('SIGKILL');
    await handle.exited;
    return at;
  }

  /** SIGTERM: a graceful stop; waits for the process to exit. */
  async stop(workerId: string): Promise<number> {
    const handle = this.#workers.get(workerId);
    if (handle === undefined) throw new Error(`no worker ${workerId}`);
    const at = performance.timeOrigin + performance.now();
    if (handle.child.exitCode === null && handle.child.signalCode === null) {
      handle.child.kill('SIGTERM');
      const timer = setTimeout(() => handle.child.kill('SIGKILL'), 20_000);
      await handle.exited;
      clearTimeout(timer);
    }
    return at;
  }

  async stopAll(): Promise<void> {
    await Promise.all([...this.#workers.keys()].map((workerId) => this.stop(workerId)));
  }

  stderrOf(workerId: string): string {
    return this.#workers.get(workerId)?.stderr.join('') ?? '';
  }

  /** Every processed line of every worker, merged by time. Files are read incrementally. */
  processed(): ProcessedLine[] {
    const all: ProcessedLine[] = [];
    for (const output of this.#outputs.values()) all.push(...output.read());
    return all.sort((a, b) => a.t - b.t);
  }

  /** Every worker's `processRecords` calls with records, as far as they ended. */
  batches(): BatchLine[] {
    return [...this.#batches.values()].flatMap((file) => [...file.read()]);
  }

  /**
   * The times two workers processed one shard at once (`concurrentOwners` over every batch). A shard
   * is named `stream/shardId`: shard ids repeat from one stream to the next.
   */
  concurrentOwners(): string[] {
    return concurrentOwners(
      this.batches().map((batch) => ({
        workerId: batch.w,
        shardId: `${batch.st}/${batch.s}`,
        startedAt: batch.start,
        endedAt: batch.end,
      })),
    );
  }

  /** How many records were processed, counting repeats (cheap: no sorting). */
  processedCount(): number {
    this.processed();
    let count = 0;
    for (const output of this.#outputs.values()) count += output.lines.length;
    return count;
  }

  /** How many distinct records were processed (of one stream, when `streamName` is given). */
  distinctCount(streamName?: string): number {
    this.processed();
    const seen = new Set<string>();
    for (const output of this.#outputs.values()) {
      for (const line of output.lines)
        if (streamName === undefined || line.st === streamName) seen.add(line.d);
    }
    return seen.size;
  }

  /** The leases a worker holds by its events: taken, and not lost, released or handed over since. */
  leasesOf(workerId: string): Set<string> {
    const held = new Set<string>();
    for (const event of this.events) {
      if (event.workerId !== workerId || event.leaseKey === undefined) continue;
      if (event.type === 'lease-taken') held.add(event.leaseKey);
      if (event.type === 'lease-lost' || event.type === 'lease-released') held.delete(event.leaseKey);
      // The owner's side of a completed hand-off: the lease is the requester's now.
      if (event.type === 'lease-handoff' && event.step === 'completed') held.delete(event.leaseKey);
    }
    return held;
  }
}

/** True once `workers` hold all `shards` leases between them, evenly (by their events). */
export const balanced =
  (fleetHarness: FleetHarness, workers: readonly string[], shards: number) => (): boolean => {
    const counts = workers.map((workerId) => fleetHarness.leasesOf(workerId).size);
    return (
      counts.reduce((sum, count) => sum + count, 0) === shards &&
      Math.max(...counts) - Math.min(...counts) <= 1
    );
  };

export interface Verification {
  readonly written: number;
  readonly processedDistinct: number;
  readonly lost: number;
  readonly duplicates: number;
  readonly orderViolations: number;
}

/** Compares what was written with what was processed; `indexOf` gives a record's write order. */
export function verify(
  written: ReadonlyArray<{ readonly data: string }>,
  processed: readonly ProcessedLine[],
): Verification {
  const firstSeen = new Map<string, ProcessedLine>();
  for (const line of processed) if (!firstSeen.has(line.d)) firstSeen.set(line.d, line);
  let lost = 0;
  for (const record of written) if (!firstSeen.has(record.data)) lost += 1;
  const highest = new Map<string, number>();
  let orderViolations = 0;
  for (const line of [...firstSeen.values()].sort((a, b) => a.t - b.t)) {
    const index = Number(line.d.slice(line.d.lastIndexOf('-') + 1));
    if (index < (highest.get(line.k) ?? -1)) orderViolations += 1;
    else highest.set(line.k, index);
  }
  return {
    written: written.length,
    processedDistinct: firstSeen.size,
    lost,
    duplicates: processed.length - firstSeen.size,
    orderViolations,
  };
}

/** Polls every 200 ms: the conditions read every worker's output, which costs time on a busy machine. */
export const waitFor = (
  condition: () => boolean | Promise<boolean>,
  timeoutMs: number,
  what: string,
): Promise<void> => waitUntil(condition, timeoutMs, what, 200);
