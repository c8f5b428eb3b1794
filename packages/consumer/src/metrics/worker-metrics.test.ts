import { describe, expect, it } from 'vitest';
import type { MetricDatum, MetricsLevel, MetricsSink } from './metrics-sink.js';
import { isMetricsLevelEnabled } from './metrics-sink.js';
import { WorkerMetrics } from './worker-metrics.js';

function recordingSink(level?: MetricsLevel): MetricsSink & { readonly data: MetricDatum[] } {
  const data: MetricDatum[] = [];
  return { data, record: (datum) => data.push(datum), ...(level === undefined ? {} : { level }) };
}

function emitEverything(metrics: WorkerMetrics): void {
  metrics.batch({
    shardId: 'shardId-000000000001',
    records: 5,
    bytes: 50,
    millisBehindLatest: 1_000,
    processingMs: 3,
  });
  metrics.getRecords(20, 5);
  metrics.subscribed('shardId-000000000001', 40);
  metrics.subscriptionEvent('shardId-000000000001');
  metrics.subscriptionIssue('shardId-000000000001', 'renewed');
  metrics.subscriptionIssue('shardId-000000000001', 'throttled');
  metrics.renewed({ renewed: 1, lost: 0 }, 1, 4);
  metrics.rebalanced({
    totalLeases: 2,
    numWorkers: 1,
    expiredLeases: 0,
    neededLeases: 1,
    leasesToTake: 1,
    target: 2,
  });
  metrics.event({
    type: 'iterator-expired',
    workerId: 'worker-1',
    leaseKey: 'stream:1:shardId-000000000001',
  });
  metrics.event({
    type: 'checkpoint-written',
    workerId: 'worker-1',
    leaseKey: 'shardId-000000000001',
    checkpoint: undefined as never,
  });
}

describe('metrics levels', () => {
  it('follows the Java rule: DETAILED publishes all, SUMMARY only SUMMARY, NONE nothing', () => {
    expect(isMetricsLevelEnabled('DETAILED', 'DETAILED')).toBe(true);
    expect(isMetricsLevelEnabled('DETAILED', 'SUMMARY')).toBe(true);
    expect(isMetricsLevelEnabled('SUMMARY', 'SUMMARY')).toBe(true);
    expect(isMetricsLevelEnabled('SUMMARY', 'DETAILED')).toBe(false);
    expect(isMetricsLevelEnabled('NONE', 'SUMMARY')).toBe(false);
  });
});

