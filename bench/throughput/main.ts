// Throughput of the consumer, polling and enhanced fan-out side by side, against a hand-written
// GetRecords → handler loop, over the same emulator and the same records in one run. Prints Markdown
// tables.
//
//   npx -y pnpm@10.34.9 --filter @kcl/bench bench:throughput -- [--records 2000] [--max-megabytes 2]
//     [--shards 1,4,16] [--sizes 100,10240] [--repeat 1] [--modes polling,fanout]
import { parseArgs } from 'node:util';
import { GetRecordsCommand, GetShardIteratorCommand, ListShardsCommand } from '@aws-sdk/client-kinesis';
import {
  createConsumer,
  ensureStreamConsumer,
  type PipelineOptions,
  type RecordProcessorFactory,
} from '@kcl/consumer';
import { systemClock } from '@kcl/core';
import { createMemoryLeaseStore, startKinesisLocal } from '@kcl/testkit';
import { createStream, localKinesisClient, putRecords } from '@kcl/testkit/kinesis';

const { values } = parseArgs({
  // `pnpm … bench:x -- --flag` passes the `--` through.
  args: process.argv.slice(2).filter((arg) => arg !== '--'),
  options: {
    records: { type: 'string', default: '2000' },
    // Large records are capped by bytes: the emulator serves about 1 MB/s of them.
    'max-megabytes': { type: 'string', default: '2' },
    shards: { type: 'string', default: '1,4,16' },
    sizes: { type: 'string', default: '100,10240' },
    repeat: { type: 'string', default: '1' },
    modes: { type: 'string', default: 'polling,fanout' },
  },
});
const maxRecords = Number(values.records);
const maxBytes = Number(values['max-megabytes']) * 1024 * 1024;
const shardCounts = String(values.shards).split(',').map(Number);
const sizes = String(values.sizes).split(',').map(Number);
const repeat = Number(values.repeat);
const modes = String(values.modes).split(',') as Mode[];
for (const mode of modes) {
  if (mode !== 'polling' && mode !== 'fanout')
    throw new Error(`--modes takes polling and fanout, got ${mode}`);
}
const POLL_INTERVAL_MS = 500;

type Mode = 'polling' | 'fanout';
type Api = 'processor' | 'pipeline';

const emulator = await startKinesisLocal({
  shardLimit: 500,
  durations: { createStream: 50, registerStreamConsumer: 50 },
});
const newClient = () => localKinesisClient(emulator);
const admin = newClient();

/** The work each record gets in every variant: touch every byte, as a real handler would parse it. */
let checksum = 0;
function handle(data: Uint8Array): void {
  let sum = 0;
  for (let index = 0; index < data.length; index += 64) sum += data[index] ?? 0;
  checksum = (checksum + sum + data.length) | 0;
}

const recordCountFor = (size: number): number =>
  Math.max(1, Math.min(maxRecords, Math.floor(maxBytes / size)));

