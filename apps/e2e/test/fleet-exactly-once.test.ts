import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it, onTestFailed } from 'vitest';
import type { StoreConfig } from '../src/store-config.js';
import { checkPostgres, createPostgresDatabase } from './support/databases.js';
import { balanced, FleetHarness, waitFor } from './support/harness.js';
import { byHashKey, produceContinuously, startTestStream, type TestStream } from './support/stream.js';

/** The application's own table, in the lease store's database: one row per record committed. */
const OUTPUT_TABLE = 'exactly_once_output';

const OUTPUT_COLUMNS = `application_name text not null, worker_id text not null, shard_id text not null,
  sequence_number text not null, sub_sequence_number integer not null, partition_key text not null,
  data text not null`;

/** What the test needs of the database beside the worker processes: create the table, read it. */
interface OutputDatabase {
  readonly store: StoreConfig;
  /** The application's committed rows, in the order the database assigned their ids. */
  rows(applicationName: string): Promise<Array<{ readonly data: string; readonly partition_key: string }>>;
  close(): Promise<void>;
}

async function postgresOutput(): Promise<OutputDatabase> {
  const database = await createPostgresDatabase();
  const client = new pg.Client({ connectionString: database.url });
  await client.connect();
  await client.query(`create table ${OUTPUT_TABLE} (id bigserial primary key, ${OUTPUT_COLUMNS})`);
  return {
    store: { kind: 'postgres', url: database.url },
    async rows(applicationName) {
      const result = await client.query<{ data: string; partition_key: string }>(
        `select data, partition_key from ${OUTPUT_TABLE} where application_name = $1 order by id`,
        [applicationName],
      );
      return result.rows;
    },
    async close() {
      await client.end();
      await database.drop();
    },
  };
}

