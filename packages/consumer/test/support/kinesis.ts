import {
  CreateStreamCommand,
  DescribeStreamSummaryCommand,
  KinesisClient,
  ListShardsCommand,
  MergeShardsCommand,
  PutRecordsCommand,
  type PutRecordsRequestEntry,
  SplitShardCommand,
} from '@aws-sdk/client-kinesis';
import { type RunningEmulator, startKinesisLocal } from '@kcl/testkit';
import { NodeHttpHandler } from '@smithy/node-http-handler';

export interface LocalKinesis {
  readonly emulator: RunningEmulator;
  readonly client: KinesisClient;
  /** A client for a consumer (a separate one, so the consumer may destroy its own). */
  newClient(): KinesisClient;
  stop(): Promise<void>;
}

export async function startLocalKinesis(): Promise<LocalKinesis> {
  const emulator = await startKinesisLocal({
    durations: { createStream: 50, splitShard: 50, mergeShards: 50, updateShardCount: 50 },
  });
  const newClient = (): KinesisClient =>
    new KinesisClient({
      endpoint: emulator.endpoint,
      region: emulator.region,
      credentials: emulator.credentials,
      requestHandler: new NodeHttpHandler(),
    });
  const client = newClient();
  return {
    emulator,
    client,
    newClient,
    stop: async () => {
      client.destroy();
      await emulator.stop();
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

/** Writes `count` records `<key>:<n>` over `keys` partition keys; returns them in write order. */
export async function putRecords(
  client: KinesisClient,
  streamName: string,
  records: ReadonlyArray<{ readonly partitionKey: string; readonly data: string }>,
): Promise<void> {
  for (let index = 0; index < records.length; index += 500) {
    const entries: PutRecordsRequestEntry[] = records
      .slice(index, index + 500)
      .map((record) => ({ PartitionKey: record.partitionKey, Data: Buffer.from(record.data) }));
    for (let attempt = 0; ; attempt++) {
      const output = await client.send(new PutRecordsCommand({ StreamName: streamName, Records: entries }));
      if ((output.FailedRecordCount ?? 0) === 0) break;
      if (attempt > 20) throw new Error('PutRecords keeps failing');
      const failed = entries.filter((_, position) => output.Records?.[position]?.ErrorCode !== undefined);
      entries.splice(0, entries.length, ...failed);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
}

export async function openShards(client: KinesisClient, streamName: string) {
  const output = await client.send(new ListShardsCommand({ StreamName: streamName }));
  return (output.Shards ?? []).filter(
    (shard) => shard.SequenceNumberRange?.EndingSequenceNumber === undefined,
  );
}

export async function splitShard(client: KinesisClient, streamName: string, shardId: string): Promise<void> {
  const shards = await client.send(new ListShardsCommand({ StreamName: streamName }));
  const shard = shards.Shards?.find((candidate) => candidate.ShardId === shardId);
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

export async function mergeShards(
  client: KinesisClient,
  streamName: string,
  shardId: string,
  adjacentShardId: string,
): Promise<void> {
  await client.send(
    new MergeShardsCommand({
      StreamName: streamName,
      ShardToMerge: shardId,
      AdjacentShardToMerge: adjacentShardId,
    }),
  );
  await waitForActive(client, streamName);
}

export function until(condition: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  return new Promise((resolve, reject) => {
    const check = (): void => {
      if (condition()) resolve();
      else if (Date.now() > deadline)
        reject(new Error(`timed out after ${timeoutMs} ms waiting for ${what}`));
      else setTimeout(check, 20);
    };
    check();
  });
}
