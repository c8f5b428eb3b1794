// kill -9 of a worker on PostgreSQL with session liveness and the consumer's default timings (renew
// 30 s, expiry 45 s, rebalance 6 s): the other worker sees the dead worker's session end and takes its
// shard within seconds, long before the lease would expire.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, onTestFailed } from 'vitest';
import { checkPostgres, createPostgresDatabase } from './support/databases.js';
import { DEFAULT_LIVENESS_CHECK_MS, DEFAULT_TIMING, seenHoldingSessionBy } from './support/default-timing.js';
import { balanced, FleetHarness, verify, waitFor } from './support/harness.js';
import { produceContinuously, startTestStream, type TestStream } from './support/stream.js';

const postgres = await checkPostgres();

/**
 * The bound on kill -9 → first record on the dead worker's shard: a liveness check, a rebalance, a
 * GetRecords poll, and room for a busy machine — an eighth of the lease expiry, which the takeover
 * would otherwise wait for.
 */
const TAKEOVER_LIMIT_MS = 6_000;

describe.skipIf(postgres.reason !== null)(
  `kill -9 with session liveness and the default timings on PostgreSQL${postgres.reason ? ` (skipped: ${postgres.reason})` : ''}`,
  () => {
    let stream: TestStream | undefined;
    let database: { url: string; drop: () => Promise<void> } | undefined;
    let harness: FleetHarness | undefined;

    beforeAll(async () => {
      [stream, database] = await Promise.all([startTestStream(), createPostgresDatabase()]);
    });
    afterAll(async () => {
      await harness?.stopAll();
      await stream?.stop();
      await database?.drop();
    });

    it(`moves the dead worker's shard within ${TAKEOVER_LIMIT_MS / 1_000} s (the lease expiry is ${DEFAULT_TIMING.leaseExpiryMs / 1_000} s), losing nothing`, async () => {
      const running = stream;
      if (running === undefined || database === undefined) throw new Error('the setup did not run');
      const streamName = 'liveness-default-timings';
      await running.create(streamName, 2);
      const fleet = new FleetHarness({
        dir: mkdtempSync(join(tmpdir(), 'kcl-fleet-liveness-')),
        store: { kind: 'postgres', url: database.url },
        kinesisEndpoint: running.emulator.endpoint,
        streamName,
        applicationName: `liveness-${Date.now()}`,
        timing: DEFAULT_TIMING,
        consumer: { sessionLiveness: true, livenessCheckIntervalMs: DEFAULT_LIVENESS_CHECK_MS },
      });
      harness = fleet;
      onTestFailed(() => {
        for (const workerId of ['w1', 'w2']) {
          const stderr = fleet.stderrOf(workerId);
          if (stderr !== '') process.stderr.write(`${workerId} stderr:\n${stderr.slice(-3_000)}\n`);
        }
      });
      await fleet.spawn('w1');
      await fleet.spawn('w2');
      // w1 takes both shards at its start; w2 asks for one at its first rebalance (a hand-off).
      await waitFor(balanced(fleet, ['w1', 'w2'], 2), 30_000, 'one shard each');
      const producer = produceContinuously(running, streamName, 20, 50);
      await waitFor(
        () => new Set(fleet.processed().map((line) => line.w)).size === 2,
        15_000,
        'records flowing on both workers',
      );
      // Killed before w1 has seen it holding its session, w2 would be taken over at expiry, as without
      // liveness.
      const w2Ready =
        fleet.events.find((event) => event.type === 'ready' && event.workerId === 'w2')?.at ?? 0;
      const seenBy = seenHoldingSessionBy(w2Ready, DEFAULT_TIMING);
      await waitFor(() => performance.timeOrigin + performance.now() > seenBy, 15_000, 'w1 to have seen w2');
      const [victimShard] = [...fleet.leasesOf('w2')];
      expect(victimShard).toBeDefined();
      const killedAt = await fleet.kill('w2');
      await waitFor(
        () =>
          fleet.processed().some((line) => line.s === victimShard && line.w === 'w1' && line.t > killedAt),
        DEFAULT_TIMING.leaseExpiryMs + 15_000,
        'the dead worker’s shard resuming on w1',
      );
      const resumedAt = Math.min(
        ...fleet
          .processed()
          .filter((line) => line.s === victimShard && line.w === 'w1' && line.t > killedAt)
          .map((line) => line.t),
      );
      const takenAt = fleet.events.find(
        (event) =>
          event.type === 'lease-taken' &&
          event.workerId === 'w1' &&
          event.leaseKey === victimShard &&
          event.at > killedAt,
      )?.at;
      await producer.stop();
      await waitFor(() => fleet.distinctCount() >= running.written.length, 60_000, 'every record');
      await fleet.stopAll();
      const result = verify(running.written, fleet.processed());
      process.stderr.write(
        `kill -9 with liveness, default timings: lease taken ${takenAt === undefined ? '—' : Math.round(takenAt - killedAt)} ms, first record ${Math.round(resumedAt - killedAt)} ms after the kill; ` +
          `written ${result.written}, lost ${result.lost}, order violations ${result.orderViolations}, duplicates ${result.duplicates}\n`,
      );
      expect(resumedAt - killedAt).toBeLessThan(TAKEOVER_LIMIT_MS);
      expect(result.lost).toBe(0);
      expect(result.orderViolations).toBe(0);
    });
  },
);
