export type { BackoffOptions } from './backoff.js';
export { Backoff } from './backoff.js';
export type {
  ConsumerOptions,
  InitialPosition,
  KinesisClientSettings,
  ResolvedConsumerOptions,
  ResolvedRetrieval,
  RetrievalOptions,
} from './consumer-options.js';
export { CONSUMER_DEFAULTS, resolveConsumerOptions } from './consumer-options.js';
export type { Consumer, ConsumerState, ConsumerStatus, StopOptions } from './create-consumer.js';
export { createConsumer } from './create-consumer.js';
export type { KinesisErrorKind } from './kinesis/kinesis-errors.js';
export { classifyKinesisError } from './kinesis/kinesis-errors.js';
export type { StreamIdentity } from './kinesis/kinesis-stream.js';
export type { AggregatedRecord, DeaggregationResult, SubRecord } from './kinesis/kpl-deaggregation.js';
export { deaggregateRecords, decodeAggregatedRecord, KPL_MAGIC } from './kinesis/kpl-deaggregation.js';
export type { StreamConsumer, StreamConsumerOptions } from './kinesis/stream-consumer.js';
export { deregisterStreamConsumer, ensureStreamConsumer } from './kinesis/stream-consumer.js';
export type {
  CloudWatchMetricsClient,
  CloudWatchMetricsSink,
  CloudWatchMetricsSinkOptions,
  CloudWatchMetricsSinkStats,
} from './metrics/cloudwatch-metrics-sink.js';
export { createCloudWatchMetricsSink } from './metrics/cloudwatch-metrics-sink.js';
export type {
  MetricDatum,
  MetricsLevel,
  MetricsSink,
  MetricsSinkContext,
  MetricUnit,
} from './metrics/metrics-sink.js';
export { isMetricsLevelEnabled, METRICS_LEVELS } from './metrics/metrics-sink.js';
export type { LabelName, PrometheusMetricMapping } from './metrics/prometheus-metric-mapping.js';
export { PROMETHEUS_METRIC_MAPPING } from './metrics/prometheus-metric-mapping.js';
export type {
  PrometheusMetricsSink,
  PrometheusMetricsSinkOptions,
  PrometheusRegistry,
} from './metrics/prometheus-metrics-sink.js';
export { createPrometheusMetricsSink } from './metrics/prometheus-metrics-sink.js';
export type { PipelineProcessorFactory } from './pipeline/create-pipeline-processor-factory.js';
export { createPipelineProcessorFactory } from './pipeline/create-pipeline-processor-factory.js';
export type { PipelineMessage } from './pipeline/pipeline-message.js';
export type {
  BatchersOptions,
  BatchInfo,
  BatchTrigger,
  FailureAction,
  FailureContext,
  PipelineCheckpointOptions,
  PipelineContext,
  PipelineOptions,
  ProcessorsOptions,
  ResolvedPipelineOptions,
} from './pipeline/pipeline-options.js';
export { PIPELINE_DEFAULTS, pipelineCapacity, validatePipelineOptions } from './pipeline/pipeline-options.js';
export type { PipelineProcessor, PipelineRuntime } from './pipeline/pipeline-processor.js';
export type { ProcessSignalOptions } from './process-signals.js';
export { stopOnSignals } from './process-signals.js';
export type {
  Checkpointer,
  InitializeInput,
  KinesisRecord,
  LeaseLostInput,
  PreparedCheckpointer,
  ProcessingErrorAction,
  ProcessingErrorContext,
  ProcessingErrorHandler,
  ProcessorContext,
  ProcessRecordsInput,
  RecordProcessor,
  RecordProcessorFactory,
  ShardEndedInput,
  ShutdownRequestedInput,
  TransactionCheckpoint,
} from './processing/record-processor.js';
export type { ShardConsumerState } from './processing/shard-consumer.js';
export type { LeaseStatus } from './processing/shard-consumers.js';
export type {
  ConsumedStream,
  FormerStreamsStrategy,
  ResolvedMultiStream,
  ResolvedStreamConfig,
  StreamConfig,
  StreamTracker,
} from './streams/stream-options.js';
export { parseStreamIdentifier } from './streams/stream-options.js';
