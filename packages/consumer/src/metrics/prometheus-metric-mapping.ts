/**
 * How the consumer's metrics (Java KCL names and dimensions) appear in Prometheus: names, types,
 * help texts and labels. The table is data; `createPrometheusMetricsSink` reads it.
 */

/** The Prometheus labels kcl metrics carry. */
export type LabelName = 'shard_id' | 'stream_id' | 'worker_id' | 'operation';

/** How a Java KCL metric appears in Prometheus (name without the prefix). */
export interface PrometheusMetricMapping {
  readonly type: 'gauge' | 'counter' | 'histogram';
  readonly name: string;
  readonly help: string;
  readonly labels: readonly LabelName[];
}

/** The metric dimension each label is read from. */
export const LABEL_DIMENSIONS: Readonly<Record<LabelName, string>> = {
  shard_id: 'ShardId',
  /** Several streams: the stream identifier (the Java KCL's StreamId dimension). */
  stream_id: 'StreamId',
  worker_id: 'WorkerIdentifier',
  operation: 'Operation',
};

/**
 * Java KCL metrics (keyed `<Operation>/<MetricName>`) and their Prometheus names. `null`: not exported
 * (the application-wide `MillisBehindLatest` is `max(kcl_millis_behind_latest)` in PromQL). Metrics
 * not listed become a gauge named after them, labelled with operation, shard_id and worker_id.
 */
