import type { Lease, LeaseStore } from '@kcl/core';
import { ExtendedSequenceNumber, leasesEqual } from '@kcl/core';
import { afterAll, describe, expect, it } from 'vitest';
import {
  createMigratingLeaseStore,
  cutOverLiveMigration,
  exactCopyOf,
  liveMigrationStatus,
  startLiveMigration,
} from '../src/index.js';
import { intercepted } from './support/intercepted.js';
import { openStorePairs } from './support/store-pairs.js';

// Mirroring must bring every target copy in sync and keep it there: a copy that is behind the source
// (its mirror was lost, or a plain worker wrote the source) is repaired from the source, a copy is
// never moved backwards, and `kcl-migrate --live` may run again at any moment.

const pairs = await openStorePairs();
afterAll(() => pairs.close());

const esn = (value: string) => ExtendedSequenceNumber.of(value);

function ok(result: { ok: boolean; lease?: Lease; reason?: string }): Lease {
  if (!result.ok || result.lease === undefined) throw new Error(`the write lost: ${result.reason}`);
  return result.lease;
}

async function expectExactCopy(from: LeaseStore, to: LeaseStore, leaseKey: string): Promise<Lease> {
  const source = (await from.leases.get(leaseKey)) as Lease;
  const copy = await to.leases.get(leaseKey);
  expect(copy, `${leaseKey} has no target copy`).not.toBeNull();
  expect(
    leasesEqual(copy as Lease, { ...source, ...exactCopyOf(source) } as Lease),
    `${leaseKey}: target ${JSON.stringify(copy)} is not the source ${JSON.stringify(source)}`,
  ).toBe(true);
  return source;
}

/**
 * The store with a listing (`leases.list`, `admin.scan`) that reads now and answers when `release` is
 * called (a slow scan).
 */
function slowListing(store: LeaseStore) {
  let read = false;
  let release: () => void = () => undefined;
  const gate = new Promise<void>((resolve) => {
    release = resolve;
  });
  const wrapped = intercepted(store, async (operation, call) => {
    const result = await call();
    if (operation === 'leases.list' || operation === 'admin.scan') {
      read = true;
      await gate;
    }
    return result;
  });
  return { store: wrapped, hasRead: () => read, release: () => release() };
}

async function until(condition: () => boolean): Promise<void> {
  for (let turn = 0; turn < 2_000 && !condition(); turn++) await new Promise((r) => setTimeout(r, 5));
  if (!condition()) throw new Error('condition never held');
}

