// End-to-end latency, put → processRecords, of consumers polling at short intervals and one reading
// with enhanced fan-out, side by side: they all read the same stream at the same time, so every mode
// sees the same records, put at a steady modest rate. Each record carries the time it was put; the
// latency is the time processRecords received it minus that. Prints Markdown tables.
//
//   npx -y pnpm@10.34.9 --filter @kcl/bench bench:latency -- [--rate 20] [--seconds 40] [--shards 2]
//     [--poll-intervals 200,500] [--size 100] [--no-fanout]
import { parseArgs } from 'node:util';
import { PutRecordCommand } from '@aws-sdk/client-kinesis';
import {
  type Consumer,
  createConsumer,
  ensureStreamConsumer,
  type RecordProcessorFactory,
} from '@kcl/consumer';
import { systemClock } from '@kcl/core';
import { createMemoryLeaseStore, startKinesisLocal } from '@kcl/testkit';
import { createStream, localKinesisClient } from '@kcl/testkit/kinesis';

const { values } = parseArgs({
  // `pnpm … bench:x -- --flag` passes the `--` through.
  args: process.argv.slice(2).filter((arg) => arg !== '--'),
  options: {
    rate: { type: 'string', default: '20' },
    seconds: { type: 'string', default: '40' },
    shards: { type: 'string', default: '2' },
    'poll-intervals': { type: 'string', default: '200,500' },
    size: { type: 'string', default: '100' },
    'no-fanout': { type: 'boolean', default: false },
  },
});
const rate = Number(values.rate);
const measuredSeconds = Number(values.seconds);
const shardCount = Number(values.shards);
const pollIntervals = String(values['poll-intervals']).split(',').map(Number);
const size = Number(values.size);
const withFanout = values['no-fanout'] !== true;
for (const [name, value] of [
  ['--rate', rate],
  ['--seconds', measuredSeconds],
  ['--shards', shardCount],
  ['--size', size],
  ...pollIntervals.map((interval) => ['--poll-intervals', interval] as const),
] as const) {
  if (!Number.isFinite(value) || value <= 0) throw new Error(`${name} must be a positive number`);
}
/** How long the modes get to start (leases taken, subscriptions open) before the measurement. */
const READY_TIMEOUT_MS = 60_000;
/** How long the last measured records get to arrive. */
const DRAIN_TIMEOUT_MS = 20_000;

interface Mode {
  readonly label: string;
  readonly settings: string;
  /** Latency per measured record index, the first time this mode processed it. */
  readonly latencies: Map<number, number>;
  duplicates: number;
  /** Shards that delivered a record: the mode is running once every shard has. */
  readonly shardsSeen: Set<string>;
  consumer?: Consumer;
}

const emulator = await startKinesisLocal({ durations: { createStream: 50, registerStreamConsumer: 50 } });
const admin = localKinesisClient(emulator);
const streamName = 'latency';
await createStream(admin, streamName, shardCount);

const modes: Mode[] = pollIntervals.map((interval) => ({
  label: `polling, ${interval} ms`,
  settings: `pollIntervalMs ${interval}${interval < 200 ? ' (calls stay 200 ms apart per shard)' : ''}`,
  latencies: new Map(),
  duplicates: 0,
  shardsSeen: new Set(),
}));
if (withFanout) {
  modes.push({
    label: 'fan-out',
    settings: 'SubscribeToShard, one subscription per shard',
    latencies: new Map(),
    duplicates: 0,
    shardsSeen: new Set(),
  });
}

/** Records from this index on are measured; until every mode runs, it is not set. */
let measureFrom = Number.POSITIVE_INFINITY;

function processorFor(mode: Mode): RecordProcessorFactory {
  return (shardId) => ({
    async processRecords({ records, checkpointer }) {
      const receivedAt = performance.now();
      for (const record of records) {
        const { index, putAt } = JSON.parse(Buffer.from(record.data).toString('utf8').trimEnd()) as {
          readonly index: number;
          readonly putAt: number;
        };
        mode.shardsSeen.add(shardId);
        if (index < measureFrom) continue;
        if (mode.latencies.has(index)) mode.duplicates += 1;
        else mode.latencies.set(index, receivedAt - putAt);
      }
      await checkpointer.checkpoint();
    },
  });
}

const clients = modes.map(() => localKinesisClient(emulator));
for (const [position, mode] of modes.entries()) {
  const applicationName = `latency-${position}`;
  const fanout = mode.label === 'fan-out';
  // Registered before the start, so the start does not wait for it.
  const consumerArn = fanout
    ? (await ensureStreamConsumer({ kinesis: admin, stream: { streamName }, consumerName: 'latency' }))
        .consumerArn
    : null;
  mode.consumer = createConsumer({
    streamName,
    applicationName,
    workerId: `bench-${position}`,
    kinesis: clients[position] ?? admin,
    leaseStore: createMemoryLeaseStore({ applicationName }),
    initialPosition: 'TRIM_HORIZON',
    rebalanceIntervalMs: 100,
    pollIntervalMs: pollIntervals[position] ?? 500,
    clock: systemClock,
    ...(consumerArn === null ? {} : { retrieval: { mode: 'fanout' as const, consumerArn } }),
    processor: processorFor(mode),
  });
}
await Promise.all(modes.map((mode) => mode.consumer?.start()));

