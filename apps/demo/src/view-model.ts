import { describeLeaseStoreLocation, type LeaseStoreLocation } from '@kcl/stores';
import type { DemoOptions } from './demo-options.js';
import {
  hashRangeLabel,
  leaseLabel,
  type ShardInfo,
  type ShardRef,
  shardKey,
  shardOfLeaseKey,
  shortShardId,
  shortStreamName,
} from './demo-stream.js';
import type { Fleet } from './fleet.js';
import {
  formatClock,
  formatQuantity,
  type ShardRow,
  type ViewEvent,
  type ViewSnapshot,
  type WorkerRow,
} from './terminal-view.js';
import type { TimelineStep } from './timeline.js';
import type { DemoTiming } from './worker-protocol.js';

const STATE_LABELS: Readonly<Record<string, string>> = {
  'waiting-on-parents': 'waiting on parents',
  initializing: 'starting',
  processing: 'processing',
  'shard-ending': 'ending',
  'shutting-down': 'handing over',
  finished: 'ended',
};

/** What the view model reads of the fleet. */
export type FleetState = Pick<Fleet, 'workers' | 'peakLag' | 'rate' | 'distinctProcessed' | 'processedLines'>;

/** Events kept for the view: the latest. */
const EVENTS_KEPT = 200;

/** What the run knows at the moment of a frame, beside the fleet. */
export interface ViewFrame
  extends Pick<ViewSnapshot, 'header' | 'elapsedMs' | 'durationMs' | 'phase' | 'next' | 'written'> {
  /** The shards of every stream, as last listed, each with its stream (null when the demo reads one). */
  readonly shards: readonly (ShardInfo & ShardRef)[];
}

/** The header of the view: the fleet and its store, the timings, the script. */
export function demoHeader(run: {
  readonly options: Pick<DemoOptions, 'workers' | 'streams' | 'shards'> &
    Partial<Pick<DemoOptions, 'exactlyOnce'>>;
  readonly timing: DemoTiming;
  readonly timeline: readonly TimelineStep[];
  readonly store: LeaseStoreLocation;
}): string[] {
  const { options, timing } = run;
  return [
    `kcl demo — ${formatQuantity(options.workers, 'worker')} on ${options.streams === 1 ? '' : `${options.streams} streams of `}` +
      `${formatQuantity(options.shards, 'shard')}, lease store: ${describeLeaseStoreLocation(run.store)}` +
      (options.exactlyOnce === true ? ', exactly-once into its table demo_output' : ''),
    `timings: lease renew ${timing.leaseRenewIntervalMs / 1000} s, expiry ${timing.leaseExpiryMs / 1000} s, ` +
      `rebalance ${timing.rebalanceIntervalMs / 1000} s, poll ${timing.pollIntervalMs} ms ` +
      `(up to ${timing.maxRecords} records), ` +
      (options.exactlyOnce === true
        ? 'checkpoint with every batch, in its transaction'
        : `checkpoint every ${timing.checkpointIntervalMs / 1000} s`),
    `script: ${run.timeline.map((step) => `${formatClock(step.atMs)} ${step.label}`).join(', ')}`,
  ];
}

/**
 * What the view shows, built from the fleet's reports and from what the run noted on the way: the
 * event lines, a note per worker, the shards that ended, the last owner of each shard (to say why a
 * shard has none) and recent write counts (for the write rate).
 */
export class DemoViewModel {
  readonly #events: ViewEvent[] = [];
  readonly #notes = new Map<string, string>();
  readonly #endedShards = new Set<string>();
  readonly #lastOwner = new Map<string, string>();
  readonly #writeSamples: Array<{ at: number; written: number }> = [];