describe.each(pairs.kinds)('mirroring converges ($name)', (kind) => {
  it.skipIf(kind.skip !== null)(
    'a --live run that read the source before mirroring moved a copy ahead never puts the older copy back',
    async () => {
      const { from, to, newFrom, newTo } = await kind.open('rerun');
      await from.leases.create({
        leaseKey: 'shard-1',
        checkpoint: esn('5'),
        owner: 'worker-1',
        leaseCounter: 20,
      });
      await startLiveMigration({ from, to });
      const worker = createMigratingLeaseStore({ from: newFrom(), to: newTo() });
      const at21 = ok(await worker.leases.renew('shard-1', 20));
      await expectExactCopy(from, to, 'shard-1');

      // `kcl-migrate --live` again: it reads the source (counter 21) …
      const listing = slowListing(from);
      const rerun = startLiveMigration({ from: listing.store, to });
      await until(listing.hasRead);
      // … mirroring moves the lease and its copy to 22 meanwhile …
      const at22 = ok(await worker.leases.renew('shard-1', at21.leaseCounter));
      listing.release();
      await rerun;

      // … and the copy stays at 22: never backwards.
      expect((await to.leases.get('shard-1'))?.leaseCounter).toBe(at22.leaseCounter);
      await expectExactCopy(from, to, 'shard-1');
      const before = worker.mirrorStatistics();
      ok(await worker.leases.checkpoint('shard-1', at22.leaseCounter, { checkpoint: esn('9') }));
      expect(worker.mirrorStatistics().mirrored).toBe(before.mirrored + 1);
      expect(worker.mirrorStatistics().lagging).toBe(0);
      await expectExactCopy(from, to, 'shard-1');
    },
  );

  it.skipIf(kind.skip !== null)(
    'started in the runbook’s order (plain workers, --live, rolling restart), every copy gets in sync',
    async () => {
      const { from, to, newFrom, newTo } = await kind.open('runbook-order');
      // Plain workers run on the source.
      const plain = newFrom();
      const held = new Map<string, number>();
      let free = 0;
      for (const leaseKey of ['shard-1', 'shard-2', 'shard-3', 'shard-4']) {
        const created = ok(await plain.leases.create({ leaseKey, checkpoint: esn('1') }));
        if (leaseKey === 'shard-4') free = created.leaseCounter;
        else
          held.set(
            leaseKey,
            ok(await plain.leases.take(leaseKey, created.leaseCounter, 'worker-1')).leaseCounter,
          );
      }
      // `kcl-migrate --live` copies every lease …
      expect(await startLiveMigration({ from, to })).toMatchObject({ created: 4 });
      // … and the plain workers keep writing, so the copies fall behind.
      for (const [leaseKey, counter] of held) {
        const renewed = ok(await plain.leases.renew(leaseKey, counter));
        held.set(
          leaseKey,
          ok(await plain.leases.checkpoint(leaseKey, renewed.leaseCounter, { checkpoint: esn('50') }))
            .leaseCounter,
        );
      }
      ok(await plain.leases.take('shard-4', free, 'worker-2'));
      const behind = await liveMigrationStatus({ from, to });
      expect(behind).toMatchObject({ copiesInSync: 0, copiesBehind: 4, copiesMissing: 0 });
      expect(behind.nextStep).toContain('kcl-migrate --live');

      // The rolling restart: worker-1 comes back on the migrating store and carries on with its leases.
      const migrating = createMigratingLeaseStore({ from: newFrom(), to: newTo() });
      const renewals = [...held].map(([leaseKey, leaseCounter]) => ({ leaseKey, leaseCounter }));
      const renewed = await migrating.leases.renewMany(renewals.slice(0, 2));
      for (const result of renewed) ok(result as { ok: boolean; lease?: Lease });
      ok(await migrating.leases.renew('shard-3', held.get('shard-3') as number));
      for (const leaseKey of ['shard-1', 'shard-2', 'shard-3']) await expectExactCopy(from, to, leaseKey);
      expect(migrating.mirrorStatistics()).toMatchObject({ repaired: 3, lagging: 0 });

      // A lease nobody writes stays behind until `--live` runs again, and status says so.
      const status = await liveMigrationStatus({ from, to });
      expect(status).toMatchObject({ copiesInSync: 3, copiesBehind: 1 });
      expect(status.nextStep).toContain('kcl-migrate --live');
      expect(await startLiveMigration({ from, to })).toMatchObject({ replaced: 1, inSync: 3 });
      await expectExactCopy(from, to, 'shard-4');
      const synced = await liveMigrationStatus({ from, to });
      expect(synced).toMatchObject({ copiesInSync: 4, copiesBehind: 0, copiesMissing: 0 });
      expect(synced.nextStep).toContain('kcl-migrate cutover');

      // From now on every mirrored write is taken as it is.
      const next = ok(
        await migrating.leases.renew('shard-3', (await from.leases.get('shard-3'))?.leaseCounter as number),
      );
      expect((await to.leases.get('shard-3'))?.leaseCounter).toBe(next.leaseCounter);
    },
  );

  it.skipIf(kind.skip !== null)(
    'after complete, status shows the workers as the target’s registry has them',
    async () => {
      const { from, to, newFrom, newTo } = await kind.open('status-complete');
      await from.leases.create({ leaseKey: 'shard-1', checkpoint: esn('1') });
      const worker = createMigratingLeaseStore({ from: newFrom(), to: newTo(), phaseRefreshMs: 1 });
      await worker.workers.heartbeat('worker-1');
      await worker.workers.heartbeat('worker-1');
      await startLiveMigration({ from, to });
      await cutOverLiveMigration({ from, to, watchMs: 1, phaseRefreshMs: 1, settleMarginMs: 0 });
      expect(await worker.refreshPhase()).toBe('complete');
      // Complete: the worker heartbeats in the target only; the source's registry keeps its old entry.
      let record = await worker.workers.heartbeat('worker-1');
      record = await worker.workers.heartbeat('worker-1');
      const inTarget = (await to.workers.list()).find((entry) => entry.workerId === 'worker-1');
      expect(inTarget?.heartbeat).toBe(record.heartbeat);

      const status = await liveMigrationStatus({ from, to });
      expect(status.phase).toBe('complete');
      expect(status.workers).toEqual([
        expect.objectContaining({
          workerId: 'worker-1',
          registries: ['target'],
          migrating: true,
          phase: 'complete',
          heartbeat: inTarget?.heartbeat,
        }),
      ]);
    },
  );
});