describe('WorkerMetrics', () => {
  it('emits every metric at DETAILED, with the Java names and dimensions', () => {
    const sink = recordingSink();
    emitEverything(new WorkerMetrics(sink, 'worker-1'));
    const names = sink.data.map((datum) => `${datum.dimensions.Operation}/${datum.name}:${datum.level}`);
    expect(names).toEqual([
      'ProcessTask/MillisBehindLatest:SUMMARY',
      'ApplicationTracker/MillisBehindLatest:SUMMARY',
      'ProcessTask/RecordsProcessed:SUMMARY',
      'ProcessTask/DataBytesProcessed:SUMMARY',
      'ProcessTask/RecordProcessor.processRecords.Time:SUMMARY',
      'ProcessTask/KinesisDataFetcher.getRecords.Time:DETAILED',
      'ProcessTask/KinesisDataFetcher.getRecords.Success:DETAILED',
      'ProcessTask/SubscribeToShard.Time:DETAILED',
      'ProcessTask/SubscribeToShard.Success:DETAILED',
      'ProcessTask/SubscribeToShard.Events:DETAILED',
      'ProcessTask/SubscribeToShard.Renewed:DETAILED',
      'ProcessTask/SubscribeToShard.Throttled:SUMMARY',
      'RenewAllLeases/CurrentLeases:SUMMARY',
      'RenewAllLeases/LostLeases:SUMMARY',
      'RenewAllLeases/Time:SUMMARY',
      'RenewAllLeases/Success:SUMMARY',
      'TakeLeases/NumWorkers:SUMMARY',
      'TakeLeases/ExpiredLeases:SUMMARY',
      'TakeLeases/TakenLeases:SUMMARY',
      'TakeLeases/TotalLeases:DETAILED',
      'TakeLeases/NeededLeases:DETAILED',
      'TakeLeases/LeasesToTake:DETAILED',
      'ProcessTask/ExpiredIterator:SUMMARY',
      'ProcessTask/UpdateLease.Success:DETAILED',
    ]);
    // The shard id of a multi-stream lease key, without the stream prefix.
    expect(sink.data.find((datum) => datum.name === 'ExpiredIterator')?.dimensions.ShardId).toBe(
      'shardId-000000000001',
    );
    expect(sink.data.find((datum) => datum.name === 'CurrentLeases')?.dimensions.WorkerIdentifier).toBe(
      'worker-1',
    );
  });

  it('reports fan-out subscriptions per shard under kcl names, one metric per issue kind', () => {
    const sink = recordingSink();
    const metrics = new WorkerMetrics(sink, 'worker-1');
    const shardId = 'shardId-000000000002';
    metrics.subscribed(shardId, 35);
    metrics.subscriptionEvent(shardId);
    for (const kind of [
      'throttled',
      'transient',
      'invalid-argument',
      'expired-iterator',
      'idle',
      'resource-in-use',
      'renewed',
      // Not counted: the closed-shard path (emulators), and kinds a subscription never reports.
      'closed-without-children',
      'not-found',
      'fatal',
    ] as const) {
      metrics.subscriptionIssue(shardId, kind);
    }
    expect(sink.data.map((datum) => [datum.name, datum.value, datum.unit, datum.level])).toEqual([
      ['SubscribeToShard.Time', 35, 'Milliseconds', 'DETAILED'],
      ['SubscribeToShard.Success', 1, 'Count', 'DETAILED'],
      ['SubscribeToShard.Events', 1, 'Count', 'DETAILED'],
      ['SubscribeToShard.Throttled', 1, 'Count', 'SUMMARY'],
      ['SubscribeToShard.Failure', 1, 'Count', 'SUMMARY'],
      ['SubscribeToShard.Failure', 1, 'Count', 'SUMMARY'],
      ['SubscribeToShard.Failure', 1, 'Count', 'SUMMARY'],
      ['SubscribeToShard.IdleRestart', 1, 'Count', 'SUMMARY'],
      ['SubscribeToShard.ResourceInUse', 1, 'Count', 'DETAILED'],
      ['SubscribeToShard.Renewed', 1, 'Count', 'DETAILED'],
    ]);
    expect(sink.data.every((datum) => datum.dimensions.Operation === 'ProcessTask')).toBe(true);
    expect(sink.data.every((datum) => datum.dimensions.ShardId === shardId)).toBe(true);
  });

  it('emits only SUMMARY metrics at SUMMARY and nothing at NONE', () => {
    const summary = recordingSink();
    emitEverything(new WorkerMetrics(summary, 'worker-1', 'SUMMARY'));
    expect(summary.data.length).toBeGreaterThan(0);
    expect(summary.data.every((datum) => datum.level === 'SUMMARY')).toBe(true);

    const none = recordingSink();
    emitEverything(new WorkerMetrics(none, 'worker-1', 'NONE'));
    expect(none.data).toEqual([]);
  });

  it('takes its level from the sink when none is given', () => {
    const sink = recordingSink('SUMMARY');
    const metrics = new WorkerMetrics(sink, 'worker-1');
    expect(metrics.level).toBe('SUMMARY');
    emitEverything(metrics);
    expect(sink.data.some((datum) => datum.level === 'DETAILED')).toBe(false);
  });

  it('counts leases lost between renewals and leases taken between rebalances', () => {
    const sink = recordingSink();
    const metrics = new WorkerMetrics(sink, 'worker-1');
    metrics.leaseLost();
    metrics.leaseLost();
    metrics.renewed({ renewed: 0, lost: 1 }, 0, 1);
    metrics.renewed({ renewed: 0, lost: 0 }, 0, 1);
    metrics.leaseTaken();
    metrics.rebalanced({
      totalLeases: 1,
      numWorkers: 1,
      expiredLeases: 0,
      neededLeases: 0,
      leasesToTake: 0,
      target: 1,
    });
    metrics.rebalanced({
      totalLeases: 1,
      numWorkers: 1,
      expiredLeases: 0,
      neededLeases: 0,
      leasesToTake: 0,
      target: 1,
    });
    const values = (name: string) =>
      sink.data.filter((datum) => datum.name === name).map((datum) => datum.value);
    expect(values('LostLeases')).toEqual([3, 0]);
    expect(values('TakenLeases')).toEqual([1, 0]);
  });

  it('keeps going when a sink throws', async () => {
    const metrics = new WorkerMetrics(
      {
        record: () => {
          throw new Error('broken sink');
        },
        flush: () => Promise.reject(new Error('broken flush')),
      },
      'worker-1',
    );
    expect(() => emitEverything(metrics)).not.toThrow();
    await expect(metrics.flush()).resolves.toBeUndefined();
  });
});
