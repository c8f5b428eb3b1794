import type { KclEvent, LeaseHandoffStep } from '@kcl/core';
import { shardIdOfLeaseKey } from '@kcl/core';
import { streamIdentifierOfLeaseKey } from '@kcl/shard-graph';
import type { SubscriptionIssueKind } from '../kinesis/shard-subscriber.js';
import type { MetricDatum, MetricsLevel, MetricsSink, MetricUnit } from './metrics-sink.js';
import { isMetricsLevelEnabled } from './metrics-sink.js';

/** Figures a rebalance reports, for the `TakeLeases` metrics. */
export interface RebalanceFigures {
  readonly totalLeases: number;
  readonly numWorkers: number;
  readonly expiredLeases: number;
  readonly neededLeases: number;
  readonly leasesToTake: number;
  readonly target: number;
}

/** The metric counting each hand-off step (no Java KCL name exists for them). */
const HANDOFF_METRICS: Readonly<Record<LeaseHandoffStep, string>> = {
  requested: 'HandoffsRequested',
  completed: 'HandoffsCompleted',
  received: 'HandoffsReceived',
  'fell-back': 'HandoffsFellBack',
  dropped: 'HandoffsDropped',
};

/**
 * The metric counting each subscription issue. The Java KCL's fan-out publisher reports no metrics
 * (`FanOutRecordsPublisher` ignores the metrics factory it is given, 2.0 through 3.5), so these are
 * kcl's own names, in the style of its polling ones. Kinds not listed (the closed-shard path, which
 * emulators alone take) are not counted.
 */
const SUBSCRIPTION_ISSUE_METRICS: Partial<
  Readonly<Record<SubscriptionIssueKind, { readonly name: string; readonly level: 'SUMMARY' | 'DETAILED' }>>
> = {
  throttled: { name: 'SubscribeToShard.Throttled', level: 'SUMMARY' },
  transient: { name: 'SubscribeToShard.Failure', level: 'SUMMARY' },
  'invalid-argument': { name: 'SubscribeToShard.Failure', level: 'SUMMARY' },
  'expired-iterator': { name: 'SubscribeToShard.Failure', level: 'SUMMARY' },
  idle: { name: 'SubscribeToShard.IdleRestart', level: 'SUMMARY' },
  'resource-in-use': { name: 'SubscribeToShard.ResourceInUse', level: 'DETAILED' },
  renewed: { name: 'SubscribeToShard.Renewed', level: 'DETAILED' },
};

/**
 * Turns what a worker does into metrics with the Java KCL's names and dimensions, so existing
 * dashboards and alarms keep working: `ProcessTask` per shard, `ApplicationTracker` for the
 * application, `RenewAllLeases` and `TakeLeases` per worker.
 */
export class WorkerMetrics {
  readonly #sink: MetricsSink | null;
  readonly #level: MetricsLevel;
  readonly #workerId: string;
  #takenSinceLastRebalance = 0;
  #lostSinceLastRenewal = 0;

  /** `level` defaults to the sink's own level, else DETAILED (as the Java KCL). NONE records nothing. */
  constructor(sink: MetricsSink | null, workerId: string, level: MetricsLevel = sink?.level ?? 'DETAILED') {
    this.#sink = level === 'NONE' ? null : sink;
    this.#level = level;
    this.#workerId = workerId;
  }

  /** The level in force. */
  get level(): MetricsLevel {
    return this.#level;
  }

