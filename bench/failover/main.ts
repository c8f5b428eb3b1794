// Failover: the time from kill -9 of a worker to the first record another worker processes on its
// shards, and from a graceful stop (SIGTERM) to the same; duplicates in each case, and records lost.
// Workers are separate processes on one lease store (SQLite, PostgreSQL or MariaDB), with or without
// session liveness; records flow steadily throughout. Every combination asked for runs in one
// invocation, one after the other, each on its own stream, application and table; prints Markdown tables.
//
//   npx -y pnpm@10.34.9 --filter @kcl/bench exec tsx failover/main.ts \
//     [--rounds 3] [--profile fast|default] [--store postgres,mysql,sqlite] [--liveness off,on]
//
// PostgreSQL: --postgres-url (default postgres://postgres@127.0.0.1:5432/test); MariaDB/MySQL:
// --mysql-url (default mysql://root@127.0.0.1:3306/test). Tables are named failover_<random>_<n> and
// dropped at the end.
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import type { LeaseStoreLocation } from '@kcl/stores';
import { FLEET_TIMINGS, type FleetTiming, startKinesisLocal, waitUntil } from '@kcl/testkit';
import { createStream, localKinesisClient, putRecords } from '@kcl/testkit/kinesis';
import { createConnection } from 'mysql2/promise';
import pg from 'pg';
import { sampleStatistics } from '../store-ops/sample-statistics.js';
import type { FailoverWorkerConfig } from './worker.js';

const { values } = parseArgs({
  // `pnpm … bench:x -- --flag` passes the `--` through.
  args: process.argv.slice(2).filter((arg) => arg !== '--'),
  options: {
    rounds: { type: 'string', default: '3' },
    profile: { type: 'string', default: 'fast' },
    store: { type: 'string', default: 'sqlite' },
    liveness: { type: 'string', default: 'on' },
    'postgres-url': { type: 'string', default: 'postgres://postgres@127.0.0.1:5432/test' },
    'mysql-url': { type: 'string', default: 'mysql://root@127.0.0.1:3306/test' },
  },
});
const rounds = Number(values.rounds);
const profiles: Record<string, Partial<FleetTiming>> = {
  // The consumer's defaults (renew 30 s, expiry 45 s, rebalance 6 s, poll 500 ms).
  default: {},
  // Short intervals, as the demo uses them.
  fast: FLEET_TIMINGS.demo,
};
const chosenTiming = profiles[String(values.profile)];
if (chosenTiming === undefined)
  throw new Error(`--profile must be one of ${Object.keys(profiles).join(', ')}`);
const timing: Partial<FleetTiming> = chosenTiming;

const STORE_KINDS = ['sqlite', 'postgres', 'mysql'] as const;
type StoreKind = (typeof STORE_KINDS)[number];
const STORE_LABELS: Record<StoreKind, string> = {
  sqlite: 'SQLite',
  postgres: 'PostgreSQL',
  mysql: 'MariaDB',
};
const listOption = <T extends string>(name: string, given: string, allowed: readonly T[]): T[] => {
  const items = given.split(',').map((item) => item.trim());
  const unknown = items.filter((item) => !(allowed as readonly string[]).includes(item));
  if (unknown.length > 0 || items.length === 0) {
    throw new Error(`--${name} takes a comma-separated list of ${allowed.join(', ')}; got ${given}`);
  }
  return items as T[];
};
const stores = listOption('store', String(values.store), STORE_KINDS);
const livenessValues = listOption('liveness', String(values.liveness), ['off', 'on'] as const);

/** One row of the tables: a store, and whether workers hold database sessions (null: the store has none). */
interface Configuration {
  readonly store: StoreKind;
  readonly liveness: boolean | null;
}
const configurations: Configuration[] = stores.flatMap((store): Configuration[] =>
  store === 'sqlite'
    ? [{ store, liveness: null }]
    : livenessValues.map((value) => ({ store, liveness: value === 'on' })),
);
const describeConfiguration = (configuration: Configuration): string =>
  `${STORE_LABELS[configuration.store]}, ${
    configuration.liveness === null ? 'no sessions' : `liveness ${configuration.liveness ? 'on' : 'off'}`
  }`;

const here = dirname(fileURLToPath(import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'kcl-failover-'));
const runId = randomBytes(3).toString('hex');
const emulator = await startKinesisLocal();
const kinesis = localKinesisClient(emulator);
const now = (): number => performance.timeOrigin + performance.now();
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

interface WorkerEvent {
  readonly type: string;
  readonly leaseKey?: string;
  readonly at: number;
  readonly stolen?: boolean;
  readonly step?: string;
  readonly message?: string;
  /** `kinesis-call` lines: the call, its shard, when it was sent and how many records it brought. */
  readonly operation?: string;
  readonly shard?: string;
  readonly startedAt?: number;
  readonly records?: number | null;
}

