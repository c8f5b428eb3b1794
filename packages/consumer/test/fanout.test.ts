import { DescribeStreamConsumerCommand, DescribeStreamSummaryCommand } from '@aws-sdk/client-kinesis';
import { type KclEvent, systemClock } from '@kcl/core';
import { createMemoryLeaseStore, FLEET_TIMINGS, MemoryLeaseTable } from '@kcl/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type ConsumerOptions,
  createConsumer,
  deregisterStreamConsumer,
  ensureStreamConsumer,
  type KinesisRecord,
  type MetricDatum,
  type RecordProcessor,
} from '../src/index.js';
import { KinesisStream } from '../src/kinesis/kinesis-stream.js';
import type { FetchedBatch } from '../src/kinesis/record-fetcher.js';
import { ShardSubscriber, type SubscriptionIssue } from '../src/kinesis/shard-subscriber.js';
import {
  createStream,
  indexOf,
  type LocalKinesis,
  openShards,
  putRecords,
  records,
  splitShard,
  startLocalKinesis,
  until,
} from './support/kinesis.js';

// Enhanced fan-out against kinesis-local: registration, subscriptions renewed across their lifetime
// (short here), and consumers in fan-out mode through a split. kinesis-local sends an event about
// every second, and never ends a closed shard's subscription (the rest is read by GetRecords).

let kinesis: LocalKinesis;
beforeAll(async () => {
  kinesis = await startLocalKinesis();
});
afterAll(async () => {
  await kinesis?.stop();
});

let streams = 0;
async function newStream(shards: number): Promise<string> {
  streams += 1;
  const name = `fanout-${streams}`;
  await createStream(kinesis.client, name, shards);
  return name;
}

const text = (record: { readonly data: Uint8Array }): string => Buffer.from(record.data).toString();

describe('stream consumer registration', () => {
  it('registers a consumer, waits until it is ACTIVE, reuses it, and deregisters it', async () => {
    const streamName = await newStream(1);
    const progress: string[] = [];
    const options = {
      kinesis: kinesis.client,
      stream: { streamName },
      consumerName: 'registration',
      onProgress: (status: string) => progress.push(status),
    };
    // Two workers starting at once: one registers, the other finds the name taken and waits for it.
    const [first, second] = await Promise.all([ensureStreamConsumer(options), ensureStreamConsumer(options)]);
    expect(first.consumerArn).toBe(second.consumerArn);
    expect(first.consumerArn).toMatch(/consumer\/registration:/);
    const described = await kinesis.client.send(
      new DescribeStreamConsumerCommand({ StreamARN: first.streamArn, ConsumerName: 'registration' }),
    );
    expect(described.ConsumerDescription?.ConsumerStatus).toBe('ACTIVE');
    expect(progress.length).toBeGreaterThan(0);
    // Already ACTIVE: used at once, without waiting.
    const waits: string[] = [];
    await ensureStreamConsumer({ ...options, onProgress: (status) => waits.push(status) });
    expect(waits).toEqual([]);
    expect(await deregisterStreamConsumer(options)).toBe(true);
    await until(
      async () =>
        !(await kinesis.client
          .send(
            new DescribeStreamConsumerCommand({ StreamARN: first.streamArn, ConsumerName: 'registration' }),
          )
          .then(() => true)
          .catch(() => false)),
      10_000,
      'the consumer gone',
    );
    expect(await deregisterStreamConsumer(options)).toBe(false);
  });

  it('says which consumer did not become ACTIVE in time', async () => {
    const streamName = await newStream(1);
    const summary = await kinesis.client.send(new DescribeStreamSummaryCommand({ StreamName: streamName }));
    await expect(
      ensureStreamConsumer({
        kinesis: kinesis.client,
        stream: { streamArn: summary.StreamDescriptionSummary?.StreamARN ?? '' },
        consumerName: 'too-slow',
        timeoutMs: 1,
      }),
    ).rejects.toThrow(/'too-slow'.*did not become ACTIVE within 1 ms/);
  });
});

