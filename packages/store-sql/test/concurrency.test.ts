import type { ChildProcess } from 'node:child_process';
import { fork } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { LeaseBatchWriteResult, LeaseStore } from '@kcl/core';
import { ExtendedSequenceNumber } from '@kcl/core';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SqlLeaseStore } from '../src/index.js';
import { createSqlLeaseStore } from '../src/index.js';
import type { RacerOutcome } from './sqlite-lease-racer.js';
import type { TestDatabase } from './test-databases.js';
import { checkDialects, postgresDialect, TEST_DIALECTS } from './test-databases.js';

const checks = await checkDialects();
const CONNECTIONS = 5;
const LEASES = 20;
const leaseKeyOf = (index: number): string => `shardId-${String(index).padStart(12, '0')}`;

/** Creates free leases and has every store try to take every one of them at once. */
async function raceToTake(stores: readonly LeaseStore[], prefix: string): Promise<void> {
  const keys = Array.from({ length: LEASES }, (_, index) => `${prefix}-${leaseKeyOf(index)}`);
  for (const leaseKey of keys) {
    expect((await stores[0]!.leases.create({ leaseKey, checkpoint: ExtendedSequenceNumber.LATEST })).ok).toBe(
      true,
    );
  }
  const attempts = keys.flatMap((leaseKey) =>
    stores.map(async (store, index) => ({
      leaseKey,
      owner: `worker-${index}`,
      result: await store.leases.take(leaseKey, 0, `worker-${index}`),
    })),
  );
  const results = await Promise.all(attempts);
  for (const leaseKey of keys) {
    const mine = results.filter((attempt) => attempt.leaseKey === leaseKey);
    const winners = mine.filter((attempt) => attempt.result.ok);
    expect(winners, leaseKey).toHaveLength(1);
    expect(
      mine.filter((attempt) => !attempt.result.ok && attempt.result.reason === 'counter-mismatch'),
    ).toHaveLength(stores.length - 1);
    const stored = await stores[0]!.leases.get(leaseKey);
    expect([stored?.owner, stored?.leaseCounter, stored?.ownerSwitchesSinceCheckpoint]).toEqual([
      winners[0]?.owner,
      1,
      0,
    ]);
  }
}

for (const dialect of TEST_DIALECTS) {
  const skip = checks.get(dialect.flavor)?.reason ?? null;

  describe.skipIf(skip !== null)(`${dialect.flavor}: concurrent writers on several connections`, () => {
    let database: TestDatabase;
    let stores: SqlLeaseStore[];

    beforeAll(async () => {
      database = await dialect.createDatabase();
      // Separate Kysely instances: separate pools on a server, separate connections to a SQLite file.
      stores = Array.from({ length: CONNECTIONS }, () =>
        createSqlLeaseStore({ db: database.connect({ poolSize: CONNECTIONS }), applicationName: 'racing' }),
      );
      await Promise.all(stores.map((store) => store.admin.ensureSchema()));
    });

    afterAll(async () => {
      await database?.drop();
    });

    it(`${CONNECTIONS} connections race to take each of ${LEASES} leases: exactly one winner each`, async () => {
      await raceToTake(stores, 'take');
    });

    it('concurrent creates of one key on every connection: exactly one wins', async () => {
      const results = await Promise.all(
        stores.flatMap((store) =>
          [1, 2, 3].map(() =>
            store.leases.create({
              leaseKey: 'created-once',
              checkpoint: ExtendedSequenceNumber.LATEST,
            }),
          ),
        ),
      );
      expect(results.filter((result) => result.ok)).toHaveLength(1);
      expect(results.filter((result) => !result.ok && result.reason === 'already-exists')).toHaveLength(
        CONNECTIONS * 3 - 1,
      );
    });

    it('keeps the fence under contention: each successful write moves the counter by exactly one', async () => {
      const keys = Array.from({ length: 10 }, (_, index) => `fenced-${leaseKeyOf(index)}`);
      for (const leaseKey of keys) {
        await stores[0]!.leases.create({ leaseKey, checkpoint: ExtendedSequenceNumber.TRIM_HORIZON });
      }
      const successes = new Map<string, number>(keys.map((key) => [key, 0]));
      const count = (leaseKey: string, result: LeaseBatchWriteResult): void => {
        if (result.ok) successes.set(leaseKey, (successes.get(leaseKey) ?? 0) + 1);
      };
      // Every store keeps the counters it last saw; one batch-renews, the others take and checkpoint.
      const actors = stores.map(async (store, index) => {
        const seen = new Map<string, number>(keys.map((key) => [key, 0]));
        for (let round = 0; round < 8; round++) {
          if (index === 0) {
            const renewals = keys.map((leaseKey) => ({ leaseKey, leaseCounter: seen.get(leaseKey) ?? 0 }));
            const results = await store.leases.renewMany(renewals);
            results.forEach((result, position) => {
              const leaseKey = keys[position]!;
              count(leaseKey, result);
              if (result.ok) seen.set(leaseKey, result.lease.leaseCounter);
            });
          } else {
            const leaseKey = keys[(round * CONNECTIONS + index) % keys.length]!;
            const counter = seen.get(leaseKey) ?? 0;
            const result =
              round % 2 === 0
                ? await store.leases.take(leaseKey, counter, `worker-${index}`)
                : await store.leases.checkpoint(leaseKey, counter, {
                    checkpoint: ExtendedSequenceNumber.of(String(round)),
                  });
            count(leaseKey, result);
            if (result.ok) seen.set(leaseKey, result.lease.leaseCounter);
          }
          // Refresh what this actor knows, as a worker does after losing a race.
          for (const lease of await store.leases.list()) seen.set(lease.leaseKey, lease.leaseCounter);
        }
      });
      await Promise.all(actors);
      const final = new Map(
        (await stores[0]!.leases.list()).map((lease) => [lease.leaseKey, lease.leaseCounter]),
      );
      for (const leaseKey of keys)
        expect([leaseKey, final.get(leaseKey)]).toEqual([leaseKey, successes.get(leaseKey)]);
      expect([...successes.values()].reduce((sum, value) => sum + value, 0)).toBeGreaterThan(keys.length);
    });

    it('heartbeats from every connection each count', async () => {
      await Promise.all(
        stores.flatMap((store) => [1, 2, 3, 4].map(() => store.workers.heartbeat('shared-worker'))),
      );
      const [worker] = await stores[0]!.workers.list();
      expect(worker?.heartbeat).toBe(CONNECTIONS * 4);
    });
  });
}

