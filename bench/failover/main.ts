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
  // `pnpm … bench:x -- --flag` passes the `--` through.
  args: process.argv.slice(2).filter((arg) => arg !== '--'),
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

interface WorkerEvent {
  readonly type: string;
  readonly leaseKey?: string;
  readonly at: number;
  readonly stolen?: boolean;
  readonly step?: string;
}

interface Worker {
  readonly id: string;
  readonly child: ChildProcess;
  readonly events: WorkerEvent[];
  /** When its consumer had started (the `ready` line). */
  readyAt: number;
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
  const worker: Worker = { id, child, events: [], readyAt: Number.NaN };
  await new Promise<void>((resolve, reject) => {
    createInterface({ input: child.stdout! }).on('line', (line) => {
      try {
        const event = JSON.parse(line) as WorkerEvent;
        worker.events.push(event);
        if (event.type === 'ready') {
          worker.readyAt = event.at;
          resolve();
        }
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
    // The owner's side of a completed hand-off.
    if (event.type === 'lease-handoff' && event.step === 'completed') leases.delete(event.leaseKey);
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

const KINDS = ['kill -9', 'graceful stop', 'steal (hand-off)', 'scale-out by a new worker'] as const;
interface Result {
  readonly kind: (typeof KINDS)[number];
  readonly takeoverMs: number;
  readonly duplicates: number;
}
const results: Result[] = [];
const record = (result: Result): void => {
  results.push(result);
  process.stderr.write(
    `${result.kind}: takeover ${Math.round(result.takeoverMs)} ms, duplicates ${result.duplicates}\n`,
  );
};

/** Records processed after `since` (on `shards`, or any) that had been processed before. */
const duplicatesSince = (since: number, shards?: readonly string[]): number => {
  const seen = new Set<string>();
  let duplicates = 0;
  for (const line of readLines()) {
    if (seen.has(line.data) && line.at > since && (shards === undefined || shards.includes(line.shard)))
      duplicates += 1;
    seen.add(line.data);
  }
  return duplicates;
};

/**
 * The planned moves of a worker that joined a running fleet: each lease it took from a living owner,
 * from the move's start (its hand-off request, or the take itself) to its first record on that shard,
 * the slowest of them; and the scale-out, from its consumer's start to its first record on any shard.
 */
const recordJoin = (joiner: Worker): void => {
  const lines = readLines().filter((line) => line.worker === joiner.id);
  const firstRecord = (shard: string | undefined, after: number): number =>
    Math.min(
      ...lines
        .filter((line) => (shard === undefined || line.shard === shard) && line.at > after)
        .map((line) => line.at),
    );
  const moves = joiner.events
    .filter((event) => event.type === 'lease-taken' && event.stolen === true && event.leaseKey !== undefined)
    .map((taken) => {
      const requested = joiner.events.find(
        (event) =>
          event.type === 'lease-handoff' && event.step === 'requested' && event.leaseKey === taken.leaseKey,
      );
      return { shard: taken.leaseKey as string, startedAt: requested?.at ?? taken.at };
    });
  if (moves.length > 0) {
    const firstMove = Math.min(...moves.map((move) => move.startedAt));
    record({
      kind: 'steal (hand-off)',
      takeoverMs: Math.max(...moves.map((move) => firstRecord(move.shard, move.startedAt) - move.startedAt)),
      duplicates: duplicatesSince(
        firstMove,
        moves.map((move) => move.shard),
      ),
    });
  }
  record({
    kind: 'scale-out by a new worker',
    takeoverMs: firstRecord(undefined, joiner.readyAt) - joiner.readyAt,
    duplicates: duplicatesSince(joiner.readyAt),
  });
};
const survivor = await startWorker('survivor');
let serial = 0;
for (let round = 0; round < rounds; round++) {
  for (const kind of ['kill -9', 'graceful stop'] as const) {
    serial += 1;
    const victim = await startWorker(`victim-${serial}`);
    await waitUntil(() => held(victim).size === 2 && held(survivor).size === 2, 120_000, 'an even spread');
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    // The victim joined a survivor holding all four leases: a scale-out by steals.
    recordJoin(victim);
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
    record({ kind, takeoverMs: firstElsewhere - startedAt, duplicates: duplicatesSince(startedAt) });
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
console.log('| event | first record by the new owner, min ms | median ms | max ms | duplicates per round |');
console.log('|---|---:|---:|---:|---|');
for (const kind of KINDS) console.log(summarize(kind));
kinesis.destroy();
await emulator.stop();
rmSync(dir, { recursive: true, force: true });