describe('a shard subscription', () => {
  it('delivers every record once, in order, across renewed subscriptions, one event at a time', async () => {
    const streamName = await newStream(1);
    const registered = await ensureStreamConsumer({
      kinesis: kinesis.client,
      stream: { streamName },
      consumerName: 'renewals',
    });
    const [shard] = await openShards(kinesis.client, streamName);
    const stream = new KinesisStream(
      kinesis.newClient(),
      { streamName },
      { clock: systemClock, random: Math.random },
    );
    const issues: SubscriptionIssue[] = [];
    const subscriber = new ShardSubscriber({
      stream,
      consumerArn: registered.consumerArn,
      shardId: shard?.ShardId ?? '',
      start: { type: 'TRIM_HORIZON' },
      clock: systemClock,
      random: Math.random,
      backoff: { initialMs: 50, maxMs: 500 },
      subscriptionLifetimeMs: 1_500,
      idleTimeoutMs: 10_000,
      closedShardCheckIntervalMs: 60_000,
      polling: { maxRecords: 100, pollIntervalMs: 50 },
      onIssue: (issue) => issues.push(issue),
    });
    subscriber.start();
    const seen: string[] = [];
    let producing = true;
    let written = 0;
    const producer = (async () => {
      while (producing) {
        await putRecords(kinesis.client, streamName, records('s', 20, 4, written));
        written += 20;
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    })();
    const reader = (async () => {
      for (;;) {
        const batch: FetchedBatch | null = await subscriber.next();
        if (batch === null) return;
        seen.push(...batch.records.map((record) => text({ data: record.Data ?? new Uint8Array() })));
      }
    })();
    await until(
      () => issues.filter((issue) => issue.kind === 'renewed').length >= 3,
      20_000,
      'three renewals',
    );
    producing = false;
    await producer;
    await until(() => seen.length >= written, 20_000, 'every record');
    await subscriber.stop();
    await reader;
    expect(seen).toHaveLength(written);
    expect(seen.map(indexOf)).toEqual(Array.from({ length: written }, (_, index) => index));
  });
});

describe('consumers in fan-out mode', () => {
  const fast = FLEET_TIMINGS.fast;

  /** Every Kinesis command the consumers sent, by name. */
  const commands: string[] = [];
  const countingClient = () => {
    const client = kinesis.newClient();
    client.middlewareStack.add(
      (next, context) => (args) => {
        commands.push(String(context.commandName));
        return next(args);
      },
      { step: 'initialize' },
    );
    return client;
  };

  function consumerOf(
    streamName: string,
    applicationName: string,
    table: MemoryLeaseTable,
    seen: Array<{ readonly shardId: string; readonly data: string }>,
    events: KclEvent[],
    overrides: Partial<ConsumerOptions> = {},
  ) {
    return createConsumer({
      streamName,
      applicationName,
      kinesis: countingClient(),
      leaseStore: createMemoryLeaseStore({ applicationName, table }),
      initialPosition: 'TRIM_HORIZON',
      retrieval: { mode: 'fanout', subscriptionLifetimeMs: 2_000, closedShardCheckIntervalMs: 500 },
      ...fast,
      onEvent: (event) => events.push(event),
      processor: (shardId): RecordProcessor => ({
        async processRecords({ records: batch, checkpointer }) {
          seen.push(...batch.map((record: KinesisRecord) => ({ shardId, data: text(record) })));
          await checkpointer.checkpoint();
        },
        async shardEnded({ checkpointer }) {
          await checkpointer.checkpoint();
        },
      }),
      ...overrides,
    });
  }

  it('reads every shard through a split in order, and a restart replays nothing', async () => {
    const streamName = await newStream(2);
    const table = new MemoryLeaseTable();
    const seen: Array<{ shardId: string; data: string }> = [];
    const events: KclEvent[] = [];
    const metrics: MetricDatum[] = [];
    const sink = { metrics: { record: (datum: MetricDatum) => metrics.push(datum) } };
    await putRecords(kinesis.client, streamName, records('f', 200, 10));
    const first = consumerOf(streamName, 'fanout-app', table, seen, events, sink);
    await first.start();
    await until(() => seen.length >= 200, 20_000, 'the first records');
    const [parent] = await openShards(kinesis.client, streamName);
    await splitShard(kinesis.client, streamName, parent?.ShardId ?? '');
    await putRecords(kinesis.client, streamName, records('f', 200, 10, 200));
    await until(
      () => new Set(seen.map((entry) => entry.data)).size >= 400,
      30_000,
      'records after the split',
    );
    await until(
      () => events.some((event) => event.type === 'shard-ended'),
      20_000,
      'the parent ended (closed shard read to its end)',
    );
    await first.stop();
    // A restart in fan-out mode starts at the checkpoints: nothing again.
    const before = seen.length;
    await putRecords(kinesis.client, streamName, records('f', 100, 10, 400));
    const second = consumerOf(streamName, 'fanout-app', table, seen, events, sink);
    await second.start();
    await until(() => seen.length >= before + 100, 20_000, 'the records after the restart');
    // A subscription that outlives subscriptionLifetimeMs is renewed at its next event (on a loaded
    // machine the ones above may all have ended otherwise first).
    await until(
      () => metrics.some((datum) => datum.name === 'SubscribeToShard.Renewed'),
      20_000,
      'a subscription renewed after its lifetime',
    );
    await second.stop();

    // Read by subscriptions; GetRecords only for the closed parent's rest (kinesis-local never ends
    // a closed shard's subscription).
    const count = (name: string) => commands.filter((command) => command === name).length;
    expect(count('RegisterStreamConsumerCommand')).toBe(1);
    expect(count('SubscribeToShardCommand')).toBeGreaterThanOrEqual(4);
    expect(count('GetRecordsCommand')).toBeLessThan(count('SubscribeToShardCommand'));
    // Metrics follow the calls made: subscriptions and their events, GetRecords only for the calls
    // that read the parent's rest (not one per event).
    const reported = (name: string) => metrics.filter((datum) => datum.name === name).length;
    expect(reported('SubscribeToShard.Success')).toBeGreaterThanOrEqual(4);
    expect(reported('SubscribeToShard.Success')).toBeLessThanOrEqual(count('SubscribeToShardCommand'));
    expect(reported('SubscribeToShard.Events')).toBeGreaterThan(reported('SubscribeToShard.Success'));
    expect(reported('SubscribeToShard.Renewed')).toBeGreaterThan(0);
    expect(reported('KinesisDataFetcher.getRecords.Success')).toBeGreaterThan(0);
    expect(reported('KinesisDataFetcher.getRecords.Success')).toBeLessThanOrEqual(count('GetRecordsCommand'));
    expect(
      metrics
        .filter((datum) => datum.name.startsWith('SubscribeToShard.'))
        .every((datum) => datum.dimensions.ShardId?.startsWith('shardId-')),
    ).toBe(true);
    const data = seen.map((entry) => entry.data);
    expect(new Set(data).size).toBe(500);
    expect(data).toHaveLength(500);
    // In order per partition key (a key stays on one shard, and a child follows its parent).
    const byKey = new Map<string, number[]>();
    for (const entry of data) {
      const index = indexOf(entry);
      const key = String(index % 10);
      byKey.set(key, [...(byKey.get(key) ?? []), index]);
    }
    for (const indexes of byKey.values()) expect(indexes).toEqual([...indexes].sort((a, b) => a - b));
  });

  it('refuses a consumer name Kinesis would refuse, naming the option', () => {
    expect(() =>
      consumerOf('any', 'app', new MemoryLeaseTable(), [], [], {
        retrieval: { mode: 'fanout', consumerName: 'no spaces allowed' },
      }),
    ).toThrow(/retrieval\.consumerName must be 1–128 letters/);
  });

  it('registers the stream consumer again when it was deregistered under a running consumer', async () => {
    const streamName = await newStream(1);
    const table = new MemoryLeaseTable();
    const seen: Array<{ shardId: string; data: string }> = [];
    const events: KclEvent[] = [];
    // kinesis-local keeps serving a deregistered consumer's subscriptions; AWS answers
    // ResourceNotFound, as this client does for the ARNs deregistered here.
    const deregistered = new Set<string>();
    const client = kinesis.newClient();
    client.middlewareStack.add(
      (next, context) => async (args) => {
        const input = args.input as { ConsumerARN?: string };
        if (context.commandName === 'SubscribeToShardCommand' && deregistered.has(input.ConsumerARN ?? '')) {
          const error = new Error(`Consumer ${input.ConsumerARN} not found`);
          error.name = 'ResourceNotFoundException';
          throw error;
        }
        return next(args);
      },
      { step: 'initialize' },
    );
    const consumer = consumerOf(streamName, 'reregistered', table, seen, events, {
      kinesis: client,
      retrieval: { mode: 'fanout', subscriptionLifetimeMs: 2_000 },
    });
    await consumer.start();
    const before = await ensureStreamConsumer({
      kinesis: kinesis.client,
      stream: { streamName },
      consumerName: 'reregistered',
    });
    await putRecords(kinesis.client, streamName, records('d', 50, 5));
    await until(() => seen.length >= 50, 20_000, 'the first records');
    expect(
      await deregisterStreamConsumer({
        kinesis: kinesis.client,
        stream: { streamName },
        consumerName: 'reregistered',
      }),
    ).toBe(true);
    deregistered.add(before.consumerArn);
    const summary = await kinesis.client.send(new DescribeStreamSummaryCommand({ StreamName: streamName }));
    const describe = () =>
      kinesis.client
        .send(
          new DescribeStreamConsumerCommand({
            StreamARN: summary.StreamDescriptionSummary?.StreamARN,
            ConsumerName: 'reregistered',
          }),
        )
        .then((output) => output.ConsumerDescription)
        .catch(() => undefined);
    // The next subscription (at the latest after its 2 s lifetime) finds it gone and registers it again.
    await until(
      async () => (await describe())?.ConsumerStatus === 'ACTIVE',
      20_000,
      'the consumer registered again',
    );
    await putRecords(kinesis.client, streamName, records('d', 50, 5, 50));
    await until(() => new Set(seen.map((entry) => entry.data)).size >= 100, 40_000, 'the records after it');
    await consumer.stop();
    expect((await describe())?.ConsumerARN).not.toBe(before.consumerArn);
    expect(seen.map((entry) => indexOf(entry.data))).toEqual(
      Array.from({ length: 100 }, (_, index) => index),
    );
  });

  it('refuses to start with a consumerArn of another stream', async () => {
    const [reading, other] = [await newStream(1), await newStream(1)];
    const registered = await ensureStreamConsumer({
      kinesis: kinesis.client,
      stream: { streamName: other },
      consumerName: 'elsewhere',
    });
    const consumer = consumerOf(reading, 'mismatch', new MemoryLeaseTable(), [], [], {
      retrieval: { mode: 'fanout', consumerArn: registered.consumerArn },
    });
    await expect(consumer.start()).rejects.toThrow(/is a consumer of .*fanout-\d+, not of/);
  });

  it('asks for a retrieval mode, and keeps fan-out settings out of polling', () => {
    expect(() =>
      consumerOf('any', 'app', new MemoryLeaseTable(), [], [], {
        retrieval: { consumerName: 'x' } as never,
      }),
    ).toThrow(/retrieval\.mode is required/);
    expect(() =>
      consumerOf('any', 'app', new MemoryLeaseTable(), [], [], {
        retrieval: { mode: 'polling', consumerName: 'x' } as never,
      }),
    ).toThrow(/retrieval\.consumerName only apply to mode 'fanout'/);
  });

  it('checkpoints empty events where the processor asks, and restarts by fan-out, then polling, losing nothing', async () => {
    const streamName = await newStream(1);
    const table = new MemoryLeaseTable();
    const store = createMemoryLeaseStore({ applicationName: 'idle-checkpoint', table });
    const seen: Array<{ shardId: string; data: string }> = [];
    const events: KclEvent[] = [];
    const everyBatch = { callProcessRecordsEvenForEmptyRecordList: true } as const;
    await putRecords(kinesis.client, streamName, records('i', 10, 2));
    const first = consumerOf(streamName, 'idle-checkpoint', table, seen, events, everyBatch);
    await first.start();
    await until(() => seen.length >= 10, 20_000, 'the records');
    // Empty events follow (about one a second), delivered and checkpointed too. kinesis-local's
    // continuation stays at the last record; AWS's moves on, and a checkpoint then names it
    // (test/edges.test.ts, 'an idle fan-out shard').
    await until(
      () => events.filter((event) => event.type === 'checkpoint-written').length > 0,
      10_000,
      'a checkpoint',
    );
    expect((await store.leases.list())[0]?.checkpoint.sequenceNumber).toBeDefined();
    await first.stop();
    await putRecords(kinesis.client, streamName, records('i', 10, 2, 10));
    const second = consumerOf(streamName, 'idle-checkpoint', table, seen, events, everyBatch);
    await second.start();
    await until(() => seen.length >= 20, 20_000, 'the records after the restart');
    await second.stop();
    // The same lease read by polling from that checkpoint.
    await putRecords(kinesis.client, streamName, records('i', 10, 2, 20));
    const third = consumerOf(streamName, 'idle-checkpoint', table, seen, events, {
      ...everyBatch,
      retrieval: { mode: 'polling' },
    });
    await third.start();
    await until(() => seen.length >= 30, 20_000, 'the records read by polling');
    await third.stop();
    expect(seen.map((entry) => indexOf(entry.data))).toEqual(Array.from({ length: 30 }, (_, index) => index));
  });
});
