// Measures how many leases per second kcl-migrate copies from DynamoDB (dynalite, in this process)
// into PostgreSQL: seeds a Java KCL table, runs the copy engine the CLI runs, prints one line.
//
//   npx tsx scripts/bench-dynamo-to-postgres.ts [leases=10000] [concurrency=16]
//
// Needs PostgreSQL at KCL_POSTGRES_URL (default postgres://postgres@127.0.0.1:5432/postgres).
import { randomBytes } from 'node:crypto';
import { cpus, loadavg } from 'node:os';
import { systemClock } from '@kcl/core';
import { createDynamoLeaseStore } from '@kcl/store-dynamo';
import { createSqlLeaseStore } from '@kcl/store-sql';
import {
  createJavaLeaseTable,
  JAVA_SAMPLE,
  javaLeaseItem,
  javaShardId,
  putJavaTableItems,
} from '@kcl/testkit';
import { migrateLeases } from '../src/index.js';
import { createPostgresDatabase } from '../test/support/databases.js';
import { startLocalDynamo } from '../test/support/local-dynamo.js';

const count = Number(process.argv[2] ?? 10_000);
const concurrency = Number(process.argv[3] ?? 16);
const applicationName = `bench-${randomBytes(4).toString('hex')}`;

const dynamo = await startLocalDynamo();
const database = await createPostgresDatabase();
try {
  const client = dynamo.client();
  await createJavaLeaseTable(client, applicationName);
  await putJavaTableItems(
    client,
    applicationName,
    Array.from({ length: count }, (_, index) =>
      javaLeaseItem({
        leaseKey: javaShardId(index),
        leaseOwner: `java-worker-${index % 7}`,
        leaseCounter: 1_000 + index,
        checkpoint: `4959033827149025660855969253836157109592157598913${String(index).padStart(7, '0')}`,
        startingHashKey: '0',
        endingHashKey: JAVA_SAMPLE.maxHashKey,
      }),
    ),
  );
  const started = systemClock.monotonicNow();
  const report = await migrateLeases({
    from: createDynamoLeaseStore({ client, applicationName }),
    to: createSqlLeaseStore({ db: database.db, applicationName }),
    watchMs: 1,
    force: true,
    concurrency,
  });
  const totalMs = systemClock.monotonicNow() - started;
  if (report.outcome !== 'completed')
    throw new Error(`copy ended ${report.outcome}: ${report.notes.join('; ')}`);
  const rate = Math.round((report.counts.created / report.copyMs) * 1_000);
  process.stdout.write(
    `dynamo → postgres: ${report.counts.created} leases written in ${(report.copyMs / 1_000).toFixed(1)} s = ${rate} leases/s ` +
      `(whole run with scan and verification ${(totalMs / 1_000).toFixed(1)} s; concurrency ${concurrency}; ` +
      `${cpus().length} CPUs, load average ${loadavg()[0]?.toFixed(1)})\n`,
  );
} finally {
  await database.drop();
  await dynamo.stop();
}
