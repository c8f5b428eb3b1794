import { randomBytes } from 'node:crypto';
import { createJavaLeaseTable, javaLeaseItem, javaShardId, putJavaTableItems } from '@kcl/testkit';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestDatabase } from './support/databases.js';
import { checkPostgres, createPostgresDatabase } from './support/databases.js';
import { startLocalDynamo } from './support/local-dynamo.js';
import { runCli } from './support/run-cli.js';

// 10,000 leases from a DynamoDB table into PostgreSQL through the CLI, with its progress lines.

const LEASES = 10_000;
const dynamo = await startLocalDynamo();
const postgres = await checkPostgres();
const available = dynamo.check.available && postgres.available;

let database: TestDatabase;
beforeAll(async () => {
  if (available) database = await createPostgresDatabase();
});
afterAll(async () => {
  await database?.drop();
  await dynamo.stop();
});

describe.skipIf(!available)('10,000 leases', () => {
  it('are copied with progress, verified and counted', async () => {
    const applicationName = `scale-${randomBytes(4).toString('hex')}`;
    const client = dynamo.client();
    await createJavaLeaseTable(client, applicationName);
    await putJavaTableItems(
      client,
      applicationName,
      Array.from({ length: LEASES }, (_, index) =>
        javaLeaseItem({
          leaseKey: javaShardId(index),
          leaseOwner: `java-worker-${index % 7}`,
          leaseCounter: index,
          checkpoint: String(1_000_000 + index),
          checkpointSubSequenceNumber: index % 4,
        }),
      ),
    );

    const run = await runCli([
      '--from',
      'dynamo',
      '--dynamo-endpoint',
      dynamo.endpoint,
      '--to',
      'postgres',
      '--postgres-url',
      database.url,
      '--app',
      applicationName,
      '--yes',
      // The watch reads the table twice more; other tests cover it, this one measures the copy.
      '--force',
    ]);
    expect(run.code, run.stderr).toBe(0);
    const progress = run.stderr.split('\n').filter((line) => line.startsWith('copying: '));
    expect(progress[0]).toMatch(/^copying: \d[\d,]*\/10,000 leases \(0%\)/);
    expect(progress).toContainEqual(expect.stringMatching(/^copying: 5,\d{3}\/10,000 leases \(50%\)/));
    expect(progress.at(-1)).toMatch(/^copying: 10,000\/10,000 leases \(100%\)/);
    expect(progress.length).toBe(11);
    expect(run.stdout).toMatch(/created\s+10,000/);
    expect(run.stdout).toMatch(
      /owners \(cleared on the target\)\s+10,000 leases held by java-worker-0 \(1,429\)/,
    );
    expect(run.stdout).toMatch(/verified\s+10,000 of 10,000 leases match/);
    const [, seconds, perSecond] = /copy time\s+([\d.]+) s \(([\d,]+) leases\/s\)/.exec(run.stdout) ?? [];
    // The rate is the leases over the copy time; the time is printed to a tenth of a second and the
    // rate to a whole lease per second (which, on a slow copy, moves LEASES / rate by more than that).
    const rate = Number(perSecond?.replaceAll(',', ''));
    expect(rate).toBeGreaterThan(0);
    const rounding = 0.05 + (LEASES * 0.5) / (rate * rate - 0.25) + 0.01;
    expect(Math.abs(LEASES / rate - Number(seconds))).toBeLessThanOrEqual(rounding);
    process.stdout.write(
      `[benchmark] dynamo → postgres, ${LEASES} leases: ${seconds} s (${perSecond} leases/s)\n`,
    );

    const { rows } = await sql<{ count: string }>`select count(*) as count from kcl_leases
      where application_name = ${applicationName} and lease_owner is null`.execute(database.db);
    expect(Number(rows[0]?.count)).toBe(LEASES);
  });
});
