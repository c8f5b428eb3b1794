import type { Lease } from '@kcl/core';
import { ConfigurationError, ExtendedSequenceNumber, LeaseStoreError, leaseFromInit } from '@kcl/core';
import type { MemoryLeaseStore } from '@kcl/testkit';
import { createFaultyLeaseStore, createMemoryLeaseStore, ManualClock } from '@kcl/testkit';
import { describe, expect, it } from 'vitest';
import { migrateLeases } from './migrate-leases.js';
import { pendingMarkerText } from './migration-phase.js';
import { offlineCopyOf } from './plan-lease-copy.js';

async function source(count: number, applicationName = 'billing'): Promise<MemoryLeaseStore> {
  const store = createMemoryLeaseStore({ applicationName });
  for (let index = 0; index < count; index++) {
    await store.leases.create({
      leaseKey: `123456789012:${index % 2 === 0 ? 'orders' : 'refunds'}:1700000000:shardId-${String(index).padStart(12, '0')}`,
      checkpoint: ExtendedSequenceNumber.of(String(1_000 + index), index % 3),
      owner: `worker-${index % 2}`,
      leaseCounter: 10 + index,
    });
  }
  return store;
}

const target = (applicationName = 'billing') => createMemoryLeaseStore({ applicationName });

async function expectCopied(from: MemoryLeaseStore, to: MemoryLeaseStore, keys?: (lease: Lease) => boolean) {
  const expected = (await from.leases.list())
    .filter(keys ?? (() => true))
    .map((lease) => leaseFromInit(offlineCopyOf(lease)));
  expect(await to.leases.list()).toEqual(expected);
}