interface Worker {
  readonly id: string;
  readonly child: ChildProcess;
  readonly events: WorkerEvent[];
  /** When its consumer had started (the `ready` line). */
  readyAt: number;
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

interface Line {
  readonly worker: string;
  readonly shard: string;
  readonly data: string;
  readonly at: number;
}

const KINDS = ['kill -9', 'graceful stop', 'steal (hand-off)', 'scale-out by a new worker'] as const;
type Kind = (typeof KINDS)[number];
interface Result {
  readonly kind: Kind;
  /** The move's start to the first record the new owner processed on any of the moved shards. */
  readonly takeoverMs: number;
  readonly duplicates: number;
  /** kill -9 only: the steps from the kill, for the timeline. */
  readonly timeline?: Timeline;
}

/**
 * The steps from a kill -9 to the survivor's first record on the victim's shard that resumed last, each
 * in ms from the kill.
 */
interface Timeline {
  /** The survivor found the victim without its session (liveness only). */
  readonly detectedMs: number | null;
  /** The survivor had taken the lease. */
  readonly takenMs: number;
  /** Its GetShardIterator (from the checkpoint) was answered. */
  readonly iteratorMs: number;
  /** Its first GetRecords that brought records was answered. */
  readonly fetchedMs: number;
  /** GetRecords calls that brought nothing before that one. */
  readonly emptyReads: number;
  /** The survivor had processed a record on the shard: on every one of the victim's shards. */
  readonly allShardsMs: number;
}

interface Row {
  readonly configuration: Configuration;
  readonly results: readonly Result[];
  readonly produced: number;
  readonly lost: number;
}

/** Where a configuration's leases live, and how to remove its tables afterwards. */
interface PreparedStore {
  readonly location: LeaseStoreLocation;
  drop(): Promise<void>;
}

const tableNames = (table: string): string[] => [
  table,
  `${table}_workers`,
  `${table}_applications`,
  `${table}_migration`,
  `${table}_migration_lock`,
];

function prepareStore(kind: StoreKind, index: number): PreparedStore {
  const table = `failover_${runId}_${index}`;
  switch (kind) {
    case 'sqlite':
      return { location: { kind, file: join(dir, `leases-${index}.db`) }, drop: async () => {} };
    case 'postgres': {
      const url = String(values['postgres-url']);
      return {
        location: { kind, url, tableName: table },
        drop: async () => {
          const client = new pg.Client({ connectionString: url });
          await client.connect();
          for (const name of tableNames(table)) await client.query(`DROP TABLE IF EXISTS ${name}`);
          await client.end();
        },
      };
    }
    case 'mysql': {
      const url = String(values['mysql-url']);
      return {
        location: { kind, url, tableName: table },
        drop: async () => {
          const connection = await createConnection({ uri: url });
          for (const name of tableNames(table)) await connection.query(`DROP TABLE IF EXISTS ${name}`);
          await connection.end();
        },
      };
    }
  }
}

/** One configuration: a survivor, and victims killed or stopped round after round, records flowing. */
async function measure(configuration: Configuration, index: number): Promise<Row> {
  const label = describeConfiguration(configuration);
  process.stderr.write(`\n${label}\n`);
  const prepared = prepareStore(configuration.store, index);
  const streamName = `failover-${index}`;
  const applicationName = `failover_${runId}_${index}`;
  const output = join(dir, `processed-${index}.txt`);
  await createStream(kinesis, streamName, 4);

  const readLines = (): Line[] =>
    existsSync(output)
      ? readFileSync(output, 'utf8')
          .split('\n')
          .filter((line) => line !== '')
          .map((line) => {
            const [worker = '', shard = '', data = '', at = '0'] = line.split(' ');
            return { worker, shard, data, at: Number(at) };
          })
      : [];

  const workers: Worker[] = [];
  const startWorker = async (id: string): Promise<Worker> => {
    const config: FailoverWorkerConfig = {
      workerId: id,
      streamName,
      applicationName,
      endpoint: emulator.endpoint,
      store: prepared.location,
      sessionLiveness: configuration.liveness === true,
      output,
      timing,
    };
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', join(here, 'worker.ts'), JSON.stringify(config)],
      {
        stdio: ['ignore', 'pipe', 'inherit'],
        env: { ...process.env, AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true' },
      },
    );
    const worker: Worker = { id, child, events: [], readyAt: Number.NaN };
    workers.push(worker);
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
  };

  const produced = new Set<string>();
  let producing = true;
  let serial = 0;
  const producer = (async () => {
    while (producing) {
      const records = Array.from({ length: 50 }, (_, offset) => ({
        partitionKey: `key-${offset}`,
        data: `${index}-r-${serial + offset}`,
      }));
      serial += records.length;
      await putRecords(kinesis, streamName, records);
      for (const record of records) produced.add(record.data);
      await sleep(100);
    }
  })();

  const results: Result[] = [];
  const record = (result: Result): void => {
    results.push(result);
    const steps = result.timeline;
    process.stderr.write(
      `  ${result.kind}: first record ${Math.round(result.takeoverMs)} ms, duplicates ${result.duplicates}${
        steps === undefined
          ? ''
          : ` (slowest shard: found dead ${steps.detectedMs === null ? '—' : Math.round(steps.detectedMs)} ms, taken ${Math.round(steps.takenMs)} ms, iterator ${Math.round(steps.iteratorMs)} ms, records fetched ${Math.round(steps.fetchedMs)} ms after ${steps.emptyReads} empty reads, processed ${Math.round(steps.allShardsMs)} ms)`
      }\n`,
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
      .filter(
        (event) => event.type === 'lease-taken' && event.stolen === true && event.leaseKey !== undefined,
      )
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
        takeoverMs: Math.max(
          ...moves.map((move) => firstRecord(move.shard, move.startedAt) - move.startedAt),
        ),
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
  let victims = 0;
  for (let round = 0; round < rounds; round++) {
    for (const kind of ['kill -9', 'graceful stop'] as const) {
      victims += 1;
      const victim = await startWorker(`victim-${victims}`);
      await waitUntil(() => held(victim).size === 2 && held(survivor).size === 2, 120_000, 'an even spread');
      await sleep(1_500);
      // The victim joined a survivor holding all four leases: a scale-out by steals.
      recordJoin(victim);
      const leases = [...held(victim)];
      const startedAt = now();
      if (kind === 'kill -9') victim.child.kill('SIGKILL');
      else victim.child.kill('SIGTERM');
      await once(victim.child, 'exit');
      const exitedMs = now() - startedAt;
      const firstOn = (shard: string, lines: readonly Line[]): number =>
        Math.min(
          ...lines
            .filter((line) => line.worker === 'survivor' && line.shard === shard && line.at > startedAt)
            .map((line) => line.at),
        );
      await waitUntil(
        () => {
          const lines = readLines();
          return leases.every((shard) => Number.isFinite(firstOn(shard, lines)));
        },
        180_000,
        `the takeover after ${kind}`,
      );
      const lines = readLines();
      const firsts = leases.map((shard) => firstOn(shard, lines) - startedAt);
      // The shard that resumed last, step by step.
      const slowest = leases[firsts.indexOf(Math.max(...firsts))] ?? '';
      const takenAt =
        survivor.events.find(
          (event) => event.type === 'lease-taken' && event.leaseKey === slowest && event.at > startedAt,
        )?.at ?? Number.NaN;
      const reads = survivor.events.filter(
        (event) =>
          event.type === 'kinesis-call' &&
          event.shard === slowest &&
          (event.startedAt ?? 0) >= takenAt &&
          event.at <= startedAt + Math.max(...firsts),
      );
      const iterator = reads.find((event) => event.operation === 'GetShardIterator');
      const gets = reads.filter((event) => event.operation === 'GetRecords');
      const fetchedIndex = gets.findIndex((event) => (event.records ?? 0) > 0);
      const detected = survivor.events.find(
        (event) =>
          event.type === 'log' &&
          event.at > startedAt &&
          event.message?.startsWith('workers lost their database session') === true,
      );
      if (kind === 'graceful stop') {
        // Where a graceful stop's time goes: the victim's releases, the survivor's takes.
        const releases = victim.events
          .filter((event) => event.type === 'lease-released' && event.at > startedAt)
          .map((event) => Math.round(event.at - startedAt));
        const takes = survivor.events
          .filter(
            (event) =>
              event.type === 'lease-taken' && event.at > startedAt && leases.includes(event.leaseKey ?? ''),
          )
          .map((event) => Math.round(event.at - startedAt));
        // Longer than two rebalance intervals: both workers' events around the stop, to see why.
        const slow = Math.min(...firsts) > 2 * 1.25 * (timing.rebalanceIntervalMs ?? 6_000);
        for (const worker of slow ? [victim, survivor] : []) {
          for (const event of worker.events) {
            if (event.at <= startedAt - 10_000 || event.type === 'kinesis-call') continue;
            if (event.type === 'checkpoint-written' || event.type === 'lease-renewed') continue;
            process.stderr.write(
              `    ${worker.id} at ${Math.round(event.at - startedAt)} ms: ${event.type} ${event.leaseKey ?? ''} ${event.message ?? event.step ?? ''}\n`,
            );
          }
        }
        process.stderr.write(
          `  (graceful stop: released at ${releases.join(', ') || '—'} ms, found without its session ${
            detected === undefined ? '—' : Math.round(detected.at - startedAt)
          } ms, taken at ${takes.join(', ') || '—'} ms, its process ended at ${Math.round(exitedMs)} ms)\n`,
        );
      }
      await sleep(2_000);
      // Duplicates caused by this event: records processed again after it that had been processed before.
      record({
        kind,
        takeoverMs: Math.min(...firsts),
        duplicates: duplicatesSince(startedAt),
        ...(kind === 'kill -9'
          ? {
              timeline: {
                detectedMs: detected === undefined ? null : detected.at - startedAt,
                takenMs: takenAt - startedAt,
                iteratorMs: (iterator?.at ?? Number.NaN) - startedAt,
                fetchedMs: (gets[fetchedIndex]?.at ?? Number.NaN) - startedAt,
                emptyReads: fetchedIndex === -1 ? gets.length : fetchedIndex,
                allShardsMs: Math.max(...firsts),
              },
            }
          : {}),
      });
    }
  }
  producing = false;
  await producer;
  // Lost: a record written and never processed, once the survivor has caught up.
  const processedData = (): Set<string> => new Set(readLines().map((line) => line.data));
  await waitUntil(
    () => {
      const processed = processedData();
      return [...produced].every((data) => processed.has(data));
    },
    120_000,
    'every record processed',
  ).catch(() => undefined);
  const processed = processedData();
  const lost = [...produced].filter((data) => !processed.has(data)).length;
  survivor.child.kill('SIGTERM');
  await once(survivor.child, 'exit');
  for (const worker of workers)
    if (worker.child.exitCode === null && worker.child.signalCode === null) worker.child.kill('SIGKILL');
  await prepared.drop();
  process.stderr.write(`  ${produced.size} records written, ${lost} lost\n`);
  return { configuration, results, produced: produced.size, lost };
}

const rows: Row[] = [];
for (const [index, configuration] of configurations.entries()) rows.push(await measure(configuration, index));
kinesis.destroy();
await emulator.stop();
rmSync(dir, { recursive: true, force: true });

const seconds = (ms: number): string => `${(ms / 1_000).toFixed(2)}`;
/** `median (min–max)` in seconds. */
const spread = (values: readonly number[]): string => {
  if (values.length === 0) return '—';
  const statistics = sampleStatistics(values);
  return values.length === 1
    ? `${seconds(statistics.median)} s`
    : `${seconds(statistics.median)} s (${seconds(statistics.min)}–${seconds(statistics.max)})`;
};
const of = (row: Row, kind: Kind): Result[] => row.results.filter((result) => result.kind === kind);
const liveness = (configuration: Configuration): string =>
  configuration.liveness === null ? '— (no sessions)' : configuration.liveness ? 'on' : 'off';

console.log(
  `\nFailover with profile "${values.profile}" (${JSON.stringify(timing)}), ${rounds} rounds, 4 shards, median (min–max) to the first record the new owner processes.\n`,
);
console.log(
  '| lease store | session liveness | kill -9 | graceful stop (SIGTERM) | steal (hand-off) | scale-out by a new worker | lost | duplicates after kill -9, per round |',
);
console.log('|---|---|---:|---:|---:|---:|---:|---|');
for (const row of rows) {
  const cells = KINDS.map((kind) => spread(of(row, kind).map((result) => result.takeoverMs)));
  console.log(
    `| ${STORE_LABELS[row.configuration.store]} | ${liveness(row.configuration)} | ${cells.join(' | ')} | ${row.lost} of ${row.produced} | ${of(
      row,
      'kill -9',
    )
      .map((result) => result.duplicates)
      .join(', ')} |`,
  );
}
console.log(
  "\nkill -9, the steps from the kill to the first record on the victim's shard that resumed last (median, min–max):\n",
);
console.log(
  '| lease store | session liveness | victim found without its session | lease taken | GetShardIterator answered | first GetRecords with records answered | empty GetRecords before it | record processed |',
);
console.log('|---|---|---:|---:|---:|---:|---:|---:|');
for (const row of rows) {
  const kills = of(row, 'kill -9');
  const steps = kills.flatMap((result) => (result.timeline === undefined ? [] : [result.timeline]));
  const detected = steps.flatMap((step) => (step.detectedMs === null ? [] : [step.detectedMs]));
  console.log(
    `| ${STORE_LABELS[row.configuration.store]} | ${liveness(row.configuration)} | ${spread(detected)} | ${spread(steps.map((step) => step.takenMs))} | ${spread(steps.map((step) => step.iteratorMs))} | ${spread(steps.map((step) => step.fetchedMs))} | ${steps.map((step) => step.emptyReads).join(', ')} | ${spread(steps.map((step) => step.allShardsMs))} |`,
  );
}
const failures = rows.filter((row) => row.lost > 0);
if (failures.length > 0) {
  console.error(
    `\nrecords lost in: ${failures.map((row) => describeConfiguration(row.configuration)).join('; ')}`,
  );
  process.exitCode = 1;
}