  #record(
    name: string,
    value: number,
    unit: MetricUnit,
    dimensions: Readonly<Record<string, string>>,
    level: 'SUMMARY' | 'DETAILED',
  ): void {
    if (this.#sink === null || !isMetricsLevelEnabled(this.#level, level)) return;
    const datum: MetricDatum = { name, value, unit, dimensions, level };
    try {
      this.#sink.record(datum);
    } catch {
      // A sink must not throw; if one does anyway, metrics never break processing.
    }
  }

  batch(report: {
    readonly shardId: string;
    /** The lease key: a multi-stream key adds the StreamId dimension. */
    readonly leaseKey?: string;
    readonly records: number;
    readonly bytes: number;
    readonly millisBehindLatest: number;
    readonly processingMs: number;
  }): void {
    const shard = this.#shard(report.leaseKey ?? report.shardId);
    this.#record('MillisBehindLatest', report.millisBehindLatest, 'Milliseconds', shard, 'SUMMARY');
    this.#record(
      'MillisBehindLatest',
      report.millisBehindLatest,
      'Milliseconds',
      { Operation: 'ApplicationTracker' },
      'SUMMARY',
    );
    this.#record('RecordsProcessed', report.records, 'Count', shard, 'SUMMARY');
    this.#record('DataBytesProcessed', report.bytes, 'Bytes', shard, 'SUMMARY');
    this.#record(
      'RecordProcessor.processRecords.Time',
      report.processingMs,
      'Milliseconds',
      shard,
      'SUMMARY',
    );
  }

  getRecords(durationMs: number, _records: number): void {
    this.#record(
      'KinesisDataFetcher.getRecords.Time',
      durationMs,
      'Milliseconds',
      { Operation: 'ProcessTask' },
      'DETAILED',
    );
    this.#record(
      'KinesisDataFetcher.getRecords.Success',
      1,
      'Count',
      { Operation: 'ProcessTask' },
      'DETAILED',
    );
  }

  /** A SubscribeToShard call was answered: a fan-out subscription of the shard started (kcl metrics). */
  subscribed(leaseKey: string, durationMs: number): void {
    const shard = this.#shard(leaseKey);
    this.#record('SubscribeToShard.Time', durationMs, 'Milliseconds', shard, 'DETAILED');
    this.#record('SubscribeToShard.Success', 1, 'Count', shard, 'DETAILED');
  }

  /** A subscription delivered an event (records or an empty heartbeat). */
  subscriptionEvent(leaseKey: string): void {
    this.#record('SubscribeToShard.Events', 1, 'Count', this.#shard(leaseKey), 'DETAILED');
  }

  /** A subscription failed, was throttled, waited for another one, was renewed or went idle. */
  subscriptionIssue(leaseKey: string, kind: SubscriptionIssueKind): void {
    const metric = SUBSCRIPTION_ISSUE_METRICS[kind];
    if (metric === undefined) return;
    this.#record(metric.name, 1, 'Count', this.#shard(leaseKey), metric.level);
  }

  renewed(
    result: { readonly renewed: number; readonly lost: number },
    currentLeases: number,
    durationMs: number,
  ): void {
    const worker = { Operation: 'RenewAllLeases', WorkerIdentifier: this.#workerId };
    this.#record('CurrentLeases', currentLeases, 'Count', worker, 'SUMMARY');
    this.#record('LostLeases', result.lost + this.#lostSinceLastRenewal, 'Count', worker, 'SUMMARY');
    this.#record('Time', durationMs, 'Milliseconds', worker, 'SUMMARY');
    this.#record('Success', 1, 'Count', worker, 'SUMMARY');
    this.#lostSinceLastRenewal = 0;
  }

  /** Leases of shards that no longer exist (a deleted stream, say), deleted by the cleanup. */
  garbageLeasesDeleted(count: number): void {
    this.#record('GarbageLeasesDeleted', count, 'Count', { Operation: 'LeaseCleanup' }, 'SUMMARY');
  }

  leaseLost(): void {
    this.#lostSinceLastRenewal += 1;
  }

  leaseTaken(): void {
    this.#takenSinceLastRebalance += 1;
  }

  rebalanced(figures: RebalanceFigures): void {
    const worker = { Operation: 'TakeLeases', WorkerIdentifier: this.#workerId };
    this.#record('NumWorkers', figures.numWorkers, 'Count', worker, 'SUMMARY');
    this.#record('ExpiredLeases', figures.expiredLeases, 'Count', worker, 'SUMMARY');
    this.#record('TakenLeases', this.#takenSinceLastRebalance, 'Count', worker, 'SUMMARY');
    this.#record('TotalLeases', figures.totalLeases, 'Count', worker, 'DETAILED');
    this.#record('NeededLeases', figures.neededLeases, 'Count', worker, 'DETAILED');
    this.#record('LeasesToTake', figures.leasesToTake, 'Count', worker, 'DETAILED');
    this.#takenSinceLastRebalance = 0;
  }

  get #handoffDimensions(): Readonly<Record<string, string>> {
    return { Operation: 'TakeLeases', WorkerIdentifier: this.#workerId };
  }

  /**
   * Metrics that follow from consumer events: `ExpiredIterator` (SUMMARY) and the per-checkpoint
   * `UpdateLease.Success` (DETAILED), both under `ProcessTask` with the shard; the hand-off steps
   * (`HandoffsRequested`, `HandoffsCompleted`, `HandoffsReceived`, `HandoffsFellBack`,
   * `HandoffsDropped`, SUMMARY) under `TakeLeases` with the worker. Feed it every event.
   */
  event(event: KclEvent): void {
    switch (event.type) {
      case 'iterator-expired':
        this.#record('ExpiredIterator', 1, 'Count', this.#shard(event.leaseKey), 'SUMMARY');
        break;
      case 'checkpoint-written':
        this.#record('UpdateLease.Success', 1, 'Count', this.#shard(event.leaseKey), 'DETAILED');
        break;
      case 'lease-handoff':
        this.#record(HANDOFF_METRICS[event.step], 1, 'Count', this.#handoffDimensions, 'SUMMARY');
        break;
      default:
        break;
    }
  }

  /** The shard's dimensions; a multi-stream lease adds its stream (`StreamId`, as the Java KCL). */
  #shard(leaseKey: string): Readonly<Record<string, string>> {
    const shard = { Operation: 'ProcessTask', ShardId: shardIdOfLeaseKey(leaseKey) };
    const stream = streamIdentifierOfLeaseKey(leaseKey);
    return stream === undefined ? shard : { ...shard, StreamId: stream };
  }

  /** Several streams: how many are listed and how many are read without being listed (kcl metrics). */
  streams(figures: { readonly listed: number; readonly former: number }): void {
    const tracker = { Operation: 'MultiStreamTracker' };
    this.#record('ActiveStreams.Count', figures.listed, 'Count', tracker, 'SUMMARY');
    this.#record('StreamsPendingDeletion.Count', figures.former, 'Count', tracker, 'SUMMARY');
  }

  /** Several streams: leases of former or deleted streams deleted. */
  streamLeasesDeleted(streams: number): void {
    this.#record('DeletedStreams.Count', streams, 'Count', { Operation: 'MultiStreamTracker' }, 'SUMMARY');
  }

  async flush(): Promise<void> {
    try {
      await this.#sink?.flush?.();
    } catch {
      // Publishing problems are the sink's to report (it logs them); stopping goes on.
    }
  }
}
