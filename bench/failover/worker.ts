// One worker of the failover benchmark, as its own process: appends "<worker> <shard> <data> <time>" per
// processed record to a file before checkpointing, prints events as JSON lines.
import { appendFileSync } from 'node:fs';
import { KinesisClient } from '@aws-sdk/client-kinesis';
import { createConsumer, stopOnSignals } from '@kcl/consumer';
import { openLeaseStore } from '@kcl/stores';
import type { FleetTiming } from '@kcl/testkit';
import { NodeHttpHandler } from '@smithy/node-http-handler';

interface WorkerConfig {
  readonly workerId: string;
  readonly streamName: string;
  readonly endpoint: string;
  readonly sqliteFile: string;
  readonly output: string;
  readonly timing: Partial<FleetTiming>;
}

const config = JSON.parse(process.argv[2] ?? '{}') as WorkerConfig;
const now = (): number => performance.timeOrigin + performance.now();
const leaseStore = await openLeaseStore(
  { kind: 'sqlite', file: config.sqliteFile },
  { applicationName: 'failover' },
);
const consumer = createConsumer({
  streamName: config.streamName,
  applicationName: 'failover',
  workerId: config.workerId,
  kinesis: new KinesisClient({
    endpoint: config.endpoint,
    region: 'us-east-1',
    credentials: { accessKeyId: 'AKIAKCLLOCALTESTING0', secretAccessKey: 'kcl-local-secret' },
    requestHandler: new NodeHttpHandler(),
  }),
  leaseStore,
  initialPosition: 'TRIM_HORIZON',
  ...config.timing,
  onEvent: (event) => process.stdout.write(`${JSON.stringify({ ...event, error: undefined, at: now() })}\n`),
  processor: (shardId) => ({
    async processRecords({ records, checkpointer }) {
      if (records.length === 0) return;
      const at = now();
      appendFileSync(
        config.output,
        records
          .map((record) => `${config.workerId} ${shardId} ${Buffer.from(record.data).toString()} ${at}\n`)
          .join(''),
      );
      await checkpointer.checkpoint();
    },
    async shutdownRequested({ checkpointer }) {
      await checkpointer.checkpoint();
    },
    async shardEnded({ checkpointer }) {
      await checkpointer.checkpoint();
    },
  }),
});
stopOnSignals(consumer, { exit: false });
await consumer.start();
process.stdout.write(`${JSON.stringify({ type: 'ready', workerId: config.workerId, at: now() })}\n`);
await consumer.stopped().catch(() => undefined);
await leaseStore.close();
