import { ConfigurationError } from '@kcl/core';
import { ManualClock } from '@kcl/testkit';
import { Registry, register } from 'prom-client';
import { afterEach, describe, expect, it } from 'vitest';
import type { MetricDatum } from './metrics-sink.js';
import { createPrometheusMetricsSink, type PrometheusRegistry } from './prometheus-metrics-sink.js';
import { WorkerMetrics } from './worker-metrics.js';

function datum(
  name: string,
  value: number,
  dimensions: Record<string, string>,
  unit: MetricDatum['unit'] = 'Count',
): MetricDatum {
  return { name, value, unit, dimensions, level: 'SUMMARY' };
}

/** The exposition lines that are samples (no HELP/TYPE comments). */
async function samples(registry: Registry): Promise<string[]> {
  return (await registry.metrics()).split('\n').filter((line) => line !== '' && !line.startsWith('#'));
}

afterEach(() => {
  register.clear();
});

describe('the Prometheus metrics sink', () => {
  it('accepts a real prom-client Registry as its registry type', () => {
    const registry: PrometheusRegistry = new Registry();
    expect(typeof registry.metrics).toBe('function');
  });

  it('exposes the worker metrics under Prometheus names', async () => {
    const registry = new Registry();
    const metrics = new WorkerMetrics(createPrometheusMetricsSink({ registry }), 'worker-1');
    const shardId = 'shardId-000000000001';
    metrics.batch({ shardId, records: 10, bytes: 1_000, millisBehindLatest: 4_000, processingMs: 20 });
    metrics.batch({ shardId, records: 20, bytes: 2_000, millisBehindLatest: 1_500, processingMs: 200 });
    metrics.getRecords(30, 20);
    metrics.leaseLost();
    metrics.renewed({ renewed: 2, lost: 0 }, 2, 5);
    metrics.leaseTaken();
    metrics.rebalanced({
      totalLeases: 4,
      numWorkers: 2,
      expiredLeases: 0,
      neededLeases: 1,
      leasesToTake: 1,
      target: 2,
    });
    metrics.event({ type: 'iterator-expired', workerId: 'worker-1', leaseKey: shardId });

    const lines = await samples(registry);
    const text = await registry.metrics();
    expect(lines).toContain(`kcl_millis_behind_latest{shard_id="${shardId}"} 1500`);
    expect(lines).toContain(`kcl_records_processed_total{shard_id="${shardId}"} 30`);
    expect(lines).toContain(`kcl_data_bytes_processed_total{shard_id="${shardId}"} 3000`);
    expect(lines).toContain(`kcl_expired_iterators_total{shard_id="${shardId}"} 1`);
    expect(lines).toContain('kcl_process_records_duration_seconds_bucket{le="0.025"} 1');
    expect(lines).toContain('kcl_process_records_duration_seconds_bucket{le="0.25"} 2');
    expect(lines).toContain('kcl_process_records_duration_seconds_sum 0.22');
    expect(lines).toContain('kcl_process_records_duration_seconds_count 2');
    expect(lines).toContain('kcl_get_records_total 1');
    expect(lines).toContain('kcl_current_leases{worker_id="worker-1"} 2');
    expect(lines).toContain('kcl_lost_leases_total{worker_id="worker-1"} 1');
    expect(lines).toContain('kcl_taken_leases_total{worker_id="worker-1"} 1');
    expect(lines).toContain('kcl_workers{worker_id="worker-1"} 2');
    expect(lines).toContain('kcl_total_leases{worker_id="worker-1"} 4');
    expect(text).toContain('# TYPE kcl_millis_behind_latest gauge');
    expect(text).toContain('# TYPE kcl_records_processed_total counter');
    expect(text).toContain('# TYPE kcl_process_records_duration_seconds histogram');
    // The application-wide MillisBehindLatest is not a separate series: max() over the shard gauges gives it.
    expect(lines.filter((line) => line.startsWith('kcl_millis_behind_latest'))).toHaveLength(1);
  });

  it('exposes the fan-out subscription metrics under Prometheus names', async () => {
    const registry = new Registry();
    const metrics = new WorkerMetrics(createPrometheusMetricsSink({ registry }), 'worker-1');
    const shardId = 'shardId-000000000003';
    metrics.subscribed(shardId, 40);
    metrics.subscribed(shardId, 60);
    metrics.subscriptionEvent(shardId);
    metrics.subscriptionEvent(shardId);
    metrics.subscriptionEvent(shardId);
    metrics.subscriptionIssue(shardId, 'renewed');
    metrics.subscriptionIssue(shardId, 'resource-in-use');
    metrics.subscriptionIssue(shardId, 'idle');
    metrics.subscriptionIssue(shardId, 'throttled');
    metrics.subscriptionIssue(shardId, 'transient');

    const lines = await samples(registry);
    const text = await registry.metrics();
    expect(lines).toContain(`kcl_subscribe_to_shard_total{shard_id="${shardId}"} 2`);
    expect(lines).toContain('kcl_subscribe_to_shard_duration_seconds_count 2');
    expect(lines).toContain('kcl_subscribe_to_shard_duration_seconds_sum 0.1');
    expect(lines).toContain(`kcl_subscribe_to_shard_events_total{shard_id="${shardId}"} 3`);
    expect(lines).toContain(`kcl_subscribe_to_shard_renewals_total{shard_id="${shardId}"} 1`);
    expect(lines).toContain(`kcl_subscribe_to_shard_resource_in_use_total{shard_id="${shardId}"} 1`);
    expect(lines).toContain(`kcl_subscribe_to_shard_idle_restarts_total{shard_id="${shardId}"} 1`);
    expect(lines).toContain(`kcl_subscribe_to_shard_throttled_total{shard_id="${shardId}"} 1`);
    expect(lines).toContain(`kcl_subscribe_to_shard_failures_total{shard_id="${shardId}"} 1`);
    expect(text).toContain('# TYPE kcl_subscribe_to_shard_duration_seconds histogram');
    // No GetRecords series: fan-out did not call it.
    expect(lines.some((line) => line.startsWith('kcl_get_records'))).toBe(false);
  });

  it('honours the level: SUMMARY leaves DETAILED metrics out, NONE exposes nothing', async () => {
    const summaryRegistry = new Registry();
    const summary = new WorkerMetrics(
      createPrometheusMetricsSink({ registry: summaryRegistry, level: 'SUMMARY' }),
      'w',
    );
    summary.getRecords(30, 20);
    summary.renewed({ renewed: 1, lost: 0 }, 1, 5);
    const lines = await samples(summaryRegistry);
    expect(lines.some((line) => line.startsWith('kcl_get_records'))).toBe(false);
    expect(lines).toContain('kcl_current_leases{worker_id="w"} 1');

    const noneRegistry = new Registry();
    const none = createPrometheusMetricsSink({ registry: noneRegistry, level: 'NONE' });
    none.record(datum('CurrentLeases', 1, { Operation: 'RenewAllLeases', WorkerIdentifier: 'w' }));
    expect(await noneRegistry.metrics()).toBe('\n');
  });

  it('removes a shard gauge that was not updated within staleAfterMs when scraped', async () => {
    const registry = new Registry();
    const clock = new ManualClock();
    const sink = createPrometheusMetricsSink({ registry, clock, staleAfterMs: 60_000 });
    const lag = (shardId: string, value: number) =>
      sink.record(
        datum('MillisBehindLatest', value, { Operation: 'ProcessTask', ShardId: shardId }, 'Milliseconds'),
      );
    lag('shard-a', 100);
    lag('shard-b', 200);
    await clock.advance(30_000);
    lag('shard-b', 300);
    await clock.advance(30_001);
    const lines = await samples(registry);
    expect(lines).toEqual(['kcl_millis_behind_latest{shard_id="shard-b"} 300']);
    lag('shard-a', 50);
    expect(await samples(registry)).toContain('kcl_millis_behind_latest{shard_id="shard-a"} 50');
  });

  it('shares metrics between sinks on one registry, uses the prefix and maps unknown metrics generically', async () => {
    const registry = new Registry();
    const first = createPrometheusMetricsSink({ registry, prefix: 'orders_' });
    const second = createPrometheusMetricsSink({ registry, prefix: 'orders_' });
    first.record(datum('CurrentLeases', 1, { Operation: 'RenewAllLeases', WorkerIdentifier: 'w1' }));
    second.record(datum('CurrentLeases', 3, { Operation: 'RenewAllLeases', WorkerIdentifier: 'w2' }));
    first.record(
      datum(
        'RecordProcessor.initialize.Time',
        42,
        { Operation: 'InitializeTask', ShardId: 's-1' },
        'Milliseconds',
      ),
    );
    const lines = await samples(registry);
    expect(lines).toContain('orders_current_leases{worker_id="w1"} 1');
    expect(lines).toContain('orders_current_leases{worker_id="w2"} 3');
    expect(lines).toContain(
      'orders_record_processor_initialize_time{operation="InitializeTask",shard_id="s-1"} 42',
    );
  });

  it("registers on prom-client's global registry by default", async () => {
    const sink = createPrometheusMetricsSink();
    expect(sink.registry).toBe(register);
    sink.record(datum('NumWorkers', 5, { Operation: 'TakeLeases', WorkerIdentifier: 'w' }));
    expect(await register.metrics()).toContain('kcl_workers{worker_id="w"} 5');
  });

  it('reports every configuration problem at once', () => {
    let caught: unknown;
    try {
      createPrometheusMetricsSink({
        prefix: 'kcl-',
        level: 'ALL' as never,
        staleAfterMs: 0,
        buckets: [1, 0.5],
      });
    } catch (error) {
      caught = error;
    }
    expect(caught).toBeInstanceOf(ConfigurationError);
    expect((caught as ConfigurationError).problems).toEqual([
      'prefix "kcl-" is not a valid start of a Prometheus metric name ([a-zA-Z_:][a-zA-Z0-9_:]*)',
      'level must be one of NONE, SUMMARY, DETAILED, got "ALL"',
      'staleAfterMs must be an integer from 1 to ∞, got 0',
      'buckets must be a non-empty list of ascending finite numbers (seconds)',
    ]);
  });
});