async function sqliteOutput(): Promise<OutputDatabase> {
  const dir = mkdtempSync(join(tmpdir(), 'kcl-exactly-once-'));
  const file = join(dir, 'leases.db');
  const setup = new Database(file);
  setup.pragma('journal_mode = WAL');
  setup.exec(`create table ${OUTPUT_TABLE} (id integer primary key autoincrement, ${OUTPUT_COLUMNS})`);
  setup.close();
  const reader = new Database(file, { readonly: true, timeout: 5_000 });
  const select = reader.prepare<[string], { data: string; partition_key: string }>(
    `select data, partition_key from ${OUTPUT_TABLE} where application_name = ? order by id`,
  );
  return {
    store: { kind: 'sqlite', file },
    rows: async (applicationName) => select.all(applicationName),
    async close() {
      reader.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

interface OutputVerification {
  readonly written: number;
  readonly committed: number;
  readonly missing: number;
  readonly duplicated: number;
  readonly orderViolations: number;
}

/** Every written record exactly once in the table, each key's records in write order by row id. */
function verifyOutput(
  written: ReadonlyArray<{ readonly data: string }>,
  rows: ReadonlyArray<{ readonly data: string; readonly partition_key: string }>,
): OutputVerification {
  const seen = new Set<string>();
  let duplicated = 0;
  let orderViolations = 0;
  const highest = new Map<string, number>();
  for (const row of rows) {
    if (seen.has(row.data)) duplicated += 1;
    seen.add(row.data);
    const index = Number(row.data.slice(row.data.lastIndexOf('-') + 1));
    if (index < (highest.get(row.partition_key) ?? -1)) orderViolations += 1;
    else highest.set(row.partition_key, index);
  }
  let missing = 0;
  for (const record of written) if (!seen.has(record.data)) missing += 1;
  return { written: written.length, committed: rows.length, missing, duplicated, orderViolations };
}

const postgres = await checkPostgres();

const DATABASES: ReadonlyArray<{
  readonly name: string;
  readonly skip: string | null;
  readonly open: () => Promise<OutputDatabase>;
  /**
   * How long each transaction stays open after its inserts, so steals and the kill land while
   * transactions are open. SQLite's one writer makes every other worker wait meanwhile: shorter there.
   */
  readonly transactionWorkDelayMs: number;
  /**
   * Whether a steal can land while a transaction is open, so that a transaction whose work wrote its
   * rows is rolled back on the lease counter. Not on SQLite: the thief's take waits for the file's
   * write lock, i.e. for the commit, and the victim's next transaction is refused before its work.
   */
  readonly stealsDuringTransactions: boolean;
}> = [
  {
    name: 'postgres',
    skip: postgres.reason,
    open: postgresOutput,
    transactionWorkDelayMs: 200,
    stealsDuringTransactions: true,
  },
  {
    name: 'sqlite',
    skip: null,
    open: sqliteOutput,
    transactionWorkDelayMs: 50,
    stealsDuringTransactions: false,
  },
];

for (const database of DATABASES) {
  describe.skipIf(database.skip !== null)(
    `exactly-once fleet on ${database.name}${database.skip === null ? '' : ` (skipped: ${database.skip})`}`,
    () => {
      let stream: TestStream;
      let output: OutputDatabase;
      let fleetHarness: FleetHarness | undefined;

      beforeAll(async () => {
        [stream, output] = await Promise.all([startTestStream(), database.open()]);
      });
      afterAll(async () => {
        await fleetHarness?.stopAll();
        await stream?.stop();
        await output?.close();
      });

      it('commits every record exactly once, in per-key order, across a late joiner, kill -9, a split, a merge and a graceful stop', async () => {
        const streamName = `exactly-once-${database.name}`;
        const applicationName = `exactly-once-${database.name}-${Date.now()}`;
        await stream.create(streamName, 4);
        const harness = new FleetHarness({
          dir: mkdtempSync(join(tmpdir(), 'kcl-fleet-')),
          store: output.store,
          kinesisEndpoint: stream.emulator.endpoint,
          streamName,
          applicationName,
          // Plain steals, not hand-offs: the old owner goes on with its batch until it notices, and its
          // commit must fail on the lease counter.
          consumer: { handoff: false },
        });
        fleetHarness = harness;
        const committed = async (): Promise<number> => (await output.rows(applicationName)).length;
        onTestFailed(async () => {
          const result = verifyOutput(stream.written, await output.rows(applicationName));
          process.stderr.write(`exactly-once diagnostics: ${JSON.stringify(result)}\n`);
          for (const workerId of ['w1', 'w2', 'w3', 'w4']) {
            const stderr = harness.stderrOf(workerId);
            if (stderr !== '') process.stderr.write(`${workerId} stderr:\n${stderr.slice(-3_000)}\n`);
          }
        });
        const spawn = (workerId: string) =>
          harness.spawn(workerId, output.store, {
            outputTable: OUTPUT_TABLE,
            // Transactions stay open a while, so the steals and the kill land while some are open.
            transactionWorkDelayMs: database.transactionWorkDelayMs,
          });

        await spawn('w1');
        await spawn('w2');
        await waitFor(balanced(harness, ['w1', 'w2'], 4), 20_000, 'an even spread');
        const producer = produceContinuously(stream, streamName, 100, 30);
        await waitFor(async () => (await committed()) >= 500, 30_000, 'rows committed');

        // A late joiner steals its share from living owners, which go on with their batch until they
        // notice.
        await spawn('w3');
        await waitFor(balanced(harness, ['w1', 'w2', 'w3'], 4), 20_000, 'the late joiner’s share');
        const stolenAt = performance.timeOrigin + performance.now();
        const [first, second] = byHashKey(await stream.openShards(streamName));
        await stream.split(streamName, first?.ShardId ?? '');
        await waitFor(async () => (await committed()) >= 1_500, 30_000, 'rows after the split');

        // A crash in the middle of a batch: whatever it had not committed is done again, once.
        const killedAt = await harness.kill('w2');
        await waitFor(async () => (await committed()) >= 2_500, 30_000, 'rows after the kill');

        const children = byHashKey(
          (await stream.openShards(streamName)).filter((shard) => shard.ParentShardId === first?.ShardId),
        );
        await stream.merge(streamName, children[1]?.ShardId ?? '', second?.ShardId ?? '');
        await spawn('w4');
        await waitFor(async () => (await committed()) >= 3_500, 30_000, 'rows after the merge');

        await harness.stop('w1');
        await waitFor(async () => (await committed()) >= 4_000, 30_000, 'rows after the graceful stop');
        await producer.stop();
        await waitFor(
          async () =>
            new Set((await output.rows(applicationName)).map((row) => row.data)).size >=
            stream.written.length,
          60_000,
          'every record committed',
        );
        await harness.stopAll();

        const result = verifyOutput(stream.written, await output.rows(applicationName));
        expect(result).toEqual({
          written: stream.written.length,
          committed: stream.written.length,
          missing: 0,
          duplicated: 0,
          orderViolations: 0,
        });
        // The scenario happened: where steals can land while a transaction is open, one whose work had
        // written its rows lost its lease before the commit and was rolled back (an at-least-once
        // processor would have kept those rows: a duplicate);
        // leases were stolen from living owners, moved after the kill, and shards ended (split, merge).
        const refused = harness.events.filter(
          (event) =>
            event.type === 'transaction-refused' &&
            event.leaseLost === true &&
            event.workRan === true &&
            !String(event.reason).includes('committed with checkpoint'),
        );
        if (database.stealsDuringTransactions) expect(refused.length).toBeGreaterThanOrEqual(1);
        expect(
          harness.events.some(
            (event) =>
              event.type === 'lease-taken' &&
              event.workerId === 'w3' &&
              event.stolen === true &&
              event.at <= stolenAt,
          ),
        ).toBe(true);
        expect(
          harness.events.some(
            (event) => event.type === 'lease-taken' && event.workerId !== 'w2' && event.at > killedAt,
          ),
        ).toBe(true);
        expect(harness.events.filter((event) => event.type === 'shard-ended').length).toBeGreaterThanOrEqual(
          2,
        );
        expect(harness.events.some((event) => event.type === 'lease-taken' && event.workerId === 'w4')).toBe(
          true,
        );
      });
    },
  );
}