  /** An event line; the view keeps the latest. */
  addEvent(event: ViewEvent): void {
    this.#events.push(event);
    if (this.#events.length > EVENTS_KEPT) this.#events.shift();
  }

  /** A note beside a worker, e.g. "kill -9 at 00:12". */
  noteWorker(workerId: string, note: string): void {
    this.#notes.set(workerId, note);
  }

  /** A shard processed to its end (or whose finished lease was deleted): shown as ended once nobody holds it. */
  shardEnded(leaseKey: string): void {
    this.#endedShards.add(shardKey(shardOfLeaseKey(leaseKey)));
  }

  snapshot(fleet: FleetState, frame: ViewFrame, now: number): ViewSnapshot {
    const { written } = frame;
    this.#writeSamples.push({ at: now, written });
    while (this.#writeSamples.length > 2 && now - (this.#writeSamples[0]?.at ?? now) > 3_000)
      this.#writeSamples.shift();
    const firstSample = this.#writeSamples[0];
    const writeRate =
      firstSample !== undefined && now - firstSample.at > 500
        ? ((written - firstSample.written) * 1000) / (now - firstSample.at)
        : 0;
    return {
      header: frame.header,
      elapsedMs: frame.elapsedMs,
      durationMs: frame.durationMs,
      phase: frame.phase,
      next: frame.next,
      written,
      writeRate,
      processedDistinct: fleet.distinctProcessed(),
      processedTotal: fleet.processedLines().length,
      workers: this.#workerRows(fleet),
      shards: this.#shardRows(fleet, frame.shards, now),
      events: this.#events,
    };
  }

  #workerRows(fleet: FleetState): WorkerRow[] {
    return [...fleet.workers.values()].map((worker) => ({
      workerId: worker.workerId,
      state: worker.lifecycle,
      leases: worker.leases.map((lease) => leaseLabel(lease.leaseKey)),
      recordsPerSecond:
        worker.lifecycle === 'running' || worker.lifecycle === 'stopping'
          ? fleet.rate(worker.workerId)
          : null,
      processed: worker.processed,
      note: this.#notes.get(worker.workerId) ?? '',
    }));
  }

  #shardRows(fleet: FleetState, shards: readonly (ShardInfo & ShardRef)[], now: number): ShardRow[] {
    const owners = new Map<string, { workerId: string; state: string; lagMs: number | null }>();
    for (const worker of fleet.workers.values()) {
      if (worker.lifecycle !== 'running' && worker.lifecycle !== 'stopping') continue;
      for (const lease of worker.leases) {
        // The lag shown is the largest of the last 2 s, so a backlog read in one call still shows.
        const recentPeak = fleet.peakLag(lease.leaseKey, now - 2_000);
        const key = shardKey(shardOfLeaseKey(lease.leaseKey));
        owners.set(key, {
          workerId: worker.workerId,
          state: STATE_LABELS[lease.state] ?? lease.state,
          lagMs:
            lease.millisBehindLatest === null && recentPeak === 0
              ? null
              : Math.max(lease.millisBehindLatest ?? 0, recentPeak),
        });
        this.#lastOwner.set(key, worker.workerId);
      }
    }
    // Streams in the order listed, each stream's shards in shard order.
    const streamOrder = [...new Set(shards.map((shard) => shard.streamName))];
    return [...shards]
      .sort(
        (a, b) =>
          streamOrder.indexOf(a.streamName) - streamOrder.indexOf(b.streamName) ||
          shardNumber(a.shardId) - shardNumber(b.shardId),
      )
      .map((shard) => {
        const key = shardKey(shard);
        const owner = owners.get(key);
        return {
          stream: shard.streamName === null ? null : shortStreamName(shard.streamName),
          shard: shortShardId(shard.shardId),
          keys: hashRangeLabel(shard),
          owner: owner?.workerId ?? null,
          state: owner?.state ?? this.#unownedState(fleet, key),
          lagMs: owner?.lagMs ?? null,
          parents: shard.parentShardIds.map(shortShardId),
        };
      });
  }

  /** Why a shard (by `shardKey`) has no owner: it ended, its last owner was killed, or released it. */
  #unownedState(fleet: FleetState, key: string): string {
    if (this.#endedShards.has(key)) return 'ended';
    const last = this.#lastOwner.get(key);
    const lastWorker = last === undefined ? undefined : fleet.workers.get(last);
    if (lastWorker?.lifecycle === 'killed')
      return `no owner (${last} was killed; waiting for its lease to expire)`;
    if (lastWorker?.lifecycle === 'stopped' || lastWorker?.lifecycle === 'stopping')
      return `released by ${last}`;
    return 'no owner';
  }
}

function shardNumber(shardId: string): number {
  const match = /(\d+)$/.exec(shardId);
  return match === null ? 0 : Number(match[1]);
}