describe.skipIf(checks.get('postgres')?.reason !== null)('postgres: under REPEATABLE READ', () => {
  let database: TestDatabase;

  beforeAll(async () => {
    database = await postgresDialect.createDatabase();
    const name = new URL(database.location).pathname.slice(1);
    await sql`alter database ${sql.id(name)} set default_transaction_isolation = 'repeatable read'`.execute(
      database.db,
    );
  });

  afterAll(async () => {
    await database?.drop();
  });

  it('turns serialization failures into lost races: exactly one winner, no errors', async () => {
    const stores = Array.from({ length: CONNECTIONS }, () =>
      createSqlLeaseStore({ db: database.connect({ poolSize: 4 }), applicationName: 'repeatable' }),
    );
    const [isolation] = (
      await sql<{ level: string }>`select current_setting('transaction_isolation') as level`.execute(
        database.connect(),
      )
    ).rows;
    expect(isolation?.level).toBe('repeatable read');
    await stores[0]!.admin.ensureSchema();
    await raceToTake(stores, 'repeatable');
  });
});

describe.skipIf(checks.get('sqlite')?.reason !== null)('sqlite: several processes on one file', () => {
  const directory = mkdtempSync(join(tmpdir(), 'kcl-sqlite-processes-'));
  const racer = fileURLToPath(new URL('./sqlite-lease-racer.ts', import.meta.url));
  const children: ChildProcess[] = [];

  afterAll(() => {
    for (const child of children) child.kill();
    rmSync(directory, { recursive: true, force: true });
  });

  it(`${CONNECTIONS} processes create the schema and race for ${LEASES} leases: each created once, taken once`, async () => {
    const file = join(directory, 'leases.db');
    for (let index = 0; index < CONNECTIONS; index++) {
      children.push(
        fork(racer, [file, `process-${index}`, String(LEASES)], { execArgv: ['--import', 'tsx'] }),
      );
    }
    const message = (child: ChildProcess, type: string): Promise<{ type: string; outcome?: RacerOutcome }> =>
      new Promise((resolve, reject) => {
        const onMessage = (value: { type: string; outcome?: RacerOutcome }) => {
          if (value.type === type) {
            child.off('message', onMessage);
            resolve(value);
          }
        };
        child.on('message', onMessage);
        child.once('exit', (code) => reject(new Error(`racer exited with ${code} before "${type}"`)));
      });
    await Promise.all(children.map((child) => message(child, 'ready')));
    const done = children.map((child) => message(child, 'done'));
    for (const child of children) child.send({ type: 'go' });
    const outcomes = (await Promise.all(done)).map((value) => value.outcome!);
    await Promise.all(children.map((child) => (child.exitCode === null ? once(child, 'exit') : undefined)));

    expect(outcomes.flatMap((outcome) => outcome.errors)).toEqual([]);
    const created = outcomes.flatMap((outcome) => outcome.created).sort();
    const taken = outcomes.flatMap((outcome) => outcome.taken).sort();
    const keys = Array.from({ length: LEASES }, (_, index) => leaseKeyOf(index));
    expect(created).toEqual(keys);
    expect(taken).toEqual(keys);

    const { sqliteKysely } = await import('./test-databases.js');
    const db = sqliteKysely(file);
    const leases = await createSqlLeaseStore({ db, applicationName: 'racers' }).leases.list();
    const winners = new Map(
      outcomes.flatMap((outcome) => outcome.taken.map((key) => [key, outcome.workerId] as const)),
    );
    expect(leases.map((lease) => [lease.leaseKey, lease.owner, lease.leaseCounter])).toEqual(
      keys.map((key) => [key, winners.get(key), 1]),
    );
    const migrations = await sql<{ name: string }>`select name from kcl_leases_migration`.execute(db);
    expect(migrations.rows.map((row) => row.name).sort()).toEqual([
      '0001_create_lease_tables',
      '0002_add_stream_and_handoff_columns',
    ]);
    await db.destroy();
  });
});
