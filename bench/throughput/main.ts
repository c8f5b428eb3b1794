// Throughput of the consumer against a hand-written GetRecords → handler loop over the same emulator
// and the same records, side by side in one run. Prints a Markdown table.
//
//   npx -y pnpm@10.34.9 --filter @kcl/bench exec tsx throughput/main.ts [--records N] [--shards 1,4,16] [--sizes 100,10240]
import { parseArgs } from 'node:util';
import { GetRecordsCommand, GetShardIteratorCommand, ListShardsCommand } from '@aws-sdk/client-kinesis';
import { createConsumer, type PipelineOptions, type RecordProcessorFactory } from '@kcl/consumer';
import { systemClock } from '@kcl/core';
import { createMemoryLeaseStore, startKinesisLocal } from '@kcl/testkit';
import { createStream, localKinesisClient, putRecords } from '@kcl/testkit/kinesis';

const { values } = parseArgs({
  // `pnpm … bench:x -- --flag` passes the `--` through.
  args: process.argv.slice(2).filter((arg) => arg !== '--'),
  options: {
    records: { type: 'string', default: '6000' },
    shards: { type: 'string', default: '1,4,16' },
    sizes: { type: 'string', default: '100,10240' },
    repeat: { type: 'string', default: '2' },
  },
});
const recordCount = Number(values.records);
const shardCounts = String(values.shards).split(',').map(Number);
const sizes = String(values.sizes).split(',').map(Number);
const repeat = Number(values.repeat);

const emulator = await startKinesisLocal({ shardLimit: 500, durations: { createStream: 50 } });
const newClient = () => localKinesisClient(emulator);
const admin = newClient();

/** The work each record gets in every variant: touch every byte, as a real handler would parse it. */
let checksum = 0;
function handle(data: Uint8Array): void {
  let sum = 0;
  for (let index = 0; index < data.length; index += 64) sum += data[index] ?? 0;
  checksum = (checksum + sum + data.length) | 0;
}

async function createFilledStream(name: string, shards: number, size: number): Promise<void> {
  await createStream(admin, name, shards);
  const payload = Buffer.alloc(size, 'x');
  const records = Array.from({ length: recordCount }, (_, index) => ({
    partitionKey: `key-${index}`,
    data: payload,
  }));
  // PutRecords takes at most 5 MiB per call.
  await putRecords(admin, name, records, {
    batchSize: Math.max(1, Math.min(500, Math.floor((4 * 1024 * 1024) / (size + 64)))),
  });
}

interface Measurement {
  readonly seconds: number;
  readonly cpuMicrosPerRecord: number;
}

async function measure(run: () => Promise<void>): Promise<Measurement> {
  const cpu = process.cpuUsage();
  const started = performance.now();
  await run();
  const seconds = (performance.now() - started) / 1000;
  const used = process.cpuUsage(cpu);
  return { seconds, cpuMicrosPerRecord: (used.user + used.system) / recordCount };
}

/** The baseline: per shard, GetShardIterator(TRIM_HORIZON) then GetRecords back to back, no leases, no checkpoints. */
async function handLoop(name: string, spacingMs: number): Promise<void> {
  const client = newClient();
  const shards = (await client.send(new ListShardsCommand({ StreamName: name }))).Shards ?? [];
  let seen = 0;
  await Promise.all(
    shards.map(async (shard) => {
      let iterator = (
        await client.send(
          new GetShardIteratorCommand({
            StreamName: name,
            ShardId: shard.ShardId,
            ShardIteratorType: 'TRIM_HORIZON',
          }),
        )
      ).ShardIterator;
      let last = 0;
      while (iterator !== undefined && seen < recordCount) {
        const wait = last + spacingMs - performance.now();
        if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
        last = performance.now();
        const output = await client.send(new GetRecordsCommand({ ShardIterator: iterator, Limit: 10_000 }));
        for (const record of output.Records ?? []) handle(record.Data ?? new Uint8Array(0));
        seen += output.Records?.length ?? 0;
        if ((output.Records?.length ?? 0) === 0 && (output.MillisBehindLatest ?? 0) === 0) break;
        iterator = output.NextShardIterator;
      }
    }),
  );
  client.destroy();
  if (seen < recordCount) throw new Error(`hand loop saw ${seen} of ${recordCount}`);
}

