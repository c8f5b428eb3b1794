import type { LeaseStatus } from '@kcl/consumer';
import type { LeaseStoreLocation } from '@kcl/stores';
import { FLEET_TIMINGS, type FleetTiming } from '@kcl/testkit';

/**
 * The consumer timings of the demo: short, so failover and hand-over show within seconds (the testkit's
 * `demo` preset, which bench/failover measures too), and the demo's own processor settings.
 */
export interface DemoTiming extends FleetTiming {
  /** Records per GetRecords call (see `maxRecordsFor`). */
  readonly maxRecords: number;
  /** How often the demo's processor checkpoints a shard (a real application would also checkpoint periodically). */
  readonly checkpointIntervalMs: number;
}

export const DEMO_TIMING: DemoTiming = {
  ...FLEET_TIMINGS.demo,
  maxRecords: 100,
  checkpointIntervalMs: 1_000,
};

/**
 * Records per GetRecords call for a write rate: small, so a backlog (after a failover) takes a few
 * calls and shows as lag, yet at least twice what a shard receives at 5 calls per second.
 */
export function maxRecordsFor(rate: number, shards: number): number {
  return Math.min(10_000, Math.max(100, Math.ceil(((rate / shards) * 2) / 5)));
}

/** What a worker process is started with (its one argument, as JSON). */
export interface DemoWorkerConfig {
  readonly workerId: string;
  readonly applicationName: string;
  /** The streams to read: one (`streamName`, single-stream lease keys) or several (`streams`, multi-stream mode). */
  readonly streams: readonly string[];
  /** The Kinesis emulator: endpoint, region and the credentials it accepts. */
  readonly kinesis: {
    readonly endpoint: string;
    readonly region: string;
    readonly credentials: { readonly accessKeyId: string; readonly secretAccessKey: string };
  };
  /** The lease store, as `openLeaseStore` takes it. */
  readonly store: LeaseStoreLocation;
  /** Where the worker appends a line per record it processes, before checkpointing. */
  readonly outputFile: string;
  /**
   * Exactly-once: the table of the SQLite lease store the worker inserts every batch into, in the
   * transaction of the batch's checkpoint (`checkpointer.transaction`); the output file then gets a
   * batch's lines after its commit, for the live view only.
   */
  readonly outputTable?: string;
  readonly timing: DemoTiming;
  /** How often the worker prints its status. */
  readonly statusIntervalMs: number;
}

/** One line of a worker's output file: a record it processed. Short names keep the file small. */
export interface ProcessedLine {
  /** worker id */
  readonly w: string;
  /** lease key: the shard id with one stream, `account:stream:creationEpoch:shardId` with several */
  readonly s: string;
  /** the stream's name, when the demo reads several */
  readonly n?: string;
  /** sequence number */
  readonly q: string;
  /** partition key */
  readonly k: string;
  /** payload */
  readonly d: string;
  /** when it was processed: epoch milliseconds with sub-millisecond precision, comparable across processes */
  readonly t: number;
}

/** What a worker prints on stdout, one JSON object per line. */
export type WorkerMessage =
  | { readonly type: 'ready'; readonly workerId: string; readonly at: number }
  | {
      readonly type: 'status';
      readonly workerId: string;
      readonly at: number;
      /** Records processed by this worker so far (counting repeats). */
      readonly processed: number;
      readonly leases: readonly LeaseStatus[];
      /**
       * Per lease key, the largest `millisBehindLatest` of the batches delivered since the last status: a
       * backlog is often read in one call, so the current value alone would rarely show it.
       */
      readonly peakLagMs: Readonly<Record<string, number>>;
    }
  | {
      readonly type: 'event';
      readonly at: number;
      /** A `KclEvent` with errors turned into messages and checkpoints into strings. */
      readonly event: WorkerEvent;
    };

/** A `KclEvent` as it crosses the process boundary. */
export interface WorkerEvent {
  readonly type: string;
  readonly workerId: string;
  readonly leaseKey?: string;
  readonly leaseKeys?: readonly string[];
  readonly childShardIds?: readonly string[];
  readonly previousOwner?: string | null;
  readonly stolen?: boolean;
  readonly reason?: string;
  readonly cause?: string;
  readonly checkpoint?: string;
  readonly operation?: string;
  readonly error?: string;
  readonly graceful?: boolean;
}

/** Wall-clock milliseconds with sub-millisecond precision; every process of the demo uses the same. */
export function preciseNow(): number {
  return performance.timeOrigin + performance.now();
}
