import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { gunzipSync } from 'node:zlib';
import { CloudWatchClient } from '@aws-sdk/client-cloudwatch';
import { ConfigurationError, noopLogger } from '@kcl/core';
import { ManualClock } from '@kcl/testkit';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  type CloudWatchMetricsClient,
  createCloudWatchMetricsSink,
} from '../src/metrics/cloudwatch-metrics-sink.js';
import type { MetricDatum } from '../src/metrics/metrics-sink.js';
import { WorkerMetrics } from '../src/metrics/worker-metrics.js';
import { until } from './support/kinesis.js';

interface PutMetricDataBody {
  readonly Namespace: string;
  readonly MetricData: ReadonlyArray<{
    readonly MetricName: string;
    readonly Dimensions?: ReadonlyArray<{ readonly Name: string; readonly Value: string }>;
    readonly Timestamp: number;
    readonly StatisticValues: {
      readonly SampleCount: number;
      readonly Sum: number;
      readonly Minimum: number;
      readonly Maximum: number;
    };
    readonly Unit: string;
  }>;
}

interface RecordedRequest {
  readonly headers: IncomingHttpHeaders;
  readonly body: PutMetricDataBody;
}

type PlannedAnswer = { readonly status: number; readonly errorType?: string };

/** A stand-in for the CloudWatch endpoint: records PutMetricData requests and answers as planned. */
class RecordingCloudWatch {
  readonly requests: RecordedRequest[] = [];
  readonly planned: PlannedAnswer[] = [];
  #server: Server | null = null;

  async start(): Promise<string> {
    this.#server = createServer((request, response) => {
      const chunks: Buffer[] = [];
      request.on('data', (chunk: Buffer) => chunks.push(chunk));
      request.on('end', () => {
        let raw = Buffer.concat(chunks);
        if (request.headers['content-encoding'] === 'gzip') raw = gunzipSync(raw);
        this.requests.push({
          headers: request.headers,
          body: JSON.parse(raw.toString()) as PutMetricDataBody,
        });
        const answer = this.planned.shift() ?? { status: 200 };
        if (answer.status === 200) {
          response.writeHead(200, { 'content-type': 'application/x-amz-json-1.0' });
          response.end('{}');
          return;
        }
        response.writeHead(answer.status, {
          'content-type': 'application/x-amz-json-1.0',
          'x-amzn-query-error': `${answer.errorType};Sender`,
        });
        response.end(
          JSON.stringify({
            __type: `com.amazonaws.cloudwatch#${answer.errorType}`,
            message: 'planned failure',
          }),
        );
      });
    });
    await new Promise<void>((resolve) => this.#server?.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}`;
  }

  async stop(): Promise<void> {
    await new Promise<void>((resolve) => this.#server?.close(() => resolve()));
  }

  /** Every datum of every request, flattened. */
  data(): PutMetricDataBody['MetricData'][number][] {
    return this.requests.flatMap((request) => request.body.MetricData);
  }
}

const endpoint = new RecordingCloudWatch();
let client: CloudWatchClient;

beforeAll(async () => {
  const url = await endpoint.start();
  client = new CloudWatchClient({
    endpoint: url,
    region: 'us-east-1',
    credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
    // The sink does its own retrying on the injected clock.
    maxAttempts: 1,
  });
});
afterAll(async () => {
  client?.destroy();
  await endpoint.stop();
});
beforeEach(() => {
  endpoint.requests.length = 0;
  endpoint.planned.length = 0;
});

function datum(
  name: string,
  value: number,
  dimensions: Record<string, string>,
  level: MetricDatum['level'] = 'SUMMARY',
  unit: MetricDatum['unit'] = 'Count',
): MetricDatum {
  return { name, value, unit, dimensions, level };
}

