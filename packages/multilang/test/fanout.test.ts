import {
  DescribeStreamConsumerCommand,
  DescribeStreamSummaryCommand,
  GetRecordsCommand,
  GetShardIteratorCommand,
  type KinesisClient,
} from '@aws-sdk/client-kinesis';
import { localKinesisClient } from '@kcl/testkit/kinesis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDaemon, FAST_PROPERTIES, localAwsProperties } from './support/daemon-harness.js';
import {
  createStream,
  type LocalAws,
  listShards,
  putRecords,
  scanTable,
  startLocalAws,
  until,
} from './support/local-aws.js';

// A properties file that asks for enhanced fan-out, run with the unchanged npm aws-kcl child against
// kinesis-local: the stream consumer is registered under its fanoutConfig name, every shard is read
// with SubscribeToShard (kinesis-local pushes an event about every second), and the children see
// every record once, in the shard's order.

let aws: LocalAws;
beforeAll(async () => {
  aws = await startLocalAws();
});
afterAll(async () => {
  await aws?.stop();
});

/** A Kinesis client for the daemon that counts the commands sent through it, by name. */
function countingClient(): { readonly client: KinesisClient; readonly calls: Map<string, number> } {
  const client = localKinesisClient(aws.kinesisEmulator);
  const calls = new Map<string, number>();
  client.middlewareStack.add(
    (next, context) => (args) => {
      const name = context.commandName ?? 'unknown';
      calls.set(name, (calls.get(name) ?? 0) + 1);
      return next(args);
    },
    { step: 'initialize', name: 'countCommands' },
  );
  return { client, calls };
}

/** The shard's records in its own order, read with the test's client. */
async function shardContents(streamName: string, shardId: string): Promise<string[]> {
  const iterator = await aws.kinesis.send(
    new GetShardIteratorCommand({
      StreamName: streamName,
      ShardId: shardId,
      ShardIteratorType: 'TRIM_HORIZON',
    }),
  );
  let next = iterator.ShardIterator;
  const data: string[] = [];
  while (next !== undefined) {
    const page = await aws.kinesis.send(new GetRecordsCommand({ ShardIterator: next }));
    data.push(...(page.Records ?? []).map((record) => Buffer.from(record.Data ?? []).toString()));
    if ((page.Records ?? []).length === 0 && page.MillisBehindLatest === 0) break;
    next = page.NextShardIterator;
  }
  return data;
}

function records(prefix: string, count: number) {
  return Array.from({ length: count }, (_, index) => ({
    partitionKey: `key-${index % 16}`,
    data: `${prefix}-${index}`,
  }));
}

describe('kcl-multilang with retrievalMode = FANOUT', () => {
  it('registers the named stream consumer and reads every shard with SubscribeToShard: every record once, in order', async () => {
    const streamName = 'fanout';
    await createStream(aws.kinesis, streamName, 2);
    const before = records('before', 60);
    await putRecords(aws.kinesis, streamName, before);
    const { client, calls } = countingClient();
    const test = createTestDaemon({
      properties: {
        executableName: 'node test/fixtures/aws-kcl-processor.cjs',
        streamName,
        applicationName: 'fanout-app',
        workerId: 'fanout-worker',
        initialPositionInStream: 'TRIM_HORIZON',
        ...localAwsProperties(aws),
        ...FAST_PROPERTIES,
        retrievalMode: 'FANOUT',
        'fanoutConfig.consumerName': 'fanout-consumer',
      },
      daemonOptions: { kinesis: client },
    });
    const received = () => test.childEvents().filter((event) => event.event === 'record');
    try {
      expect(test.resolved.configuration.retrieval).toEqual({
        mode: 'fanout',
        retrievalMode: 'FANOUT',
        pollingKeys: ['idleTimeBetweenReadsInMillis'],
        consumerName: 'fanout-consumer',
        consumerArn: null,
      });
      await test.daemon.start();
      await until(() => received().length === before.length, 30_000, 'the records written before the start');
      // Written while the shards are subscribed: pushed in the next events.
      const after = records('after', 60);
      for (let batch = 0; batch < 3; batch++) {
        await putRecords(aws.kinesis, streamName, after.slice(batch * 20, batch * 20 + 20));
      }
      await until(
        () => received().length === before.length + after.length,
        30_000,
        'the records written during the subscriptions',
      );
      await test.daemon.stop();
      await test.daemon.stopped();
    } finally {
      client.destroy();
    }

    // It subscribed: one SubscribeToShard per shard at least, and no GetRecords (both shards are open).
    expect(calls.get('RegisterStreamConsumerCommand')).toBe(1);
    expect(calls.get('SubscribeToShardCommand')).toBeGreaterThanOrEqual(2);
    expect(calls.get('GetRecordsCommand') ?? 0).toBe(0);
    const summary = await aws.kinesis.send(new DescribeStreamSummaryCommand({ StreamName: streamName }));
    const described = await aws.kinesis.send(
      new DescribeStreamConsumerCommand({
        StreamARN: summary.StreamDescriptionSummary?.StreamARN,
        ConsumerName: 'fanout-consumer',
      }),
    );
    expect(described.ConsumerDescription?.ConsumerStatus).toBe('ACTIVE');
    expect(summary.StreamDescriptionSummary?.ConsumerCount).toBe(1);
    expect(
      test.logs.some((line) =>
        line.includes(
          'records are read by enhanced fan-out (SubscribeToShard) with stream consumer fanout-consumer: retrievalMode = FANOUT.',
        ),
      ),
    ).toBe(true);

    // Every record of each shard exactly once, in the shard's order; the last one checkpointed.
    const events = test.childEvents();
    const items = await scanTable(aws.dynamo, 'fanout-app');
    const shards = await listShards(aws.kinesis, streamName);
    expect(shards).toHaveLength(2);
    for (const shard of shards) {
      const shardId = shard.ShardId as string;
      const mine = events.filter((event) => event.event === 'record' && event.shardId === shardId);
      const contents = await shardContents(streamName, shardId);
      expect(contents.length).toBeGreaterThan(0);
      expect(mine.map((event) => event.data)).toEqual(contents);
      expect(items.find((item) => item.leaseKey?.S === shardId)?.checkpoint?.S).toBe(
        mine.at(-1)?.sequenceNumber,
      );
    }
    expect(events.filter((event) => event.event === 'checkpoint' && event.error !== null)).toEqual([]);
  });
});
