// Failover: the time from kill -9 of a worker to the first record another worker processes on its
// shards, and from a graceful stop (SIGTERM) to the same; duplicates in each case. Workers are separate
// processes on a SQLite lease store; records flow steadily throughout. Prints a Markdown table.
//
//   npx -y pnpm@10.34.9 --filter @kcl/bench exec tsx failover/main.ts [--rounds 3] [--profile fast|default]
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { FLEET_TIMINGS, type FleetTiming, startKinesisLocal, waitUntil } from '@kcl/testkit';
import { createStream, localKinesisClient, putRecords } from '@kcl/testkit/kinesis';

const { values } = parseArgs({
  options: { rounds: { type: 'string', default: '3' }, profile: { type: 'string', default: 'fast' } },
});
const rounds = Number(values.rounds);
const profiles: Record<string, Partial<FleetTiming>> = {
  // The consumer's defaults (renew 30 s, expiry 45 s, rebalance 6 s).
  default: { pollIntervalMs: 500 },
  // Short intervals, as the demo uses them.
  fast: FLEET_TIMINGS.demo,
};
const timing = profiles[String(values.profile)];
if (timing === undefined) throw new Error(`--profile must be one of ${Object.keys(profiles).join(', ')}`);

const here = dirname(fileURLToPath(import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'kcl-failover-'));
const emulator = await startKinesisLocal();
const kinesis = localKinesisClient(emulator);
const now = (): number => performance.timeOrigin + performance.now();

interface Worker {
  readonly id: string;
  readonly child: ChildProcess;
  readonly events: Array<{ type: string; leaseKey?: string; at: number }>;
}

const output = join(dir, 'processed.txt');
const sqliteFile = join(dir, 'leases.db');
const streamName = 'failover';
await createStream(kinesis, streamName, 4);

async function startWorker(id: string): Promise<Worker> {
  const child = spawn(
    process.execPath,
    [
      '--import',
      'tsx',
      join(here, 'worker.ts'),
      JSON.stringify({ workerId: id, streamName, endpoint: emulator.endpoint, sqliteFile, output, timing }),
    ],
    {
      stdio: ['ignore', 'pipe', 'inherit'],
      env: { ...process.env, AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true' },
    },
  );
  const worker: Worker = { id, child, events: [] };
  await new Promise<void>((resolve, reject) => {
    createInterface({ input: child.stdout! }).on('line', (line) => {
      try {
        const event = JSON.parse(line) as { type: string; leaseKey?: string; at: number };
        worker.events.push(event);
        if (event.type === 'ready') resolve();
      } catch {
        // not an event
      }
    });
    child.once('exit', () => reject(new Error(`worker ${id} exited early`)));
  });
  return worker;
}

const held = (worker: Worker): Set<string> => {
  const leases = new Set<string>();
  for (const event of worker.events) {
    if (event.leaseKey === undefined) continue;
    if (event.type === 'lease-taken') leases.add(event.leaseKey);
    if (event.type === 'lease-lost' || event.type === 'lease-released') leases.delete(event.leaseKey);
  }
  return leases;
};

let produced = 0;
let producing = true;
const producer = (async () => {
  while (producing) {
    const records = Array.from({ length: 50 }, (_, offset) => ({
      partitionKey: `key-${offset}`,
      data: `r-${produced + offset}`,
    }));
    await putRecords(kinesis, streamName, records);
    produced += records.length;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
})();

interface Line {
  readonly worker: string;
  readonly shard: string;
  readonly data: string;
  readonly at: number;
}
const readLines = (): Line[] =>
  readFileSync(output, 'utf8')
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => {
      const [worker = '', shard = '', data = '', at = '0'] = line.split(' ');
      return { worker, shard, data, at: Number(at) };
    });

interface Result {
  readonly kind: 'kill -9' | 'graceful stop';
  readonly takeoverMs: number;
  readonly duplicates: number;
}
const results: Result[] = [];
const survivor = await startWorker('survivor');
let serial = 0;
for (let round = 0; round < rounds; round++) {
  for (const kind of ['kill -9', 'graceful stop'] as const) {
    serial += 1;
    const victim = await startWorker(`victim-${serial}`);
    await waitUntil(() => held(victim).size === 2 && held(survivor).size === 2, 120_000, 'an even spread');
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    const leases = [...held(victim)];
    const startedAt = now();
    if (kind === 'kill -9') victim.child.kill('SIGKILL');
    else victim.child.kill('SIGTERM');
    await once(victim.child, 'exit');
    await waitUntil(
      () =>
        readLines().some(
          (line) => line.worker === 'survivor' && leases.includes(line.shard) && line.at > startedAt,
        ),
      180_000,
      `the takeover after ${kind}`,
    );
    const lines = readLines();
    const firstElsewhere = Math.min(
      ...lines
        .filter((line) => line.worker === 'survivor' && leases.includes(line.shard) && line.at > startedAt)
        .map((line) => line.at),
    );
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    // Duplicates caused by this event: records processed again after it that had been processed before.
    const seen = new Set<string>();
    let duplicates = 0;
    for (const line of readLines()) {
      if (seen.has(line.data) && line.at > startedAt) duplicates += 1;
      seen.add(line.data);
    }
    results.push({ kind, takeoverMs: firstElsewhere - startedAt, duplicates });
    process.stderr.write(
      `${kind}: takeover ${Math.round(firstElsewhere - startedAt)} ms, duplicates ${duplicates}\n`,
    );
  }
}
producing = false;
await producer;
survivor.child.kill('SIGTERM');
await once(survivor.child, 'exit');

const summarize = (kind: Result['kind']): string => {
  const matching = results.filter((result) => result.kind === kind);
  const times = matching.map((result) => result.takeoverMs).sort((a, b) => a - b);
  const median = times[Math.floor(times.length / 2)] ?? 0;
  return `| ${kind} | ${Math.round(times[0] ?? 0)} | ${Math.round(median)} | ${Math.round(times.at(-1) ?? 0)} | ${matching.map((result) => result.duplicates).join(', ')} |`;
};
console.log(
  `\nFailover with profile "${values.profile}" (${JSON.stringify(timing)}), ${rounds} rounds, 4 shards, SQLite lease store.\n`,
);
console.log('| event | first record elsewhere, min ms | median ms | max ms | duplicates per round |');
console.log('|---|---:|---:|---:|---|');
console.log(summarize('kill -9'));
console.log(summarize('graceful stop'));
kinesis.destroy();
await emulator.stop();
rmSync(dir, { recursive: true, force: true });
