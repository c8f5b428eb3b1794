import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Lease } from '@kcl/core';
import {
  cutOverLiveMigration,
  isSealedLease,
  liveMigrationStatus,
  startLiveMigration,
} from '@kcl/store-migrate';
import type { LeaseStoreLocation } from '@kcl/stores';
import type { RunningEmulator } from '@kcl/testkit';
import { startDynalite } from '@kcl/testkit';
import { afterAll, beforeAll, describe, expect, it, onTestFailed } from 'vitest';
import { type OpenedStore, openStore } from '../src/store-config.js';
import { checkPostgres, createPostgresDatabase } from './support/databases.js';
import { FleetHarness, verify, waitFor } from './support/harness.js';
import { startTestStream, type TestStream } from './support/stream.js';

// The issue's acceptance check for the live migration: a consuming fleet of worker processes moves
// from DynamoDB to PostgreSQL while records keep arriving, in the runbook's order — plain workers,
// `kcl-migrate --live`, a rolling restart onto the migrating store (one worker is killed with kill -9
// while mirroring), `--live` run again, the copies in sync, the cut-over, then a rolling restart onto
// the plain target store and a graceful stop. Nothing may be lost, no key processed out of order, and
// every lease must end in the target at or beyond the last record processed on its shard.

const postgres = await checkPostgres();

const PHASE_REFRESH_MS = 300;

