import type { KinesisClient } from '@aws-sdk/client-kinesis';
import { type RunningEmulator, startKinesisLocal } from '@kcl/testkit';
import { localKinesisClient } from '@kcl/testkit/kinesis';

export { waitUntil as until } from '@kcl/testkit';
export { createStream, mergeShards, openShards, putRecords, splitShard } from '@kcl/testkit/kinesis';

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
  const client = localKinesisClient(emulator);
  return {
    emulator,
    client,
    newClient: () => localKinesisClient(emulator),
    stop: async () => {
      client.destroy();
      await emulator.stop();
    },
  };
}
