import {
  CreateStreamCommand,
  DescribeStreamSummaryCommand,
  KinesisClient,
  ListShardsCommand,
  MergeShardsCommand,
  PutRecordsCommand,
  type Shard,
  SplitShardCommand,
  UpdateShardCountCommand,
} from '@aws-sdk/client-kinesis';
import { type RunningEmulator, startKinesisLocal } from '@kcl/testkit';
import { NodeHttpHandler } from '@smithy/node-http-handler';

export interface TestStream {
  readonly emulator: RunningEmulator;
  readonly client: KinesisClient;
  readonly written: Array<{ readonly partitionKey: string; readonly data: string }>;
  create(name: string, shards: number): Promise<void>;
  /** Writes `count` records in batches holding each of `keys` partition keys at most once (so per-key order = write order). */
  produce(name: string, count: number, keys: number): Promise<void>;
  openShards(name: string): Promise<Shard[]>;
  split(name: string, shardId: string): Promise<void>;
  merge(name: string, shardId: string, adjacentShardId: string): Promise<void>;
  updateShardCount(name: string, target: number): Promise<void>;
  stop(): Promise<void>;
}

export async function startTestStream(): Promise<TestStream> {
  const emulator = await startKinesisLocal({
    durations: { createStream: 50, splitShard: 100, mergeShards: 100, updateShardCount: 100 },
  });
  const client = new KinesisClient({
    endpoint: emulator.endpoint,
    region: emulator.region,
    credentials: emulator.credentials,
    requestHandler: new NodeHttpHandler(),
  });
  const written: Array<{ partitionKey: string; data: string }> = [];
  const waitActive = async (name: string): Promise<void> => {
    for (let attempt = 0; attempt < 600; attempt++) {
      const summary = await client.send(new DescribeStreamSummaryCommand({ StreamName: name }));
      if (summary.StreamDescriptionSummary?.StreamStatus === 'ACTIVE') return;
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
    throw new Error(`stream ${name} did not become ACTIVE`);
  };
  const listAll = async (name: string): Promise<Shard[]> => {
    const shards: Shard[] = [];
    let token: string | undefined;
    do {
      const page = await client.send(
        token === undefined
          ? new ListShardsCommand({ StreamName: name })
          : new ListShardsCommand({ NextToken: token }),
      );
      shards.push(...(page.Shards ?? []));
      token = page.NextToken;
    } while (token !== undefined);
    return shards;
  };
  return {
    emulator,
    client,
    written,
    async create(name, shards) {
      await client.send(new CreateStreamCommand({ StreamName: name, ShardCount: shards }));
      await waitActive(name);
    },
    async produce(name, count, keys) {
      const batchSize = Math.min(keys, 100);
      for (let start = 0; start < count; start += batchSize) {
        const batch = Array.from({ length: Math.min(batchSize, count - start) }, (_, offset) => {
          const index = written.length + offset;
          return { partitionKey: `key-${index % keys}`, data: `r-${index}` };
        });
        let pending = batch;
        for (let attempt = 0; pending.length > 0; attempt++) {
          if (attempt > 50) throw new Error('PutRecords keeps failing');
          const output = await client
            .send(
              new PutRecordsCommand({
                StreamName: name,
                Records: pending.map((record) => ({
                  PartitionKey: record.partitionKey,
                  Data: Buffer.from(record.data),
                })),
              }),
            )
            .catch(() => null);
          if (output === null) {
            await new Promise((resolve) => setTimeout(resolve, 100));
            continue;
          }
          pending = pending.filter((_, position) => output.Records?.[position]?.ErrorCode !== undefined);
          if (pending.length > 0) await new Promise((resolve) => setTimeout(resolve, 50));
        }
        written.push(...batch);
      }
    },
    async openShards(name) {
      return (await listAll(name)).filter(
        (shard) => shard.SequenceNumberRange?.EndingSequenceNumber === undefined,
      );
    },
    async split(name, shardId) {
      const shard = (await listAll(name)).find((candidate) => candidate.ShardId === shardId);
      const start = BigInt(shard?.HashKeyRange?.StartingHashKey ?? '0');
      const end = BigInt(shard?.HashKeyRange?.EndingHashKey ?? '0');
      await client.send(
        new SplitShardCommand({
          StreamName: name,
          ShardToSplit: shardId,
          NewStartingHashKey: ((start + end + 1n) / 2n).toString(),
        }),
      );
      await waitActive(name);
    },
    async merge(name, shardId, adjacentShardId) {
      await client.send(
        new MergeShardsCommand({
          StreamName: name,
          ShardToMerge: shardId,
          AdjacentShardToMerge: adjacentShardId,
        }),
      );
      await waitActive(name);
    },
    async updateShardCount(name, target) {
      await client.send(
        new UpdateShardCountCommand({
          StreamName: name,
          TargetShardCount: target,
          ScalingType: 'UNIFORM_SCALING',
        }),
      );
      await waitActive(name);
    },
    async stop() {
      client.destroy();
      await emulator.stop();
    },
  };
}

/** Sorts shards by the start of their hash key range. */
export function byHashKey(shards: readonly Shard[]): Shard[] {
  return [...shards].sort((a, b) => {
    const x = BigInt(a.HashKeyRange?.StartingHashKey ?? '0');
    const y = BigInt(b.HashKeyRange?.StartingHashKey ?? '0');
    return x < y ? -1 : x > y ? 1 : 0;
  });
}
