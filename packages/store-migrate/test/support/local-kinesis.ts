import type { KinesisClient } from '@aws-sdk/client-kinesis';
import type { RunningEmulator, ServiceCheck } from '@kcl/testkit';
import { checkService, startKinesisLocal } from '@kcl/testkit';
import { localKinesisClient } from '@kcl/testkit/kinesis';

export { waitUntil as until } from '@kcl/testkit';
export { createStream, putRecords } from '@kcl/testkit/kinesis';

export interface LocalKinesis {
  readonly check: ServiceCheck;
  readonly client: KinesisClient;
  /** A client for one consumer (it may destroy its own). */
  newClient(): KinesisClient;
  stop(): Promise<void>;
}

export async function startLocalKinesis(): Promise<LocalKinesis> {
  let emulator: RunningEmulator | undefined;
  const check = await checkService('kinesis-local (Kinesis emulator)', async () => {
    emulator = await startKinesisLocal({ durations: { createStream: 50 } });
  });
  const clients: KinesisClient[] = [];
  const newClient = (): KinesisClient => {
    if (emulator === undefined) throw new Error('kinesis-local is not running');
    const client = localKinesisClient(emulator);
    clients.push(client);
    return client;
  };
  return {
    check,
    get client() {
      return clients[0] ?? newClient();
    },
    newClient,
    async stop() {
      for (const client of clients) client.destroy();
      await emulator?.stop();
    },
  };
}

export function records(prefix: string, count: number, keys: number, offset = 0) {
  return Array.from({ length: count }, (_, index) => ({
    partitionKey: `key-${(offset + index) % keys}`,
    data: `${prefix}-${offset + index}`,
  }));
}