describe.skipIf(!postgres.available)('a live migration under a running fleet', () => {
  let stream: TestStream;
  let dynalite: RunningEmulator;
  let database: { url: string; drop: () => Promise<void> };
  const opened: OpenedStore[] = [];

  beforeAll(async () => {
    [stream, dynalite, database] = await Promise.all([
      startTestStream(),
      startDynalite({ separateProcess: true }),
      createPostgresDatabase(),
    ]);
  });
  afterAll(async () => {
    for (const handle of opened) await handle.close();
    await stream?.stop();
    await dynalite?.stop();
    await database?.drop();
  });

  it('loses nothing, keeps every key in order and leaves every lease at or beyond its last record', async () => {
    const streamName = `live-migration-${Date.now()}`;
    const applicationName = `live-${Date.now()}`;
    const source: LeaseStoreLocation = {
      kind: 'dynamo',
      endpoint: dynalite.endpoint,
      region: dynalite.region,
    };
    const target: LeaseStoreLocation = { kind: 'postgres', url: database.url };
    const migrating = {
      kind: 'migrating',
      from: source,
      to: target,
      phaseRefreshMs: PHASE_REFRESH_MS,
    } as const;
    const open = async (location: LeaseStoreLocation) => {
      const handle = await openStore(location, applicationName);
      opened.push(handle);
      return handle.store;
    };
    const from = await open(source);
    const to = await open(target);
    // The tool's stores (`kcl-migrate` runs in this process; it is a library call underneath).
    const stores = { from, to };

    await stream.create(streamName, 4);
    const harness = new FleetHarness({
      dir: mkdtempSync(join(tmpdir(), 'kcl-live-migration-')),
      store: source,
      kinesisEndpoint: stream.emulator.endpoint,
      streamName,
      applicationName,
    });
    onTestFailed(() => {
      process.stderr.write(
        `live migration diagnostics: written ${stream.written.length}, distinct processed ${harness.distinctCount()}\n` +
          `last events:\n${harness.events
            .slice(-40)
            .map((event) => `  ${event.workerId} ${event.type} ${event.leaseKey ?? ''}`)
            .join('\n')}\n`,
      );
      for (const workerId of [
        'plain-1',
        'plain-2',
        'migrating-1',
        'migrating-2',
        'migrating-3',
        'target-1',
      ]) {
        const stderr = harness.stderrOf(workerId);
        if (stderr !== '') process.stderr.write(`${workerId} stderr:\n${stderr.slice(-3_000)}\n`);
      }
    });

    let producing = true;
    const producer = (async () => {
      while (producing) {
        await stream.produce(streamName, 60, 60);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    })();
    const processedAtLeast = (count: number, what: string) =>
      waitFor(() => harness.processedCount() >= count, 30_000, what);

    try {
      // Plain workers on DynamoDB.
      await Promise.all([harness.spawn('plain-1'), harness.spawn('plain-2')]);
      await processedAtLeast(300, 'the plain fleet processing');

      // 1. `kcl-migrate --live`: guard and backfill the target while the plain workers keep writing.
      await startLiveMigration(stores);

      // 2. Rolling restart onto the migrating store.
      await harness.spawn('migrating-1', migrating);
      await harness.stop('plain-1');
      await harness.spawn('migrating-2', migrating);
      await harness.stop('plain-2');
      await harness.spawn('migrating-3', migrating);
      let seen = harness.processedCount();
      await processedAtLeast(seen + 300, 'the migrating fleet processing');

      // A migrating worker dies without releasing anything while the fleet mirrors.
      await waitFor(() => harness.leasesOf('migrating-2').size > 0, 15_000, 'migrating-2 to hold a lease');
      await harness.kill('migrating-2');
      seen = harness.processedCount();
      await processedAtLeast(seen + 300, 'the rest of the fleet processing after the kill');

      // Mirroring alone brings every copy in sync (the plain workers wrote the source after
      // `--live` copied it) …
      const inSync = async () => {
        const status = await liveMigrationStatus(stores);
        return status.copiesBehind === 0 && status.copiesMissing === 0 && status.unmovedLeases === 4;
      };
      await waitFor(inSync, 15_000, 'mirroring to bring every target copy in sync');
      // … and `--live` may run again at any moment without moving one backwards.
      await startLiveMigration(stores);
      await waitFor(inSync, 15_000, 'every target copy in sync after --live ran again');

      // 3. The cut-over, with the fleet running.
      const report = await cutOverLiveMigration({
        ...stores,
        watchMs: 1_500,
        phaseRefreshMs: PHASE_REFRESH_MS,
        settleMarginMs: 500,
      });
      expect(report.preflight?.problems).toEqual([]);
      expect(report.takenSeals).toEqual([]);
      expect(report.moved + report.alreadyMoved).toBe(4);
      seen = harness.processedCount();
      await processedAtLeast(seen + 300, 'the fleet processing on the target');

      // 4. Rolling restart onto the plain target store, then a graceful stop.
      await harness.spawn('target-1', target);
      await harness.stop('migrating-1');
      await harness.stop('migrating-3');
      seen = harness.processedCount();
      await processedAtLeast(seen + 200, 'the plain target worker processing');
    } finally {
      producing = false;
      await producer;
    }
    await waitFor(() => harness.distinctCount() >= stream.written.length, 30_000, 'every record processed');
    await harness.stopAll();

    const processed = harness.processed();
    const result = verify(stream.written, processed);
    expect(result.lost).toBe(0);
    expect(result.orderViolations).toBe(0);

    // Every lease lives in the target, at or beyond the last record processed on its shard.
    const lastProcessed = new Map<string, bigint>();
    for (const line of processed) {
      const sequence = BigInt(line.q);
      if (sequence > (lastProcessed.get(line.s) ?? -1n)) lastProcessed.set(line.s, sequence);
    }
    const leases = await to.leases.list();
    expect(leases).toHaveLength(4);
    // The shards with a lease are exactly the shards records were processed from: none processed nothing.
    expect(leases.map((lease) => lease.leaseKey).sort()).toEqual([...lastProcessed.keys()].sort());
    for (const lease of leases) {
      const last = lastProcessed.get(lease.leaseKey) ?? -1n;
      expect(lease.checkpoint.isSentinel, `${lease.leaseKey}: ${lease.checkpoint.toString()}`).toBe(false);
      expect(
        BigInt(lease.checkpoint.sequenceNumber) >= last,
        `${lease.leaseKey} checkpointed at ${lease.checkpoint.toString()}, last processed ${last}`,
      ).toBe(true);
    }
    expect((await from.leases.list()).every((lease: Lease) => isSealedLease(lease))).toBe(true);
    expect(await to.admin.getMigrationMarker()).toBeNull();
    const status = await liveMigrationStatus(stores);
    expect(status).toMatchObject({ phase: 'complete', targetGuarded: false, takenSeals: [] });
    // After complete, status shows the target's registry (the one workers write): everyone stopped.
    expect(status.workers.filter((worker) => worker.workerId !== 'migrating-2')).toEqual([]);
  }, 60_000);
});