async function consumerRun(name: string, api: 'processor' | 'pipeline', run: number): Promise<void> {
  let seen = 0;
  let done: () => void = () => {};
  const finished = new Promise<void>((resolve) => {
    done = resolve;
  });
  const count = (records: number): void => {
    seen += records;
    if (seen >= recordCount) done();
  };
  const processor: RecordProcessorFactory = () => ({
    async processRecords({ records, checkpointer }) {
      for (const record of records) handle(record.data);
      count(records.length);
      await checkpointer.checkpoint();
    },
  });
  const pipeline: PipelineOptions = {
    handleMessage: (message) => {
      handle(message.data);
      count(1);
    },
    processors: { concurrency: 4, maxDemand: 2_000 },
    checkpoint: { intervalMs: 1_000, everyMessages: 5_000 },
  };
  const applicationName = `${api}-${name}-${run}`;
  const client = newClient();
  const consumer = createConsumer({
    streamName: name,
    applicationName,
    workerId: 'bench',
    kinesis: client,
    leaseStore: createMemoryLeaseStore({ applicationName }),
    initialPosition: 'TRIM_HORIZON',
    rebalanceIntervalMs: 100,
    pollIntervalMs: 500,
    clock: systemClock,
    ...(api === 'processor' ? { processor } : { pipeline }),
  });
  await consumer.start();
  await finished;
  await consumer.stop();
  client.destroy();
}

const rows: string[] = [];
let streamNumber = 0;
process.stderr.write(`throughput: ${recordCount} records per stream, repeat ${repeat}\n`);
for (const size of sizes) {
  for (const shards of shardCounts) {
    streamNumber += 1;
    const name = `throughput-${streamNumber}`;
    process.stderr.write(`filling ${name}: ${shards} shard(s), ${size}-byte records…\n`);
    await createFilledStream(name, shards, size);
    const variants: Array<[string, () => Promise<void>]> = [
      ['hand loop', () => handLoop(name, 0)],
      ['hand loop, 5 calls/s/shard', () => handLoop(name, 200)],
      ['consumer, processor', () => consumerRun(name, 'processor', 0)],
      ['consumer, pipeline', () => consumerRun(name, 'pipeline', 0)],
    ];
    const best = new Map<string, Measurement>();
    for (let round = 0; round < repeat; round++) {
      for (const [label, run] of variants) {
        const result = await measure(
          label.startsWith('consumer')
            ? () => consumerRun(name, label.endsWith('pipeline') ? 'pipeline' : 'processor', round)
            : run,
        );
        const previous = best.get(label);
        if (previous === undefined || result.seconds < previous.seconds) best.set(label, result);
      }
    }
    const baseline = best.get('hand loop');
    for (const [label] of variants) {
      const result = best.get(label);
      if (result === undefined || baseline === undefined) continue;
      const rate = recordCount / result.seconds;
      rows.push(
        `| ${shards} | ${size} B | ${label} | ${Math.round(rate).toLocaleString('en-US')} | ${(baseline.seconds / result.seconds).toFixed(2)} | ${result.cpuMicrosPerRecord.toFixed(1)} µs |`,
      );
    }
  }
}

console.log(
  `\nRecords per second reading ${recordCount} records from TRIM_HORIZON (best of ${repeat}); ratio = hand loop time ÷ variant time.\n`,
);
console.log(
  '| shards | record size | reader | records/s | ratio to hand loop | CPU per record (this process) |',
);
console.log('|---:|---:|---|---:|---:|---:|');
for (const row of rows) console.log(row);
console.log(`\n(checksum ${checksum})`);
admin.destroy();
await emulator.stop();