describe('the CloudWatch metrics sink', () => {
  it('accepts a real CloudWatchClient as its client type', () => {
    const typed: CloudWatchMetricsClient = client;
    expect(typeof typed.send).toBe('function');
  });

  it('accumulates statistic sets per name and dimensions and publishes them every bufferTimeMs', async () => {
    const clock = new ManualClock();
    const sink = createCloudWatchMetricsSink({ client, namespace: 'billing', clock, logger: noopLogger });
    const startedAt = clock.now();
    const shardA = { Operation: 'ProcessTask', ShardId: 'shardId-000000000001' };
    const shardB = { ShardId: 'shardId-000000000002', Operation: 'ProcessTask' };
    for (const value of [100, 300, 200])
      sink.record(datum('MillisBehindLatest', value, shardA, 'SUMMARY', 'Milliseconds'));
    sink.record(datum('MillisBehindLatest', 50, shardB, 'SUMMARY', 'Milliseconds'));
    sink.record(datum('RecordsProcessed', 10, shardA));
    sink.record(datum('RecordsProcessed', 20, shardA));

    await clock.advance(9_999);
    expect(sink.stats()).toMatchObject({ flushes: 0, buffered: 3 });
    expect(endpoint.requests).toHaveLength(0);
    await clock.advance(1);
    expect(sink.stats().flushes).toBe(1);
    await until(
      () => endpoint.requests.length === 1 && sink.stats().publishedData === 3,
      10_000,
      'the publication',
    );

    const [request] = endpoint.requests;
    expect(request?.headers['x-amz-target']).toBe('GraniteServiceVersion20100801.PutMetricData');
    expect(request?.body.Namespace).toBe('billing');
    expect(request?.body.MetricData).toEqual([
      {
        MetricName: 'MillisBehindLatest',
        Dimensions: [
          { Name: 'Operation', Value: 'ProcessTask' },
          { Name: 'ShardId', Value: 'shardId-000000000001' },
        ],
        Timestamp: startedAt / 1_000,
        StatisticValues: { SampleCount: 3, Sum: 600, Minimum: 100, Maximum: 300 },
        Unit: 'Milliseconds',
      },
      {
        MetricName: 'MillisBehindLatest',
        Dimensions: [
          { Name: 'Operation', Value: 'ProcessTask' },
          { Name: 'ShardId', Value: 'shardId-000000000002' },
        ],
        Timestamp: startedAt / 1_000,
        StatisticValues: { SampleCount: 1, Sum: 50, Minimum: 50, Maximum: 50 },
        Unit: 'Milliseconds',
      },
      {
        MetricName: 'RecordsProcessed',
        Dimensions: [
          { Name: 'Operation', Value: 'ProcessTask' },
          { Name: 'ShardId', Value: 'shardId-000000000001' },
        ],
        Timestamp: startedAt / 1_000,
        StatisticValues: { SampleCount: 2, Sum: 30, Minimum: 10, Maximum: 20 },
        Unit: 'Count',
      },
    ]);

    // The timer runs only while data wait: nothing recorded, nothing scheduled.
    expect(clock.pendingSleeps).toBe(0);
    sink.record(datum('RecordsProcessed', 5, shardA));
    await clock.advance(10_000);
    await until(() => endpoint.requests.length === 2, 10_000, 'the second publication');
    expect(endpoint.requests[1]?.body.MetricData[0]?.StatisticValues).toEqual({
      SampleCount: 1,
      Sum: 5,
      Minimum: 5,
      Maximum: 5,
    });
    await sink.close();
  });

  it('publishes in requests of at most 20 data, as the Java KCL does', async () => {
    const sink = createCloudWatchMetricsSink({ client, namespace: 'billing', clock: new ManualClock() });
    for (let index = 0; index < 45; index++) {
      sink.record(
        datum('RecordsProcessed', index, { Operation: 'ProcessTask', ShardId: `shardId-${index}` }),
      );
    }
    await sink.flush();
    expect(endpoint.requests.map((request) => request.body.MetricData.length)).toEqual([20, 20, 5]);
    expect(new Set(endpoint.data().map((data) => data.Dimensions?.[1]?.Value)).size).toBe(45);
    expect(sink.stats()).toMatchObject({ publishedData: 45, requests: 3, droppedData: 0 });
  });

  it('publishes early once flushSize distinct data wait', async () => {
    const clock = new ManualClock();
    const sink = createCloudWatchMetricsSink({ client, namespace: 'billing', clock, flushSize: 5 });
    for (let index = 0; index < 4; index++)
      sink.record(datum('RecordsProcessed', 1, { ShardId: `s-${index}` }));
    expect(sink.stats().flushes).toBe(0);
    sink.record(datum('RecordsProcessed', 1, { ShardId: 's-4' }));
    await until(() => endpoint.requests.length === 1, 10_000, 'the early publication');
    expect(endpoint.requests[0]?.body.MetricData).toHaveLength(5);
    await sink.close();
  });

  it('honours the level: SUMMARY drops DETAILED metrics, NONE publishes nothing', async () => {
    const summary = createCloudWatchMetricsSink({
      client,
      namespace: 'billing',
      level: 'SUMMARY',
      clock: new ManualClock(),
    });
    summary.record(datum('MillisBehindLatest', 1, { Operation: 'ApplicationTracker' }, 'SUMMARY'));
    summary.record(datum('KinesisDataFetcher.getRecords.Time', 12, { Operation: 'ProcessTask' }, 'DETAILED'));
    await summary.flush();
    expect(endpoint.data().map((data) => data.MetricName)).toEqual(['MillisBehindLatest']);

    const none = createCloudWatchMetricsSink({
      client,
      namespace: 'billing',
      level: 'NONE',
      clock: new ManualClock(),
    });
    none.record(datum('MillisBehindLatest', 1, { Operation: 'ApplicationTracker' }, 'SUMMARY'));
    await none.flush();
    expect(endpoint.requests).toHaveLength(1);
    expect(none.stats().buffered).toBe(0);
  });

  it('takes the namespace from the consumer it is attached to, and drops data while it has none', async () => {
    const clock = new ManualClock();
    const unattached = createCloudWatchMetricsSink({ client, clock });
    unattached.record(datum('NumWorkers', 2, { Operation: 'TakeLeases' }));
    await unattached.flush();
    expect(endpoint.requests).toHaveLength(0);
    expect(unattached.stats().droppedData).toBe(1);

    const sink = createCloudWatchMetricsSink({ client });
    sink.attach?.({ applicationName: 'orders-app', workerId: 'worker-1', clock, logger: noopLogger });
    sink.record(datum('NumWorkers', 2, { Operation: 'TakeLeases' }));
    // The attached consumer's clock drives the timer.
    await clock.advance(10_000);
    await until(() => endpoint.requests.length === 1, 10_000, 'the publication');
    expect(endpoint.requests[0]?.body.Namespace).toBe('orders-app');
  });

  it('retries a throttled request with backoff on the clock, and drops a request CloudWatch rejects', async () => {
    const clock = new ManualClock();
    const sink = createCloudWatchMetricsSink({
      client,
      namespace: 'billing',
      clock,
      random: () => 0.5,
      retry: { initialMs: 1_000, maxMs: 4_000 },
    });
    endpoint.planned.push({ status: 400, errorType: 'Throttling' }, { status: 400, errorType: 'Throttling' });
    sink.record(datum('CurrentLeases', 3, { Operation: 'RenewAllLeases', WorkerIdentifier: 'worker-1' }));
    const flushed = sink.flush();
    await until(() => sink.stats().failedRequests === 1, 10_000, 'the first throttled request');
    await clock.waitForSleepers(1);
    // Backoff with random 0.5: 750 ms, then 1 500 ms.
    await clock.advance(749);
    expect(endpoint.requests).toHaveLength(1);
    await clock.advance(1);
    await until(() => sink.stats().failedRequests === 2, 10_000, 'the second throttled request');
    await clock.waitForSleepers(1);
    await clock.advance(1_500);
    await flushed;
    expect(endpoint.requests).toHaveLength(3);
    expect(sink.stats()).toMatchObject({ requests: 3, failedRequests: 2, publishedData: 1, droppedData: 0 });

    endpoint.planned.push({ status: 400, errorType: 'InvalidParameterValue' });
    sink.record(datum('CurrentLeases', 3, { Operation: 'RenewAllLeases', WorkerIdentifier: 'worker-1' }));
    await sink.flush();
    expect(endpoint.requests).toHaveLength(4);
    expect(sink.stats()).toMatchObject({ requests: 4, failedRequests: 3, publishedData: 1, droppedData: 1 });
  });

  it('gives up after maxAttempts and counts the data as dropped', async () => {
    const clock = new ManualClock();
    const sink = createCloudWatchMetricsSink({
      client,
      namespace: 'billing',
      clock,
      maxAttempts: 2,
      retry: { initialMs: 10, maxMs: 10 },
    });
    endpoint.planned.push({ status: 400, errorType: 'Throttling' }, { status: 400, errorType: 'Throttling' });
    sink.record(datum('LostLeases', 1, { Operation: 'RenewAllLeases' }));
    const flushed = sink.flush();
    await until(() => sink.stats().failedRequests === 1, 10_000, 'the first attempt');
    await clock.waitForSleepers(1);
    await clock.advance(10);
    await flushed;
    expect(sink.stats()).toMatchObject({ requests: 2, failedRequests: 2, droppedData: 1, publishedData: 0 });
  });

  it('drops and counts new data when the queue is full, while known ones still accumulate', async () => {
    const sink = createCloudWatchMetricsSink({
      client,
      namespace: 'billing',
      maxQueueSize: 3,
      clock: new ManualClock(),
    });
    for (let index = 0; index < 5; index++)
      sink.record(datum('RecordsProcessed', 1, { ShardId: `s-${index}` }));
    sink.record(datum('RecordsProcessed', 1, { ShardId: 's-0' }));
    sink.record(datum('RecordsProcessed', Number.NaN, { ShardId: 's-0' }));
    expect(sink.stats()).toMatchObject({ buffered: 3, droppedData: 3 });
    await sink.flush();
    expect(
      endpoint.data().map((data) => [data.Dimensions?.[0]?.Value, data.StatisticValues.SampleCount]),
    ).toEqual([
      ['s-0', 2],
      ['s-1', 1],
      ['s-2', 1],
    ]);
  });

  it('publishes what is left on close, stops its timer and ignores later data', async () => {
    const clock = new ManualClock();
    const sink = createCloudWatchMetricsSink({ client, namespace: 'billing', clock });
    sink.record(datum('TakenLeases', 1, { Operation: 'TakeLeases' }));
    expect(clock.pendingSleeps).toBe(1);
    await sink.close();
    expect(endpoint.requests).toHaveLength(1);
    expect(clock.pendingSleeps).toBe(0);
    sink.record(datum('TakenLeases', 1, { Operation: 'TakeLeases' }));
    await sink.flush();
    expect(endpoint.requests).toHaveLength(1);
  });

  it('publishes the worker metrics under the Java KCL names and dimensions', async () => {
    const sink = createCloudWatchMetricsSink({ client, namespace: 'billing', clock: new ManualClock() });
    const metrics = new WorkerMetrics(sink, 'worker-1');
    metrics.batch({
      shardId: 'shardId-000000000003',
      records: 7,
      bytes: 700,
      millisBehindLatest: 2_500,
      processingMs: 12,
    });
    metrics.batch({
      shardId: 'shardId-000000000003',
      records: 3,
      bytes: 300,
      millisBehindLatest: 500,
      processingMs: 8,
    });
    metrics.renewed({ renewed: 2, lost: 1 }, 2, 15);
    metrics.leaseTaken();
    metrics.rebalanced({
      totalLeases: 4,
      numWorkers: 2,
      expiredLeases: 1,
      neededLeases: 1,
      leasesToTake: 1,
      target: 2,
    });
    metrics.event({ type: 'iterator-expired', workerId: 'worker-1', leaseKey: 'shardId-000000000003' });
    await metrics.flush();

    const published = new Map(
      endpoint
        .data()
        .map((data) => [
          `${data.MetricName} ${(data.Dimensions ?? []).map((dimension) => `${dimension.Name}=${dimension.Value}`).join(',')}`,
          { ...data.StatisticValues, unit: data.Unit },
        ]),
    );
    const shard = 'Operation=ProcessTask,ShardId=shardId-000000000003';
    const worker = (operation: string) => `Operation=${operation},WorkerIdentifier=worker-1`;
    expect(published.get(`MillisBehindLatest ${shard}`)).toEqual({
      SampleCount: 2,
      Sum: 3_000,
      Minimum: 500,
      Maximum: 2_500,
      unit: 'Milliseconds',
    });
    expect(published.get('MillisBehindLatest Operation=ApplicationTracker')).toMatchObject({
      Maximum: 2_500,
    });
    expect(published.get(`RecordsProcessed ${shard}`)).toMatchObject({ Sum: 10, unit: 'Count' });
    expect(published.get(`DataBytesProcessed ${shard}`)).toMatchObject({ Sum: 1_000, unit: 'Bytes' });
    expect(published.get(`ExpiredIterator ${shard}`)).toMatchObject({ Sum: 1 });
    expect(published.get(`CurrentLeases ${worker('RenewAllLeases')}`)).toMatchObject({ Sum: 2 });
    expect(published.get(`LostLeases ${worker('RenewAllLeases')}`)).toMatchObject({ Sum: 1 });
    expect(published.get(`TakenLeases ${worker('TakeLeases')}`)).toMatchObject({ Sum: 1 });
    expect(published.get(`NumWorkers ${worker('TakeLeases')}`)).toMatchObject({ Sum: 2 });
    expect(published.get(`TotalLeases ${worker('TakeLeases')}`)).toMatchObject({ Sum: 4 });
  });

  it('reports every configuration problem at once', () => {
    let caught: unknown;
    try {
      createCloudWatchMetricsSink({
        client: {} as CloudWatchMetricsClient,
        namespace: 'AWS/Kinesis',
        level: 'VERBOSE' as never,
        bufferTimeMs: 0,
        maxBatchSize: 1_001,
      });
    } catch (error) {
      caught = error;
    }
    expect(caught).toBeInstanceOf(ConfigurationError);
    expect((caught as ConfigurationError).problems).toEqual([
      'client must be a CloudWatchClient from @aws-sdk/client-cloudwatch (an object with send)',
      'namespace "AWS/Kinesis" starts with AWS/, which is reserved for AWS services',
      'level must be one of NONE, SUMMARY, DETAILED, got "VERBOSE"',
      'bufferTimeMs must be an integer from 1 to ∞, got 0',
      'maxBatchSize must be an integer from 1 to 1000, got 1001',
    ]);
  });
});
