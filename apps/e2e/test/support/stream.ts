import type { KinesisClient, Shard } from '@aws-sdk/client-kinesis';
import { type RunningEmulator, startKinesisLocal } from '@kcl/testkit';
import {
  createStream,
  localKinesisClient,
  mergeShards,
  openShards,
  putRecords,
  splitShard,
  updateShardCount,
} from '@kcl/testkit/kinesis';

export { byHashKey } from '@kcl/testkit/kinesis';

export interface WrittenRecord {
  readonly streamName: string;
  readonly partitionKey: string;
  readonly data: string;
}

export interface TestStream {
  readonly emulator: RunningEmulator;
  readonly client: KinesisClient;
  /** Every record written, in write order, with the stream it went to. */
  readonly written: WrittenRecord[];
  /** The records written to one stream, in write order. */
  writtenTo(name: string): WrittenRecord[];
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
  const client = localKinesisClient(emulator);
  const written: WrittenRecord[] = [];
  let nextIndex = 0;
  return {
    emulator,
    client,
    written,
    writtenTo: (name) => written.filter((record) => record.streamName === name),
    create: (name, shards) => createStream(client, name, shards),
    async produce(name, count, keys) {
      const batchSize = Math.min(keys, 100);
      for (let start = 0; start < count; start += batchSize) {
        // Indices are taken before the write: producers of several streams may write at once.
        const first = nextIndex;
        const batch = Array.from({ length: Math.min(batchSize, count - start) }, (_, offset) => {
          const index = first + offset;
          return { partitionKey: `key-${index % keys}`, data: `r-${index}` };
        });
        nextIndex += batch.length;
        await putRecords(client, name, batch, { batchSize });
        written.push(...batch.map((record) => ({ streamName: name, ...record })));
      }
    },
    openShards: (name) => openShards(client, name),
    split: (name, shardId) => splitShard(client, name, shardId),
    merge: (name, shardId, adjacentShardId) => mergeShards(client, name, shardId, adjacentShardId),
    updateShardCount: (name, target) => updateShardCount(client, name, target),
    async stop() {
      client.destroy();
      await emulator.stop();
    },
  };
}

/** Writes `batch` records over `batch` keys, pausing `pauseMs` between batches, until stopped. */
export function produceContinuously(
  stream: TestStream,
  streamName: string,
  batch: number,
  pauseMs: number,
): { stop(): Promise<void> } {
  let producing = true;
  const running = (async () => {
    while (producing) {
      await stream.produce(streamName, batch, batch);
      await new Promise((resolve) => setTimeout(resolve, pauseMs));
    }
  })();
  return {
    stop: async () => {
      producing = false;
      await running;
    },
  };
}
