import type { ConsumerOptions, RecordProcessorFactory, StreamConfig } from '@kcl/consumer';
import type { KclEvent, Lease, Logger } from '@kcl/core';
import { ConsumerWatch } from '../src/consumer-watch.js';
import { SIMULATION_TIMINGS } from '../src/fleet-simulation.js';
import { Ledger } from '../src/ledger.js';
import { Scenario, type ScenarioWorker } from '../src/scenario.js';

export const TIMINGS = { ...SIMULATION_TIMINGS, storeCallTimeoutMs: 1_000 } as const;

/** One `processRecords` call: who, on which lease, from when to when (null: not returned yet). */
export interface Delivery {
  readonly workerId: string;
  /** Which start of the worker (a restart under the same id is another process). */
  readonly incarnation: number;
  readonly leaseKey: string;
  readonly stream: string;
  readonly start: number;
  end: number | null;
}

export interface MultiStreamFleetOptions {
  readonly streams: Readonly<Record<string, number>>;
  /** The streams listed at the start. */
  readonly listed: readonly string[];
  readonly streamSyncIntervalMs: number;
  readonly waitMs: number;
  /** How long one batch of a stream takes (on the worker's clock). */
  readonly batchMs: Readonly<Record<string, number>>;
  readonly seed?: number;
  readonly handoff?: boolean;
}

/**
 * A multi-stream fleet on the simulation's parts, for hand-written schedules: workers reading the
 * streams a mutable list names (their `streamTracker`), records written per stream and key, and the
 * fleet simulation's checks — the ledger (every record, per-key order, the stream a processor was told)
 * and the consumer watch (one consumer per lease in a worker, nothing delivered after the worker
 * noticed the lease lost or later than the window after it went) — plus every `processRecords` call,
 * so that two workers inside one lease at once can be seen.
 */
export class MultiStreamFleet {
  readonly scenario: Scenario;
  readonly ledger: Ledger;
  readonly watch: ConsumerWatch;
  /** The list every worker's tracker answers with (changed by the schedule). */
  list: StreamConfig[];
  readonly deliveries: Delivery[] = [];
  readonly workers = new Map<string, ScenarioWorker>();
  /** When each killed worker process (by incarnation) was killed. */
  readonly crashedAt = new Map<number, number>();
  /** The running incarnation of each worker id. */
  readonly #incarnations = new Map<string, number>();
  #nextIncarnation = 1;
  /** Checkpoints refused, as `worker leaseKey error-name`. */
  readonly refusedCheckpoints: Array<{
    readonly workerId: string;
    readonly leaseKey: string;
    readonly error: string;
  }> = [];
  /** Every runtime event, with when it came. */
  readonly events: Array<{ readonly at: number; readonly event: KclEvent }> = [];
  /** Errors the workers logged, and workers that stopped on their own. */
  readonly failures: string[] = [];
  readonly #options: MultiStreamFleetOptions;

  constructor(options: MultiStreamFleetOptions) {
    this.#options = options;
    this.scenario = new Scenario({ streams: options.streams, seed: options.seed ?? 1 });
    const now = (): number => this.scenario.clock.monotonicNow();
    this.ledger = new Ledger(now);
    this.watch = new ConsumerWatch(this.ledger, now, TIMINGS.leaseExpiryMs);
    this.watch.checkDeliveriesAfterLoss = true;
    this.list = [...options.listed];
    // The owner of a lease as the table says; a deleted lease has none.
    this.scenario.onLeaseChange((before, after) => {
      if (after === undefined) {
        if (before !== undefined) this.watch.ownerChanged(before.leaseKey, null);
      } else if (before?.owner !== after.owner) {
        this.watch.ownerChanged(after.leaseKey, after.owner);
      }
    });
  }

  get now(): number {
    return this.scenario.clock.monotonicNow();
  }

