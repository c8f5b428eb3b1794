// Fleets with session liveness on a PostgreSQL server of their own, which is stopped and started again
// while records flow: every worker's session ends with the server, the workers must not take each other
// for dead, and once the server is back they re-attach and resume. Nothing may be lost or reordered.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FLEET_TIMINGS, type FleetTiming } from '@kcl/testkit';
import { afterAll, beforeAll, describe, expect, it, onTestFailed } from 'vitest';
import { type OpenedStore, openStore } from '../src/store-config.js';
import { DEFAULT_TIMING, seenHoldingSessionBy } from './support/default-timing.js';
import { balanced, FleetHarness, type Verification, verify, waitFor } from './support/harness.js';
import {
  checkPrivatePostgres,
  type PrivatePostgres,
  startPrivatePostgres,
} from './support/private-postgres.js';
import { produceContinuously, startTestStream, type TestStream } from './support/stream.js';

const server = checkPrivatePostgres();
/** How long the server stays down. */
const OUTAGE_MS = 3_000;

const now = (): number => performance.timeOrigin + performance.now();

interface RestartRun {
  readonly fleet: FleetHarness;
  readonly result: Verification;
  readonly stoppedAt: number;
  readonly restartedAt: number;
  readonly resumedAt: number;
  /** When the fleet was told to stop (each worker then releases its leases). */
  readonly stoppingAt: number;
}