describe('migrateLeases', () => {
  it('copies, verifies and marks the source', async () => {
    const from = await source(5);
    const to = target();
    const report = await migrateLeases({ from, to, watchMs: 1, migratedTo: 'the new store' });
    expect(report.outcome).toBe('completed');
    expect(report.counts).toEqual({ created: 5, updated: 0, overwritten: 0, unchanged: 0, targetAhead: 0 });
    expect(report.source.owners).toEqual({ 'worker-0': 3, 'worker-1': 2 });
    expect(report.verification?.matching).toBe(5);
    await expectCopied(from, to);
    expect((await from.admin.getMigrationMarker())?.migratedTo).toBe('the new store');
  });

  it('writes nothing in a dry run or when not confirmed', async () => {
    const from = await source(3);
    const to = target();
    expect((await migrateLeases({ from, to, watchMs: 1, dryRun: true })).outcome).toBe('planned');
    const declined = await migrateLeases({ from, to, watchMs: 1, confirm: async () => false });
    expect(declined.outcome).toBe('declined');
    expect(declined.summary).toMatchObject({ leases: 3, create: 3, ownedLeases: 3 });
    expect(await to.leases.list()).toEqual([]);
    expect(await from.admin.getMigrationMarker()).toBeNull();
  });

  it('refuses a source in use, naming who holds what (manual clock)', async () => {
    const from = await source(2);
    const clock = new ManualClock();
    const running = migrateLeases({ from, to: target(), watchMs: 45_001, clock });
    await clock.waitForSleepers(1);
    const [lease] = await from.leases.list();
    await from.leases.renew(lease?.leaseKey ?? '', lease?.leaseCounter ?? 0);
    await clock.advance(45_001);
    const report = await running;
    expect(report.outcome).toBe('refused-live');
    expect(report.notes[0]).toContain(`worker-0 holds ${lease?.leaseKey}`);
  });

  it('finishes an interrupted copy when run again', async () => {
    const from = await source(20);
    const inner = target();
    const to = createFaultyLeaseStore(inner);
    to.faults.failNext(1, { operations: ['leases.create'] });
    await expect(migrateLeases({ from, to, watchMs: 1, concurrency: 1 })).rejects.toSatisfy(
      LeaseStoreError.is,
    );
    const interrupt = new AbortController();
    const aborted = await migrateLeases({
      from,
      to,
      watchMs: 1,
      concurrency: 2,
      signal: interrupt.signal,
      onProgress: (progress) => {
        if (progress.stage === 'copying' && progress.done === 8) interrupt.abort();
      },
    });
    expect(aborted.outcome).toBe('interrupted');
    expect(await from.admin.getMigrationMarker()).toBeNull();
    const partial = (await inner.leases.list()).length;
    expect(partial).toBeGreaterThan(0);
    expect(partial).toBeLessThan(20);

    const resumed = await migrateLeases({ from, to, watchMs: 1 });
    expect(resumed.outcome).toBe('completed');
    expect(resumed.counts.unchanged).toBe(partial);
    expect(resumed.counts.created).toBe(20 - partial);
    await expectCopied(from, inner);
  });

  it('brings a target copy up to date when the source moved on after an earlier copy', async () => {
    const from = await source(2);
    const to = target();
    await migrateLeases({ from, to, watchMs: 1, mark: false });
    const [lease] = await from.leases.list();
    const moved = await from.leases.checkpoint(lease?.leaseKey ?? '', lease?.leaseCounter ?? 0, {
      checkpoint: ExtendedSequenceNumber.of('5000'),
    });
    expect(moved.ok).toBe(true);
    const report = await migrateLeases({ from, to, watchMs: 1 });
    expect(report.counts).toMatchObject({ updated: 1, unchanged: 1 });
    await expectCopied(from, to);
  });

  it('copies one stream of a multi-stream application, and will not mark the source for it', async () => {
    const from = await source(6);
    const to = target();
    const orders = (lease: Lease) => lease.leaseKey.includes(':orders:');
    await expect(migrateLeases({ from, to, watchMs: 1, select: orders })).rejects.toSatisfy(
      ConfigurationError.is,
    );
    const report = await migrateLeases({ from, to, watchMs: 1, select: orders, mark: false });
    expect(report.outcome).toBe('completed');
    await expectCopied(from, to, orders);
    expect(await from.admin.getMigrationMarker()).toBeNull();
  });

  it('respects markers: refuses a source migrated elsewhere or a live migration, clears an old target marker', async () => {
    const from = await source(1);
    const to = target();
    await from.admin.setMigrationMarker({
      migratedTo: 'a MySQL table somewhere else',
      migratedAt: new Date(0),
    });
    const refused = await migrateLeases({ from, to, watchMs: 1 });
    expect(refused.outcome).toBe('refused-marker');
    expect(refused.notes[0]).toContain('already migrated to a MySQL table somewhere else');
    await from.admin.setMigrationMarker(null);

    await to.admin.setMigrationMarker({ migratedTo: pendingMarkerText('x'), migratedAt: new Date(0) });
    expect((await migrateLeases({ from, to, watchMs: 1 })).outcome).toBe('refused-marker');
    await to.admin.setMigrationMarker({ migratedTo: 'where it went last time', migratedAt: new Date(0) });
    const report = await migrateLeases({ from, to, watchMs: 1 });
    expect(report).toMatchObject({ outcome: 'completed', clearedTargetMarker: true, marked: true });
    expect(await to.admin.getMigrationMarker()).toBeNull();
    // Marked to this target: running again is the idempotent re-run, not a refusal.
    expect((await migrateLeases({ from, to, watchMs: 1 })).counts.unchanged).toBe(1);
  });

  it('checks its options before reading anything, and lists every problem at once', async () => {
    const from = await source(2);
    const to = target();
    const error = await migrateLeases({
      from,
      to,
      watchMs: -1,
      concurrency: 0,
      clock: {} as never,
      confirm: 'yes' as never,
    }).catch((thrown: unknown) => thrown);
    expect(ConfigurationError.is(error)).toBe(true);
    expect((error as ConfigurationError).message).toMatch(
      /^@kcl\/store-migrate migrateLeases: invalid configuration/,
    );
    expect((error as ConfigurationError).problems).toEqual([
      'watchMs must be an integer from 0 to ∞, got -1',
      'concurrency must be an integer from 1 to ∞, got 0',
      'clock must be a Clock from @kcl/core (an object with now, monotonicNow, sleep)',
      'confirm must be a function (plan) => Promise<boolean>',
    ]);
    expect(await to.leases.list()).toEqual([]);
    const notStores = await migrateLeases({ from: {} as never, to: undefined as never, watchMs: 1 }).catch(
      (thrown: unknown) => thrown,
    );
    expect((notStores as ConfigurationError).problems).toEqual([
      expect.stringMatching(/^from implements the LeaseStore specification undefined; .* needs v2/),
      'to must be a LeaseStore (specificationVersion v2)',
    ]);
  });
});