  /** Starts (or restarts under the same id) a worker reading the list. */
  start(workerId: string, overrides: Partial<ConsumerOptions> = {}): ScenarioWorker {
    const incarnation = this.#nextIncarnation++;
    const clock = (): ScenarioWorker['clock'] => worker.clock;
    const logger: Logger = {
      debug: () => {},
      info: () => {},
      warn: () => {},
      error: (message, fields) =>
        this.failures.push(`${workerId} logged an error: ${message} ${String(fields?.error ?? '')}`),
    };
    const worker: ScenarioWorker = this.scenario.worker(workerId, {
      ...TIMINGS,
      maxRecords: 10,
      streamTracker: { streams: () => this.list },
      streamSyncIntervalMs: this.#options.streamSyncIntervalMs,
      formerStreams: { strategy: 'auto', waitMs: this.#options.waitMs },
      handoff: this.#options.handoff ?? true,
      logger,
      processor: this.#processor(workerId, incarnation, clock),
      onEvent: (event) => {
        this.events.push({ at: this.now, event });
        if (event.type === 'lease-lost') this.watch.lossNoticed(event.workerId, event.leaseKey);
      },
      ...overrides,
    });
    this.#incarnations.set(workerId, incarnation);
    this.workers.set(workerId, worker);
    worker.consumer.stopped().catch((error: unknown) => {
      if (!this.crashedAt.has(incarnation)) {
        this.failures.push(`${workerId} stopped on its own: ${String(error)}`);
      }
    });
    return worker;
  }

  crash(workerId: string): void {
    this.workers.get(workerId)?.crash();
    this.watch.crashed(workerId);
    this.crashedAt.set(this.#incarnations.get(workerId) ?? 0, this.now);
  }

  /** Whether the worker's current process was killed. */
  crashed(workerId: string): boolean {
    return this.crashedAt.has(this.#incarnations.get(workerId) ?? 0);
  }

  /** Writes one record of `key` to a stream. */
  put(streamName: string, key: string): void {
    const stream = this.scenario.streams.get(streamName);
    if (stream === undefined) throw new Error(`no stream ${streamName}`);
    const fullKey = `${streamName}:${key}`;
    const value = this.ledger.nextValue(fullKey);
    const { shardId, record } = stream.put(fullKey, new TextEncoder().encode(`${fullKey}#${value}`));
    this.ledger.produced(
      this.leaseKey(streamName, shardId),
      record.sequenceNumber,
      fullKey,
      value,
      streamName,
    );
  }

  /** Writes a record of each of `keys` keys to each stream every `everyMs` while `producing()` holds. */
  async produce(streams: readonly string[], keys: number, everyMs: number, producing: () => boolean) {
    let turn = 0;
    while (producing()) {
      for (const stream of streams) this.put(stream, `k${turn % keys}`);
      turn += 1;
      await this.scenario.clock.sleep(everyMs);
    }
  }

  leaseKey(streamName: string, shardId: string): string {
    return `${this.scenario.identifier(streamName)}:${shardId}`;
  }

  /** The stored leases of a stream. */
  leasesOf(streamName: string): Lease[] {
    const prefix = `${this.scenario.identifier(streamName)}:`;
    return this.scenario.table
      .rawLeases(this.scenario.applicationName)
      .filter((lease) => lease.leaseKey.startsWith(prefix));
  }

  /** The leases a worker's consumers hold now. */
  held(workerId: string, streamName?: string): string[] {
    const prefix = streamName === undefined ? '' : `${this.scenario.identifier(streamName)}:`;
    return (
      this.workers
        .get(workerId)
        ?.consumer.status()
        .leases.map((lease) => lease.leaseKey)
        .filter((leaseKey) => leaseKey.startsWith(prefix)) ?? []
    );
  }

  /** When the table changed a lease of a stream, and how (`created`, `deleted`, `updated`). */
  tableChanges(
    streamName: string,
  ): Array<{ readonly at: number; readonly kind: string; readonly leaseKey: string }> {
    const prefix = `${this.scenario.identifier(streamName)}:`;
    return this.scenario.changes.flatMap((change) => {
      const leaseKey = (change.after ?? change.before)?.leaseKey ?? '';
      if (!leaseKey.startsWith(prefix)) return [];
      const kind =
        change.before === undefined ? 'created' : change.after === undefined ? 'deleted' : 'updated';
      return [{ at: change.at, kind, leaseKey }];
    });
  }

  /** Deliveries in flight on a stream now. */
  inFlight(streamName: string): Delivery[] {
    return this.deliveries.filter(
      (delivery) =>
        delivery.stream === streamName && delivery.end === null && !this.crashedAt.has(delivery.incarnation),
    );
  }

  /** Records of a stream written before `before` (ms) that were never handled. */
  unhandled(streamName: string, before = Number.POSITIVE_INFINITY): string[] {
    return this.ledger
      .unaccountedWhere((record) => record.stream === streamName && record.writtenAt < before)
      .map((record) => `${record.key}#${record.value}`);
  }

  /** Two workers inside `processRecords` of one lease at the same time (a killed worker's call ends at the kill). */
  overlaps(): string[] {
    const found: string[] = [];
    const endOf = (delivery: Delivery): number =>
      delivery.end ?? this.crashedAt.get(delivery.incarnation) ?? this.now;
    for (const [index, first] of this.deliveries.entries()) {
      for (const second of this.deliveries.slice(index + 1)) {
        if (first.leaseKey !== second.leaseKey || first.incarnation === second.incarnation) continue;
        if (first.start < endOf(second) && second.start < endOf(first)) {
          found.push(
            `${first.workerId} ${first.start}–${endOf(first)} and ${second.workerId} ${second.start}–${endOf(second)} on ${first.leaseKey}`,
          );
        }
      }
    }
    return found;
  }

  /** Every violation of the ledger and the watch, one line each. */
  violations(): string[] {
    return this.ledger.violations.map(
      (violation) => `${violation.invariant} at ${violation.at}: ${violation.message}`,
    );
  }

  /** Stops every live worker gracefully; the longest stop, or null if one did not end within 20 s. */
  async stopAll(): Promise<number | null> {
    let longest = 0;
    for (const [workerId, worker] of this.workers) {
      if (this.crashed(workerId)) continue;
      const took = await this.scenario.timed(worker.consumer.stop(), 20_000);
      if (took === null) return null;
      longest = Math.max(longest, took);
    }
    return longest;
  }

  #processor(
    workerId: string,
    incarnation: number,
    clock: () => ScenarioWorker['clock'],
  ): RecordProcessorFactory {
    return (_shardId, context) => {
      const instance = this.watch.begin(workerId, context.leaseKey);
      const stream = context.stream.name;
      const who = `${workerId} #${instance.id}`;
      return {
        processRecords: async ({ records, checkpointer }) => {
          if (records.length === 0) return;
          this.watch.delivering(instance);
          const delivery: Delivery = {
            workerId,
            incarnation,
            leaseKey: context.leaseKey,
            stream,
            start: this.now,
            end: null,
          };
          this.deliveries.push(delivery);
          await clock().sleep(this.#options.batchMs[stream] ?? 0);
          for (const record of records) this.ledger.handled(record.sequenceNumber, who, true, stream);
          delivery.end = this.now;
          await checkpointer.checkpoint().catch((error: Error) => {
            this.refusedCheckpoints.push({ workerId, leaseKey: context.leaseKey, error: error.name });
          });
        },
        shardEnded: async ({ checkpointer }) => {
          await checkpointer.checkpoint();
          this.watch.end(instance);
        },
        shutdownRequested: async ({ checkpointer }) => {
          await checkpointer.checkpoint().catch(() => undefined);
        },
        leaseLost: () => this.watch.end(instance),
      };
    };
  }
}
