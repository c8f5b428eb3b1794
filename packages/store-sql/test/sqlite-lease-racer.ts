/**
 * One process of the multi-process SQLite test: opens its own connection to the file, waits for the
 * signal, then ensures the schema, creates every lease and tries to take every lease, reporting
 * which writes it won. Run by concurrency.test.ts with `node --import tsx`.
 */
import { ExtendedSequenceNumber } from '@kcl/core';
import Database from 'better-sqlite3';
import { Kysely, SqliteDialect } from 'kysely';
import { configureSqliteLeaseDatabase, createSqlLeaseStore } from '../src/index.js';

export interface RacerOutcome {
  readonly workerId: string;
  readonly created: string[];
  readonly taken: string[];
  readonly errors: string[];
}

const [file, workerId, leaseCount] = process.argv.slice(2);
if (file === undefined || workerId === undefined || leaseCount === undefined || process.send === undefined) {
  throw new Error('usage: sqlite-lease-racer.ts <file> <workerId> <leaseCount>, as a forked process');
}
const send = process.send.bind(process);

const db = new Kysely({
  dialect: new SqliteDialect({ database: configureSqliteLeaseDatabase(new Database(file)) }),
});
const store = createSqlLeaseStore({ db, applicationName: 'racers' });
const leaseKeys = Array.from(
  { length: Number(leaseCount) },
  (_, index) => `shardId-${String(index).padStart(12, '0')}`,
);

process.once('message', async () => {
  const outcome: RacerOutcome = { workerId, created: [], taken: [], errors: [] };
  try {
    await store.admin.ensureSchema();
    for (const leaseKey of leaseKeys) {
      const result = await store.leases.create({
        leaseKey,
        checkpoint: ExtendedSequenceNumber.TRIM_HORIZON,
      });
      if (result.ok) outcome.created.push(leaseKey);
      else if (result.reason !== 'already-exists')
        outcome.errors.push(`create ${leaseKey}: ${result.reason}`);
    }
    for (const leaseKey of leaseKeys) {
      const result = await store.leases.take(leaseKey, 0, workerId);
      if (result.ok) outcome.taken.push(leaseKey);
      else if (result.reason !== 'counter-mismatch')
        outcome.errors.push(`take ${leaseKey}: ${result.reason}`);
    }
  } catch (error) {
    outcome.errors.push(error instanceof Error ? error.message : String(error));
  }
  await db.destroy();
  send({ type: 'done', outcome }, () => process.disconnect());
});

send({ type: 'ready' });
