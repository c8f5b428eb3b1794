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
    durations: {
      createStream: 50,
      splitShard: 50,
      mergeShards: 50,
      updateShardCount: 50,
      registerStreamConsumer: 50,
    },
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

/** `count` records `prefix-N` (N from `offset`) over `keys` partition keys. */
export function records(prefix: string, count: number, keys: number, offset = 0) {
  return Array.from({ length: count }, (_, index) => ({
    partitionKey: `key-${(offset + index) % keys}`,
    data: `${prefix}-${offset + index}`,
  }));
}

/** The N of a record written by `records` (`prefix-N`). */
export const indexOf = (data: string): number => Number(data.slice(data.lastIndexOf('-') + 1));
