// One worker of the failover benchmark, as its own process: appends "<worker> <shard> <data> <time>" per
// processed record to a file before checkpointing, prints events (and info-level log messages, which
// name the workers found dead by their database session) as JSON lines.
import { appendFileSync } from 'node:fs';
import { KinesisClient } from '@aws-sdk/client-kinesis';
import { createConsumer, stopOnSignals } from '@kcl/consumer';
import type { Logger } from '@kcl/core';
import { type LeaseStoreLocation, openLeaseStore } from '@kcl/stores';
import type { FleetTiming } from '@kcl/testkit';
import { NodeHttpHandler } from '@smithy/node-http-handler';

export interface FailoverWorkerConfig {
  readonly workerId: string;
  readonly streamName: string;
  readonly applicationName: string;
  readonly endpoint: string;
  readonly store: LeaseStoreLocation;
  /** The consumer's `sessionLiveness` (used only where the store offers sessions). */
  readonly sessionLiveness: boolean;
  readonly output: string;
  readonly timing: Partial<FleetTiming>;
}

const config = JSON.parse(process.argv[2] ?? '{}') as FailoverWorkerConfig;
const now = (): number => performance.timeOrigin + performance.now();
const print = (line: object): void => {
  process.stdout.write(`${JSON.stringify({ ...line, at: now() })}\n`);
};
const logger: Logger = {
  debug: () => {},
  info: (message) => print({ type: 'log', level: 'info', message }),
  warn: (message) => print({ type: 'log', level: 'warn', message }),
  error: (message) => print({ type: 'log', level: 'error', message }),
};
/**
 * Prints each GetShardIterator and GetRecords call as a `kinesis-call` line (its shard, start, end and
 * records), for the timeline from a takeover to the first record: GetRecords names no shard, so the
 * shard is followed from iterator to iterator.
 */
function traceShardReads(client: KinesisClient): void {
  const shardOfIterator = new Map<string, string>();
  client.middlewareStack.add(
    (next, context) => async (args) => {
      const operation = context.commandName;
      if (operation !== 'GetShardIteratorCommand' && operation !== 'GetRecordsCommand') return next(args);
      const input = args.input as { ShardId?: string; ShardIterator?: string };
      const shard =
        operation === 'GetShardIteratorCommand'
          ? input.ShardId
          : shardOfIterator.get(input.ShardIterator ?? '');
      if (input.ShardIterator !== undefined) shardOfIterator.delete(input.ShardIterator);
      const startedAt = now();
      const result = await next(args);
      const output = result.output as {
        ShardIterator?: string;
        NextShardIterator?: string;
        Records?: readonly unknown[];
      };
      const nextIterator = output.ShardIterator ?? output.NextShardIterator;
      if (nextIterator !== undefined && shard !== undefined) shardOfIterator.set(nextIterator, shard);
      print({
        type: 'kinesis-call',
        operation: operation.replace(/Command$/, ''),
        shard,
        startedAt,
        records: output.Records?.length ?? null,
      });
      return result;
    },
    { step: 'initialize', name: 'failoverBenchTrace' },
  );
}

const leaseStore = await openLeaseStore(config.store, { applicationName: config.applicationName });
const kinesis = new KinesisClient({
  endpoint: config.endpoint,
  region: 'us-east-1',
  credentials: { accessKeyId: 'AKIAKCLLOCALTESTING0', secretAccessKey: 'kcl-local-secret' },
  requestHandler: new NodeHttpHandler(),
});
traceShardReads(kinesis);
const consumer = createConsumer({
  streamName: config.streamName,
  applicationName: config.applicationName,
  workerId: config.workerId,
  kinesis,
  leaseStore,
  initialPosition: 'TRIM_HORIZON',
  sessionLiveness: config.sessionLiveness,
  ...config.timing,
  logger,
  onEvent: (event) => print({ ...event, error: undefined }),
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
print({ type: 'ready', workerId: config.workerId });
await consumer.stopped().catch(() => undefined);
await leaseStore.close();