async function createFilledStream(name: string, shards: number, size: number, count: number): Promise<void> {
  await createStream(admin, name, shards);
  const payload = Buffer.alloc(size, 'x');
  const records = Array.from({ length: count }, (_, index) => ({
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

async function measure(recordCount: number, run: () => Promise<void>): Promise<Measurement> {
  const cpu = process.cpuUsage();
  const started = performance.now();
  await run();
  const seconds = (performance.now() - started) / 1000;
  const used = process.cpuUsage(cpu);
  return { seconds, cpuMicrosPerRecord: (used.user + used.system) / recordCount };
}

/** The baseline: per shard, GetShardIterator(TRIM_HORIZON) then GetRecords back to back, no leases, no checkpoints. */
async function handLoop(name: string, recordCount: number, spacingMs: number): Promise<void> {
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

interface ConsumerVariant {
  readonly api: Api;
  readonly mode: Mode;
  /** The registered stream consumer (fan-out), registered before the clock starts. */
  readonly consumerArn?: string;
}

async function consumerRun(
  name: string,
  recordCount: number,
  variant: ConsumerVariant,
  run: number,
): Promise<void> {
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
  const applicationName = `${variant.api}-${variant.mode}-${name}-${run}`;
  const client = newClient();
  const consumer = createConsumer({
    streamName: name,
    applicationName,
    workerId: 'bench',
    kinesis: client,
    leaseStore: createMemoryLeaseStore({ applicationName }),
    initialPosition: 'TRIM_HORIZON',
    rebalanceIntervalMs: 100,
    pollIntervalMs: POLL_INTERVAL_MS,
    clock: systemClock,
    ...(variant.mode === 'fanout' && variant.consumerArn !== undefined
      ? { retrieval: { mode: 'fanout' as const, consumerArn: variant.consumerArn } }
      : {}),
    ...(variant.api === 'processor' ? { processor } : { pipeline }),
  });
  await consumer.start();
  await finished;
  await consumer.stop();
  client.destroy();
}

interface Variant {
  readonly label: string;
  /** Work done before the clock starts (registering a stream consumer). */
  readonly prepare?: (round: number) => Promise<ConsumerVariant>;
  readonly run: (prepared: ConsumerVariant | undefined, round: number) => Promise<void>;
}

const consumerLabel = (api: Api, mode: Mode): string =>
  `consumer, ${api}, ${mode === 'fanout' ? 'fan-out' : 'polling'}`;

function variantsFor(name: string, recordCount: number): Variant[] {
  const variants: Variant[] = [
    { label: 'hand loop', run: () => handLoop(name, recordCount, 0) },
    { label: 'hand loop, 5 calls/s/shard', run: () => handLoop(name, recordCount, 200) },
  ];
  for (const mode of modes) {
    for (const api of ['processor', 'pipeline'] as const) {
      variants.push({
        label: consumerLabel(api, mode),
        ...(mode === 'fanout'
          ? {
              // A stream consumer per run: a new subscription of a consumer and shard that just had
              // one is refused for a few seconds (ResourceInUse).
              prepare: async (round: number) => {
                const registered = await ensureStreamConsumer({
                  kinesis: admin,
                  stream: { streamName: name },
                  consumerName: `throughput-${api}-${round}`,
                });
                return { api, mode, consumerArn: registered.consumerArn };
              },
            }
          : {}),
        run: (prepared, round) => consumerRun(name, recordCount, prepared ?? { api, mode }, round),
      });
    }
  }
  return variants;
}

interface Row {
  readonly shards: number;
  readonly size: number;
  readonly recordCount: number;
  readonly results: ReadonlyMap<string, Measurement>;
}

const rows: Row[] = [];
const benchStarted = performance.now();
let streamNumber = 0;
process.stderr.write(
  `throughput: up to ${maxRecords} records (at most ${values['max-megabytes']} MB) per stream, repeat ${repeat}, modes ${modes.join(', ')}\n`,
);
for (const size of sizes) {
  const recordCount = recordCountFor(size);
  for (const shards of shardCounts) {
    streamNumber += 1;
    const name = `throughput-${streamNumber}`;
    process.stderr.write(`filling ${name}: ${shards} shard(s), ${recordCount} × ${size}-byte records…\n`);
    await createFilledStream(name, shards, size, recordCount);
    // Untimed: the first read of a stream (connections, the emulator's first pass over the shard)
    // would otherwise count against whichever variant runs first.
    await handLoop(name, recordCount, 0);
    const variants = variantsFor(name, recordCount);
    const best = new Map<string, Measurement>();
    for (let round = 0; round < repeat; round++) {
      for (const variant of variants) {
        const prepared = await variant.prepare?.(round);
        const result = await measure(recordCount, () => variant.run(prepared, round));
        const previous = best.get(variant.label);
        if (previous === undefined || result.seconds < previous.seconds) best.set(variant.label, result);
      }
    }
    rows.push({ shards, size, recordCount, results: best });
  }
}

const formatSize = (size: number): string => (size >= 1024 ? `${Math.round(size / 1024)} KB` : `${size} B`);
const rate = (recordCount: number, result: Measurement): string =>
  Math.round(recordCount / result.seconds).toLocaleString('en-US');

console.log(
  `\nRecords per second reading from TRIM_HORIZON (${maxRecords.toLocaleString('en-US')} records, at most ${values['max-megabytes']} MB, per stream; best of ${repeat}); ratio = hand loop time ÷ variant time.`,
);
console.log(
  `Consumer: memory lease store, checkpoint every batch (processor) or every second (pipeline), pollIntervalMs ${POLL_INTERVAL_MS} (back to back every 200 ms while behind); fan-out with a stream consumer registered before the clock starts.\n`,
);
console.log(
  '| shards | record size | records | reader | records/s | ratio to hand loop | CPU per record (this process) |',
);
console.log('|---:|---:|---:|---|---:|---:|---:|');
for (const row of rows) {
  const baseline = row.results.get('hand loop');
  for (const [label, result] of row.results) {
    if (baseline === undefined) continue;
    console.log(
      `| ${row.shards} | ${formatSize(row.size)} | ${row.recordCount.toLocaleString('en-US')} | ${label} | ${rate(row.recordCount, result)} | ${(baseline.seconds / result.seconds).toFixed(2)} | ${result.cpuMicrosPerRecord.toFixed(1)} µs |`,
    );
  }
}

// Polling and fan-out side by side, in the README's layout: records/s (ratio to the hand loop).
const columns = [
  'hand loop',
  ...modes.flatMap((mode) => (['processor', 'pipeline'] as const).map((api) => consumerLabel(api, mode))),
];
console.log('\nSide by side: records/s (ratio to the hand loop).\n');
console.log(
  `| shards | record size | ${columns.map((column) => column.replace('consumer, ', '')).join(' | ')} |`,
);
console.log(`|---:|---:|${columns.map(() => '---:').join('|')}|`);
for (const row of rows) {
  const baseline = row.results.get('hand loop');
  const cells = columns.map((column) => {
    const result = row.results.get(column);
    if (result === undefined || baseline === undefined) return '–';
    return `${rate(row.recordCount, result)} rec/s (${(baseline.seconds / result.seconds).toFixed(2)})`;
  });
  console.log(`| ${row.shards} | ${formatSize(row.size)} | ${cells.join(' | ')} |`);
}
if (modes.includes('fanout')) {
  console.log(
    '\nFan-out on kinesis-local: the first event of a subscription carries the backlog and events come about every 1 s, so a fan-out run is one event cadence plus the time to build and read that event; on AWS, events are pushed as records arrive (up to 2 MB/s per shard per consumer).',
  );
}
console.log(
  `\n(checksum ${checksum}; whole run ${((performance.now() - benchStarted) / 1000).toFixed(0)} s)`,
);
admin.destroy();
await emulator.stop();