describe.skipIf(!server.available)(
  `a fleet on a private PostgreSQL restarted mid-run${server.available ? '' : ` (skipped: ${server.reason})`}`,
  () => {
    let postgres: PrivatePostgres | undefined;
    let stream: TestStream | undefined;
    const fleets: FleetHarness[] = [];
    const observers: OpenedStore[] = [];
    let runs = 0;

    beforeAll(async () => {
      if (server.bin === null) return;
      [postgres, stream] = await Promise.all([startPrivatePostgres(server.bin), startTestStream()]);
    });
    afterAll(async () => {
      for (const fleet of fleets) await fleet.stopAll();
      for (const observer of observers) await observer.close();
      await stream?.stop();
      await postgres?.destroy();
    });

    /**
     * Starts `workers` on `shards` shards, waits for an even spread and for every worker to hold its
     * session (and, when `seenBeforeRestart`, for every worker to have seen the others holding theirs),
     * stops the server for OUTAGE_MS while records flow, starts it again, and waits until records are
     * processed on every shard after the restart, every worker holds its session again and every
     * record written was processed.
     */
    const restartUnderFleet = async (options: {
      readonly timing: FleetTiming;
      readonly workers: readonly string[];
      readonly shards: number;
      readonly seenBeforeRestart: boolean;
      /** How long to keep records flowing after the fleet resumed. */
      readonly afterResumeMs: number;
    }): Promise<RestartRun> => {
      const running = stream;
      const database = postgres;
      if (database === undefined || running === undefined) throw new Error('the setup did not run');
      runs += 1;
      const streamName = `restart-${runs}`;
      const applicationName = `restart-${runs}-${Date.now()}`;
      // The records of this fleet's stream only (the emulator, and its record of what was written, are shared).
      running.written.length = 0;
      await running.create(streamName, options.shards);
      const fleet = new FleetHarness({
        dir: mkdtempSync(join(tmpdir(), 'kcl-fleet-restart-')),
        store: { kind: 'postgres', url: database.url },
        kinesisEndpoint: running.emulator.endpoint,
        streamName,
        applicationName,
        timing: options.timing,
        consumer: { sessionLiveness: true },
      });
      fleets.push(fleet);
      onTestFailed(() => {
        const lines = fleet.processed();
        const lastByShard = new Map<string, { w: string; t: number }>();
        for (const line of lines) lastByShard.set(line.s, { w: line.w, t: line.t });
        process.stderr.write(
          `fleet diagnostics: written ${running.written.length}, distinct ${fleet.distinctCount()}, last record per shard ${JSON.stringify(
            [...lastByShard].map(([shard, last]) => [shard, last.w, Math.round(now() - last.t)]),
          )} ms ago\nlast events:\n${fleet.events
            .slice(-30)
            .map(
              (event) =>
                `  ${Math.round(now() - event.at)} ms ago ${event.workerId} ${event.type} ${event.leaseKey ?? ''}`,
            )
            .join('\n')}\n`,
        );
        for (const workerId of options.workers) {
          const stderr = fleet.stderrOf(workerId);
          if (stderr !== '') process.stderr.write(`${workerId} stderr:\n${stderr.slice(-3_000)}\n`);
        }
      });
      for (const workerId of options.workers) await fleet.spawn(workerId);
      await waitFor(balanced(fleet, options.workers, options.shards), 30_000, 'an even spread');
      const observer = await openStore({ kind: 'postgres', url: database.url }, applicationName);
      observers.push(observer);
      const liveWorkers = async (): Promise<number> =>
        (await observer.store.workers.liveSessions?.([...options.workers]).catch(() => new Set<string>()))
          ?.size ?? 0;
      // Session liveness is on: every worker holds its session.
      await waitFor(
        async () => (await liveWorkers()) === options.workers.length,
        10_000,
        'every worker’s session',
      );
      if (options.seenBeforeRestart) {
        const lastReady = Math.max(
          ...fleet.events.filter((event) => event.type === 'ready').map((event) => event.at),
        );
        const seenBy = seenHoldingSessionBy(lastReady, options.timing);
        await waitFor(() => now() > seenBy, 20_000, 'every worker to have seen the others');
      }

      const producer = produceContinuously(running, streamName, 50, 50);
      await waitFor(() => fleet.processedCount() >= 1_000, 30_000, 'records flowing');

      const stoppedAt = now();
      await database.stop();
      await new Promise((resolve) => setTimeout(resolve, OUTAGE_MS));
      await database.start();
      const restartedAt = now();
      const writtenBeforeRestart = running.written.length;

      // The fleet resumes: every shard has records processed after the restart, and every worker holds
      // its session again.
      const shards = (await running.openShards(streamName)).map((shard) => shard.ShardId ?? '');
      await waitFor(
        () => {
          const lines = fleet.processed();
          return shards.every((shardId) => lines.some((line) => line.s === shardId && line.t > restartedAt));
        },
        30_000,
        'records on every shard after the restart',
      );
      const resumedAt = Math.min(
        ...fleet
          .processed()
          .filter((line) => line.t > restartedAt)
          .map((line) => line.t),
      );
      await waitFor(
        async () => (await liveWorkers()) === options.workers.length,
        15_000,
        'every worker’s session again',
      );
      await new Promise((resolve) => setTimeout(resolve, options.afterResumeMs));

      await producer.stop();
      await waitFor(() => fleet.distinctCount() >= running.written.length, 60_000, 'every record');
      // Records written after the restart were processed too, not only the backlog.
      expect(running.written.length).toBeGreaterThan(writtenBeforeRestart);
      const stoppingAt = now();
      await fleet.stopAll();
      const result = verify(running.written, fleet.processed());
      const overlaps = fleet.concurrentOwners();
      process.stderr.write(
        `postgres restart (expiry ${options.timing.leaseExpiryMs} ms): down ${Math.round(restartedAt - stoppedAt)} ms; ` +
          `first record ${Math.round(resumedAt - restartedAt)} ms after the restart; written ${result.written}, ` +
          `lost ${result.lost}, order violations ${result.orderViolations}, duplicates ${result.duplicates}, ` +
          `batches of one shard overlapping on two workers ${overlaps.length}\n`,
      );
      // Each worker saw its own session end and attached a new one.
      for (const workerId of options.workers) {
        expect(fleet.stderrOf(workerId), workerId).toContain('this worker lost its database session');
      }
      return { fleet, result, stoppedAt, restartedAt, resumedAt, stoppingAt };
    };

    it('short expiry (1 s, expired during the outage): loses nothing, keeps every key in order, resumes', async () => {
      const { result } = await restartUnderFleet({
        timing: FLEET_TIMINGS.processes,
        workers: ['w1', 'w2', 'w3'],
        shards: 4,
        seenBeforeRestart: false,
        afterResumeMs: 0,
      });
      expect(result.lost).toBe(0);
      expect(result.orderViolations).toBe(0);
    });

    it('default expiry (45 s, outlasting the outage): nobody is taken for dead, no lease moves, nothing is processed twice', async () => {
      const { fleet, result, stoppedAt, stoppingAt } = await restartUnderFleet({
        timing: DEFAULT_TIMING,
        workers: ['w1', 'w2'],
        shards: 2,
        // Each worker has seen the other holding its session: a worker that judged by the restart
        // would take the other's lease.
        seenBeforeRestart: true,
        // A few liveness checks after every session is back.
        afterResumeMs: 3_000,
      });
      const moves = fleet.events.filter(
        (event) =>
          event.at > stoppedAt &&
          event.at < stoppingAt &&
          ['lease-taken', 'lease-lost', 'lease-released', 'lease-handoff'].includes(event.type),
      );
      expect(moves.map((event) => `${event.workerId} ${event.type} ${event.leaseKey}`)).toEqual([]);
      expect(result).toMatchObject({ lost: 0, orderViolations: 0, duplicates: 0 });
    });
  },
);
