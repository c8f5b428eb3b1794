import { DynamoDBClient, ScanCommand } from '@aws-sdk/client-dynamodb';
import {
  CreateStreamCommand,
  DescribeStreamSummaryCommand,
  KinesisClient,
  ListShardsCommand,
  PutRecordsCommand,
  type PutRecordsRequestEntry,
  SplitShardCommand,
} from '@aws-sdk/client-kinesis';
import { type RunningEmulator, startDynalite, startKinesisLocal } from '@kcl/testkit';
import { NodeHttpHandler } from '@smithy/node-http-handler';

/** kinesis-local and dynalite, with clients for the tests' own calls. */
export interface LocalAws {
  readonly kinesisEmulator: RunningEmulator;
  readonly dynamoEmulator: RunningEmulator;
  readonly kinesis: KinesisClient;
  readonly dynamo: DynamoDBClient;
  stop(): Promise<void>;
}

export async function startLocalAws(): Promise<LocalAws> {
  const [kinesisEmulator, dynamoEmulator] = await Promise.all([
    startKinesisLocal({
      durations: { createStream: 50, splitShard: 50, mergeShards: 50, updateShardCount: 50 },
    }),
    startDynalite(),
  ]);
  const kinesis = new KinesisClient({
    endpoint: kinesisEmulator.endpoint,
    region: kinesisEmulator.region,
    credentials: kinesisEmulator.credentials,
    requestHandler: new NodeHttpHandler(),
  });
  const dynamo = new DynamoDBClient({
    endpoint: dynamoEmulator.endpoint,
    region: dynamoEmulator.region,
    credentials: dynamoEmulator.credentials,
  });
  return {
    kinesisEmulator,
    dynamoEmulator,
    kinesis,
    dynamo,
    stop: async () => {
      kinesis.destroy();
      dynamo.destroy();
      await Promise.all([kinesisEmulator.stop(), dynamoEmulator.stop()]);
    },
  };
}

export async function waitForActive(client: KinesisClient, streamName: string): Promise<void> {
  for (let attempt = 0; attempt < 400; attempt++) {
    const summary = await client.send(new DescribeStreamSummaryCommand({ StreamName: streamName }));
    if (summary.StreamDescriptionSummary?.StreamStatus === 'ACTIVE') return;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  throw new Error(`stream ${streamName} did not become ACTIVE`);
}

export async function createStream(
  client: KinesisClient,
  streamName: string,
  shardCount: number,
): Promise<void> {
  await client.send(new CreateStreamCommand({ StreamName: streamName, ShardCount: shardCount }));
  await waitForActive(client, streamName);
}

export interface TestRecord {
  readonly partitionKey: string;
  readonly data: string | Uint8Array;
  readonly explicitHashKey?: string;
}

export async function putRecords(
  client: KinesisClient,
  streamName: string,
  records: readonly TestRecord[],
): Promise<void> {
  for (let index = 0; index < records.length; index += 500) {
    let entries: PutRecordsRequestEntry[] = records.slice(index, index + 500).map((record) => ({
      PartitionKey: record.partitionKey,
      Data: typeof record.data === 'string' ? Buffer.from(record.data) : record.data,
      ...(record.explicitHashKey === undefined ? {} : { ExplicitHashKey: record.explicitHashKey }),
    }));
    for (let attempt = 0; ; attempt++) {
      const output = await client.send(new PutRecordsCommand({ StreamName: streamName, Records: entries }));
      if ((output.FailedRecordCount ?? 0) === 0) break;
      if (attempt > 20) throw new Error('PutRecords keeps failing');
      entries = entries.filter((_, position) => output.Records?.[position]?.ErrorCode !== undefined);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
}

export async function listShards(client: KinesisClient, streamName: string) {
  const output = await client.send(new ListShardsCommand({ StreamName: streamName }));
  return output.Shards ?? [];
}

export async function splitShard(client: KinesisClient, streamName: string, shardId: string): Promise<void> {
  const shard = (await listShards(client, streamName)).find((candidate) => candidate.ShardId === shardId);
  const start = BigInt(shard?.HashKeyRange?.StartingHashKey ?? '0');
  const end = BigInt(shard?.HashKeyRange?.EndingHashKey ?? '0');
  await client.send(
    new SplitShardCommand({
      StreamName: streamName,
      ShardToSplit: shardId,
      NewStartingHashKey: ((start + end + 1n) / 2n).toString(),
    }),
  );
  await waitForActive(client, streamName);
}

/** The raw items of a DynamoDB table, as the Java KCL would read them. */
export async function scanTable(client: DynamoDBClient, tableName: string) {
  const output = await client.send(new ScanCommand({ TableName: tableName, ConsistentRead: true }));
  return output.Items ?? [];
}

export async function until(
  condition: () => boolean | Promise<boolean>,
  timeoutMs: number,
  what: string,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await condition()) return;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}
