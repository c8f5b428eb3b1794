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
    await store.createLeaseIfAbsent({
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
  const expected = (await from.listLeases())
    .filter(keys ?? (() => true))
    .map((lease) => leaseFromInit(offlineCopyOf(lease)));
  expect(await to.listLeases()).toEqual(expected);
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
    expect((await from.getMigrationMarker())?.migratedTo).toBe('the new store');
  });

  it('writes nothing in a dry run or when not confirmed', async () => {
    const from = await source(3);
    const to = target();
    expect((await migrateLeases({ from, to, watchMs: 1, dryRun: true })).outcome).toBe('planned');
    const declined = await migrateLeases({ from, to, watchMs: 1, confirm: async () => false });
    expect(declined.outcome).toBe('declined');
    expect(declined.summary).toMatchObject({ leases: 3, create: 3, ownedLeases: 3 });
    expect(await to.listLeases()).toEqual([]);
    expect(await from.getMigrationMarker()).toBeNull();
  });

  it('refuses a source in use, naming who holds what (manual clock)', async () => {
    const from = await source(2);
    const clock = new ManualClock();
    const running = migrateLeases({ from, to: target(), watchMs: 45_001, clock });
    await clock.waitForSleepers(1);
    const [lease] = await from.listLeases();
    await from.renewLease(lease?.leaseKey ?? '', lease?.leaseCounter ?? 0);
    await clock.advance(45_001);
    const report = await running;
    expect(report.outcome).toBe('refused-live');
    expect(report.notes[0]).toContain(`worker-0 holds ${lease?.leaseKey}`);
  });

  it('finishes an interrupted copy when run again', async () => {
    const from = await source(20);
    const inner = target();
    const to = createFaultyLeaseStore(inner);
    to.faults.failNext(1, { operations: ['createLeaseIfAbsent'] });
    await expect(migrateLeases({ from, to, watchMs: 1, concurrency: 1 })).rejects.toBeInstanceOf(
      LeaseStoreError,
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
    expect(await from.getMigrationMarker()).toBeNull();
    const partial = (await inner.listLeases()).length;
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
    const [lease] = await from.listLeases();
    const moved = await from.updateCheckpoint(lease?.leaseKey ?? '', lease?.leaseCounter ?? 0, {
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
    await expect(migrateLeases({ from, to, watchMs: 1, select: orders })).rejects.toBeInstanceOf(
      ConfigurationError,
    );
    const report = await migrateLeases({ from, to, watchMs: 1, select: orders, mark: false });
    expect(report.outcome).toBe('completed');
    await expectCopied(from, to, orders);
    expect(await from.getMigrationMarker()).toBeNull();
  });

  it('respects markers: refuses a source migrated elsewhere or a live migration, clears an old target marker', async () => {
    const from = await source(1);
    const to = target();
    await from.setMigrationMarker({ migratedTo: 'a MySQL table somewhere else', migratedAt: new Date(0) });
    const refused = await migrateLeases({ from, to, watchMs: 1 });
    expect(refused.outcome).toBe('refused-marker');
    expect(refused.notes[0]).toContain('already migrated to a MySQL table somewhere else');
    await from.setMigrationMarker(null);

    await to.setMigrationMarker({ migratedTo: pendingMarkerText('x'), migratedAt: new Date(0) });
    expect((await migrateLeases({ from, to, watchMs: 1 })).outcome).toBe('refused-marker');
    await to.setMigrationMarker({ migratedTo: 'where it went last time', migratedAt: new Date(0) });
    const report = await migrateLeases({ from, to, watchMs: 1 });
    expect(report).toMatchObject({ outcome: 'completed', clearedTargetMarker: true, marked: true });
    expect(await to.getMigrationMarker()).toBeNull();
    // Marked to this target: running again is the idempotent re-run, not a refusal.
    expect((await migrateLeases({ from, to, watchMs: 1 })).counts.unchanged).toBe(1);
  });
});