export const PROMETHEUS_METRIC_MAPPING: Readonly<Record<string, PrometheusMetricMapping | null>> = {
  'ProcessTask/MillisBehindLatest': {
    type: 'gauge',
    name: 'millis_behind_latest',
    help: 'How far the last batch read from the shard is behind its newest record, in milliseconds (Java MillisBehindLatest)',
    labels: ['shard_id', 'stream_id'],
  },
  'ApplicationTracker/MillisBehindLatest': null,
  'ProcessTask/RecordsProcessed': {
    type: 'counter',
    name: 'records_processed_total',
    help: 'Records delivered to the processor (Java RecordsProcessed)',
    labels: ['shard_id', 'stream_id'],
  },
  'ProcessTask/DataBytesProcessed': {
    type: 'counter',
    name: 'data_bytes_processed_total',
    help: 'Bytes of record data delivered to the processor (Java DataBytesProcessed)',
    labels: ['shard_id', 'stream_id'],
  },
  'ProcessTask/RecordProcessor.processRecords.Time': {
    type: 'histogram',
    name: 'process_records_duration_seconds',
    help: 'Time spent in processRecords per batch (Java RecordProcessor.processRecords.Time)',
    labels: [],
  },
  'ProcessTask/ExpiredIterator': {
    type: 'counter',
    name: 'expired_iterators_total',
    help: 'Shard iterators that expired and were renewed (Java ExpiredIterator)',
    labels: ['shard_id', 'stream_id'],
  },
  'ProcessTask/UpdateLease.Success': {
    type: 'counter',
    name: 'checkpoints_total',
    help: 'Checkpoints written (Java UpdateLease.Success)',
    labels: ['shard_id', 'stream_id'],
  },
  'ProcessTask/KinesisDataFetcher.getRecords.Time': {
    type: 'histogram',
    name: 'get_records_duration_seconds',
    help: 'GetRecords latency (Java KinesisDataFetcher.getRecords.Time)',
    labels: [],
  },
  'ProcessTask/KinesisDataFetcher.getRecords.Success': {
    type: 'counter',
    name: 'get_records_total',
    help: 'Successful GetRecords calls (Java KinesisDataFetcher.getRecords.Success)',
    labels: [],
  },
  'ProcessTask/SubscribeToShard.Success': {
    type: 'counter',
    name: 'subscribe_to_shard_total',
    help: 'Fan-out subscriptions started: SubscribeToShard calls answered, renewals included (kcl; the Java KCL reports no fan-out metrics)',
    labels: ['shard_id', 'stream_id'],
  },
  'ProcessTask/SubscribeToShard.Time': {
    type: 'histogram',
    name: 'subscribe_to_shard_duration_seconds',
    help: 'Time until a SubscribeToShard call was answered (kcl)',
    labels: [],
  },
  'ProcessTask/SubscribeToShard.Events': {
    type: 'counter',
    name: 'subscribe_to_shard_events_total',
    help: 'Events fan-out subscriptions delivered, empty heartbeats included (kcl)',
    labels: ['shard_id', 'stream_id'],
  },
  'ProcessTask/SubscribeToShard.Renewed': {
    type: 'counter',
    name: 'subscribe_to_shard_renewals_total',
    help: 'Subscriptions ended after subscriptionLifetimeMs to be renewed from their last position (kcl)',
    labels: ['shard_id', 'stream_id'],
  },
  'ProcessTask/SubscribeToShard.IdleRestart': {
    type: 'counter',
    name: 'subscribe_to_shard_idle_restarts_total',
    help: 'Subscriptions started again after delivering nothing for idleTimeoutMs (kcl)',
    labels: ['shard_id', 'stream_id'],
  },
  'ProcessTask/SubscribeToShard.ResourceInUse': {
    type: 'counter',
    name: 'subscribe_to_shard_resource_in_use_total',
    help: 'Subscriptions refused because another one of the consumer and shard was still active, then waited out (kcl)',
    labels: ['shard_id', 'stream_id'],
  },
  'ProcessTask/SubscribeToShard.Throttled': {
    type: 'counter',
    name: 'subscribe_to_shard_throttled_total',
    help: 'SubscribeToShard calls throttled, then retried with backoff (kcl)',
    labels: ['shard_id', 'stream_id'],
  },
  'ProcessTask/SubscribeToShard.Failure': {
    type: 'counter',
    name: 'subscribe_to_shard_failures_total',
    help: 'Subscriptions that failed or broke off (network, 5xx, a rejected position), then started again with backoff (kcl)',
    labels: ['shard_id', 'stream_id'],
  },
  'RenewAllLeases/CurrentLeases': {
    type: 'gauge',
    name: 'current_leases',
    help: 'Leases this worker holds (Java CurrentLeases)',
    labels: ['worker_id'],
  },
  'LeaseCleanup/GarbageLeasesDeleted': {
    type: 'counter',
    name: 'garbage_leases_deleted_total',
    help: 'Leases of shards that no longer exist (a deleted stream, say), deleted by the cleanup',
    labels: [],
  },
  'MultiStreamTracker/ActiveStreams.Count': {
    type: 'gauge',
    name: 'active_streams',
    help: 'Streams the stream list names (several streams; Java ActiveStreams.Count)',
    labels: [],
  },
  'MultiStreamTracker/StreamsPendingDeletion.Count': {
    type: 'gauge',
    name: 'streams_pending_deletion',
    help: 'Streams no longer listed whose leases are still read until they are deleted (Java StreamsPendingDeletion.Count)',
    labels: [],
  },
  'MultiStreamTracker/DeletedStreams.Count': {
    type: 'counter',
    name: 'deleted_streams_total',
    help: 'Former or deleted streams whose leases this worker deleted (Java DeletedStreams.Count)',
    labels: [],
  },
  'RenewAllLeases/LostLeases': {
    type: 'counter',
    name: 'lost_leases_total',
    help: 'Leases this worker lost without releasing them (Java LostLeases)',
    labels: ['worker_id'],
  },
  'RenewAllLeases/Time': {
    type: 'histogram',
    name: 'renew_leases_duration_seconds',
    help: 'Time to renew all held leases (Java RenewAllLeases Time)',
    labels: ['worker_id'],
  },
  'RenewAllLeases/Success': {
    type: 'counter',
    name: 'lease_renewal_rounds_total',
    help: 'Completed lease renewal rounds (Java RenewAllLeases Success)',
    labels: ['worker_id'],
  },
  'TakeLeases/NumWorkers': {
    type: 'gauge',
    name: 'workers',
    help: 'Live workers of the application seen by this worker (Java NumWorkers)',
    labels: ['worker_id'],
  },
  'TakeLeases/ExpiredLeases': {
    type: 'gauge',
    name: 'expired_leases',
    help: 'Leases seen expired at the last rebalance (Java ExpiredLeases)',
    labels: ['worker_id'],
  },
  'TakeLeases/TakenLeases': {
    type: 'counter',
    name: 'taken_leases_total',
    help: 'Leases this worker took (Java TakenLeases)',
    labels: ['worker_id'],
  },
  'TakeLeases/TotalLeases': {
    type: 'gauge',
    name: 'total_leases',
    help: 'Unfinished leases of the application at the last rebalance (Java TotalLeases)',
    labels: ['worker_id'],
  },
  'TakeLeases/NeededLeases': {
    type: 'gauge',
    name: 'needed_leases',
    help: 'Leases this worker lacked to reach its target at the last rebalance (Java NeededLeases)',
    labels: ['worker_id'],
  },
  'TakeLeases/LeasesToTake': {
    type: 'gauge',
    name: 'leases_to_take',
    help: 'Leases chosen to take at the last rebalance (Java LeasesToTake)',
    labels: ['worker_id'],
  },
};

/** `RecordProcessor.initialize.Time` → `record_processor_initialize_time`. */
export function genericMapping(metricName: string): PrometheusMetricMapping {
  const name = metricName
    .replace(/([a-z0-9])([A-Z])/g, '$1_$2')
    .replace(/[^a-zA-Z0-9]+/g, '_')
    .replace(/^_+|_+$/g, '')
    .toLowerCase();
  return {
    type: 'gauge',
    name: name === '' ? 'unnamed' : name,
    help: `Last value of the KCL metric ${metricName}`,
    labels: ['operation', 'shard_id', 'stream_id', 'worker_id'],
  };
}
