import {
  CreateStreamCommand,
  DescribeStreamSummaryCommand,
  KinesisClient,
  PutRecordsCommand,
  type PutRecordsRequestEntry,
} from '@aws-sdk/client-kinesis';
import type { RunningEmulator, ServiceCheck } from '@kcl/testkit';
import { checkService, startKinesisLocal } from '@kcl/testkit';
import { NodeHttpHandler } from '@smithy/node-http-handler';

// Stream helpers, after @kcl/consumer's test support.

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
    const client = new KinesisClient({
      endpoint: emulator.endpoint,
      region: emulator.region,
      credentials: emulator.credentials,
      requestHandler: new NodeHttpHandler(),
    });
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

export async function createStream(
  client: KinesisClient,
  streamName: string,
  shardCount: number,
): Promise<void> {
  await client.send(new CreateStreamCommand({ StreamName: streamName, ShardCount: shardCount }));
  for (let attempt = 0; attempt < 400; attempt++) {
    const summary = await client.send(new DescribeStreamSummaryCommand({ StreamName: streamName }));
    if (summary.StreamDescriptionSummary?.StreamStatus === 'ACTIVE') return;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  throw new Error(`stream ${streamName} did not become ACTIVE`);
}

/** Writes the records (500 per PutRecords call), retrying any the emulator rejects. */
export async function putRecords(
  client: KinesisClient,
  streamName: string,
  records: ReadonlyArray<{ readonly partitionKey: string; readonly data: string }>,
): Promise<void> {
  for (let index = 0; index < records.length; index += 500) {
    let entries: PutRecordsRequestEntry[] = records
      .slice(index, index + 500)
      .map((record) => ({ PartitionKey: record.partitionKey, Data: Buffer.from(record.data) }));
    for (let attempt = 0; entries.length > 0; attempt++) {
      if (attempt > 20) throw new Error('PutRecords keeps failing');
      const output = await client.send(new PutRecordsCommand({ StreamName: streamName, Records: entries }));
      entries = entries.filter((_, position) => output.Records?.[position]?.ErrorCode !== undefined);
      if (entries.length > 0) await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
}

export function records(prefix: string, count: number, keys: number, offset = 0) {
  return Array.from({ length: count }, (_, index) => ({
    partitionKey: `key-${(offset + index) % keys}`,
    data: `${prefix}-${offset + index}`,
  }));
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