// The producer: one PutRecord per record, at a steady rate (a late put does not push the later ones back).
const producer = localKinesisClient(emulator);
const putTimes: number[] = [];
const spacingMs = 1000 / rate;
const producingStarted = performance.now();
let index = 0;
let measuredTarget = Number.POSITIVE_INFINITY;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));
const allRunning = (): boolean => modes.every((mode) => mode.shardsSeen.size >= shardCount);
process.stderr.write(
  `latency: ${shardCount} shard(s), ${rate} records/s, ${measuredSeconds} s measured, modes: ${modes.map((mode) => mode.label).join('; ')}\n`,
);
while (index < measuredTarget) {
  if (measureFrom === Number.POSITIVE_INFINITY && allRunning()) {
    measureFrom = index;
    measuredTarget = index + Math.round(rate * measuredSeconds);
    process.stderr.write(`every mode reads every shard; measuring from record ${index}…\n`);
  }
  if (measureFrom === Number.POSITIVE_INFINITY && performance.now() - producingStarted > READY_TIMEOUT_MS) {
    const waiting = modes.filter((mode) => mode.shardsSeen.size < shardCount).map((mode) => mode.label);
    throw new Error(`not every mode read every shard within ${READY_TIMEOUT_MS} ms: ${waiting.join(', ')}`);
  }
  await sleep(producingStarted + index * spacingMs - performance.now());
  const body = JSON.stringify({ index, putAt: 0 }).length;
  const putAt = performance.now();
  const json = JSON.stringify({ index, putAt });
  const data = Buffer.from(json.padEnd(Math.max(size, body), ' '));
  await producer.send(
    new PutRecordCommand({ StreamName: streamName, PartitionKey: `key-${index}`, Data: data }),
  );
  if (index >= measureFrom) putTimes.push(performance.now() - putAt);
  index += 1;
}
const measuredCount = measuredTarget - measureFrom;
const drainStarted = performance.now();
while (
  performance.now() - drainStarted < DRAIN_TIMEOUT_MS &&
  modes.some((mode) => mode.latencies.size < measuredCount)
) {
  await sleep(100);
}
await Promise.all(modes.map((mode) => mode.consumer?.stop()));

/** Nearest-rank percentile of sorted values. */
function percentile(sorted: readonly number[], fraction: number): number {
  if (sorted.length === 0) return Number.NaN;
  return (
    sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(fraction * sorted.length) - 1))] ?? Number.NaN
  );
}
const ms = (value: number): string =>
  Number.isNaN(value) ? '–' : `${Math.round(value).toLocaleString('en-US')} ms`;

const firstPolling = modes[0];
const firstPollingP50 =
  firstPolling === undefined
    ? Number.NaN
    : percentile(
        [...firstPolling.latencies.values()].sort((a, b) => a - b),
        0.5,
      );
console.log(
  `\nEnd-to-end latency, PutRecord → processRecords, ${measuredCount.toLocaleString('en-US')} records put at ${rate}/s over ${measuredSeconds} s (${size}-byte records, ${shardCount} shard(s), kinesis-local); every mode read the same records at the same time. The put time is taken just before the PutRecord call, so the figures include it.\n`,
);
console.log(
  `| reader | settings | records | p50 | p90 | p99 | max | p50 ÷ ${firstPolling?.label ?? 'polling'} p50 |`,
);
console.log('|---|---|---:|---:|---:|---:|---:|---:|');
for (const mode of modes) {
  const sorted = [...mode.latencies.values()].sort((a, b) => a - b);
  const p50 = percentile(sorted, 0.5);
  const missing = measuredCount - sorted.length;
  console.log(
    `| ${mode.label} | ${mode.settings} | ${sorted.length.toLocaleString('en-US')}${missing > 0 ? ` (${missing} missing)` : ''}${mode.duplicates > 0 ? ` (+${mode.duplicates} again)` : ''} | ${ms(p50)} | ${ms(percentile(sorted, 0.9))} | ${ms(percentile(sorted, 0.99))} | ${ms(sorted.at(-1) ?? Number.NaN)} | ${(p50 / firstPollingP50).toFixed(2)} |`,
  );
}
const puts = [...putTimes].sort((a, b) => a - b);
console.log(
  `\nPutRecord call itself (included above): p50 ${ms(percentile(puts, 0.5))}, p99 ${ms(percentile(puts, 0.99))}.`,
);
console.log(
  'Consumers: memory lease store, checkpoint after every batch (after the time is taken), GetRecords calls at least 200 ms apart per shard (Kinesis allows 5 per second).',
);
if (withFanout) {
  console.log(
    '\nCaveat: kinesis-local sends subscription events about every 1 s (a record put during a subscription arrives with the next event), so fan-out latency on the emulator is dominated by that cadence: expect about 0.5 s on average and up to about 1 s plus the event build. On AWS, Kinesis pushes records as they arrive; its documentation gives about 70 ms typical propagation for enhanced fan-out against about 200 ms on average for a single polling consumer. Compare the polling rows with each other here, and the fan-out row only as "works under the emulator\'s cadence".',
  );
}

for (const client of [...clients, producer, admin]) client.destroy();
await emulator.stop();
