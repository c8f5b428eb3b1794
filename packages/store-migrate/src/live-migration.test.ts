import type { Lease, LeaseStore } from '@kcl/core';
import {
  ExtendedSequenceNumber,
  isKclError,
  LeaseDataError,
  LeaseStoreError,
  leasesEqual,
  seededRandom,
} from '@kcl/core';
import { createFaultyLeaseStore, createMemoryLeaseStore, ManualClock, settle } from '@kcl/testkit';
import { describe, expect, it } from 'vitest';
import { abortLiveMigration } from './abort-live-migration.js';
import { cutOverLiveMigration } from './cut-over-live-migration.js';
import { readLiveMigrationState } from './live-migration.js';
import { liveMigrationStatus } from './live-migration-status.js';
import { createMigratingLeaseStore } from './migrating-lease-store.js';
import { LiveMigrationRefusedError, MigrationInterruptedError } from './migration-errors.js';
import { isSealedLease, markerTag, SEAL_OWNER } from './migration-phase.js';
import { moveLease } from './move-lease.js';
import { exactCopyOf } from './plan-lease-copy.js';
import { startLiveMigration } from './start-live-migration.js';

const esn = (value: string | number) => ExtendedSequenceNumber.of(String(value));

function stores(applicationName = 'billing') {
  return {
    from: createMemoryLeaseStore({ applicationName }),
    to: createMemoryLeaseStore({ applicationName }),
  };
}

async function seed(store: LeaseStore, count: number): Promise<Lease[]> {
  const leases: Lease[] = [];
  for (let index = 0; index < count; index++) {
    const result = await store.leases.create({
      leaseKey: `shard-${index}`,
      checkpoint: esn(index * 10),
      owner: index % 2 === 0 ? `worker-${index % 3}` : null,
      leaseCounter: 100 + index,
      parentShardIds: index > 0 ? [`shard-${index - 1}`] : [],
    });
    if (result.ok) leases.push(result.lease);
  }
  return leases;
}

/**
 * The store with one stored row that cannot be read (as a store reports a corrupt row): the listing
 * skips it, reading it fails, and a scan reports it.
 */
function withUnreadableRow(store: LeaseStore, leaseKey: string): LeaseStore {
  const problem = 'checkpoint "banana" is not a sequence number';
  return {
    ...store,
    leases: {
      ...store.leases,
      async list(options) {
        return (await store.leases.list(options)).filter((lease) => lease.leaseKey !== leaseKey);
      },
      async get(key, options) {
        if (key === leaseKey) throw new LeaseDataError(store.description, key, problem);
        return store.leases.get(key, options);
      },
    },
    admin: {
      ...store.admin,
      async scan(options) {
        const scan = await store.admin.scan(options);
        return {
          leases: scan.leases.filter((lease) => lease.leaseKey !== leaseKey),
          unreadable: [...scan.unreadable, { leaseKey, problem }],
        };
      },
    },
  };
}

describe('startLiveMigration', () => {
  it('guards the target and copies every lease exactly, owners and counters included', async () => {
    const { from, to } = stores();
    const leases = await seed(from, 5);
    await to.leases.create({ leaseKey: 'shard-3', checkpoint: esn(1), leaseCounter: 2 });
    const report = await startLiveMigration({ from, to, sourceName: 'the source' });
    expect(report).toEqual({
      sourceLeases: 5,
      created: 4,
      replaced: 1,
      inSync: 0,
      changing: 0,
      gone: 0,
      removedSeals: 0,
      unreadable: [],
    });
    for (const lease of leases)
      expect(leasesEqual((await to.leases.get(lease.leaseKey)) as Lease, lease)).toBe(true);
    const guard = await to.admin.getMigrationMarker();
    expect(guard?.migratedTo).toContain('live migration from the source');
    expect(markerTag(guard?.migratedTo ?? '')).toBe('pending');
    expect((await startLiveMigration({ from, to })).inSync).toBe(5);
  });

  it('refuses once the cut-over has begun, and seals left by an earlier migration unless forced', async () => {
    const { from, to } = stores();
    await seed(from, 2);
    await from.leases.create({ leaseKey: 'old', checkpoint: esn(1), owner: SEAL_OWNER });
    await expect(startLiveMigration({ from, to })).rejects.toThrow(
      /sealed by an earlier migration; pass --force/,
    );
    expect((await startLiveMigration({ from, to, force: true })).removedSeals).toBe(1);
    expect(await from.leases.get('old')).toBeNull();
    await cutOverLiveMigration({ from, to, watchMs: 1, phaseRefreshMs: 1, settleMarginMs: 0 });
    await expect(startLiveMigration({ from, to })).rejects.toSatisfy(LiveMigrationRefusedError.is);
  });
});

describe('moveLease', () => {
  it('carries over a write that lands between the copy and the seal', async () => {
    const { from, to } = stores();
    const flakyTarget = createFaultyLeaseStore(to);
    const worker = createMigratingLeaseStore({ from, to: flakyTarget });
    const created = await worker.leases.create({ leaseKey: 'shard-1', checkpoint: esn(1) });
    if (!created.ok) throw new Error('create failed');
    const taken = await worker.leases.take('shard-1', created.lease.leaseCounter, 'worker-a');
    if (!taken.ok) throw new Error('take failed');
    await to.leases.delete('shard-1'); // no copy yet: the mover writes one
    let interleaved: Lease | null = null;
    const target: LeaseStore = {
      ...to,
      leases: {
        ...to.leases,
        async create(init) {
          const result = await to.leases.create(init);
          if (interleaved === null) {
            // The worker checkpoints right after the copy is written, and its mirror fails.
            flakyTarget.faults.failNext(1);
            const written = await worker.leases.checkpoint('shard-1', taken.lease.leaseCounter, {
              checkpoint: esn(99),
            });
            if (!written.ok) throw new Error('checkpoint failed');
            interleaved = written.lease;
          }
          return result;
        },
      },
    };
    expect(await moveLease(from, target, 'shard-1')).toBe('moved');
    const moved = (await to.leases.get('shard-1')) as Lease;
    expect(moved.checkpoint.sequenceNumber).toBe('99');
    expect(leasesEqual(moved, interleaved as unknown as Lease)).toBe(true);
    const renewed = await worker.leases.renew('shard-1', (interleaved as unknown as Lease).leaseCounter);
    expect(renewed.ok).toBe(true);
  });

  it('reports a lease that is gone or already moved', async () => {
    const { from, to } = stores();
    expect(await moveLease(from, to, 'nothing')).toBe('gone');
    await from.leases.create({ leaseKey: 'shard-1', checkpoint: esn(1) });
    expect(await moveLease(from, to, 'shard-1')).toBe('moved');
    expect(await moveLease(from, to, 'shard-1')).toBe('already-moved');
  });
});

describe('cutOverLiveMigration', () => {
  it('waits for every worker to read each phase before acting on it (manual clock)', async () => {
    const { from, to } = stores();
    await seed(from, 3);
    const clock = new ManualClock();
    const stages: Array<[string, number]> = [];
    const done = cutOverLiveMigration({
      from,
      to,
      clock,
      watchMs: 1_000,
      phaseRefreshMs: 500,
      settleMarginMs: 100,
      onStage: (stage) => stages.push([stage, clock.monotonicNow()]),
    });
    await clock.advance(999);
    expect(await from.admin.getMigrationMarker()).toBeNull();
    await clock.advance(1);
    await settle();
    expect(markerTag((await from.admin.getMigrationMarker())?.migratedTo ?? '')).toBe('cutover');
    await clock.advance(599);
    expect((await from.leases.list()).some(isSealedLease)).toBe(false);
    await clock.advance(1);
    await settle();
    expect((await from.leases.list()).every(isSealedLease)).toBe(true);
    expect(markerTag((await from.admin.getMigrationMarker())?.migratedTo ?? '')).toBe('target');
    expect(markerTag((await to.admin.getMigrationMarker())?.migratedTo ?? '')).toBe('pending');
    await clock.advance(599);
    expect(markerTag((await from.admin.getMigrationMarker())?.migratedTo ?? '')).toBe('target');
    await clock.advance(1);
    const report = await done;
    expect(report).toMatchObject({ startedIn: 'mirroring', moved: 3, removedStaleCopies: 0 });
    expect(markerTag((await from.admin.getMigrationMarker())?.migratedTo ?? '')).toBe('complete');
    expect(await to.admin.getMigrationMarker()).toBeNull();
    expect(stages.map(([stage]) => stage)).toEqual([
      'preflight',
      'cutover-marked',
      'settling',
      'moving',
      'cleaning',
      'target-marked',
      'settling',
      'complete',
    ]);
    expect(stages.find(([stage]) => stage === 'moving')?.[1]).toBe(1_600);
  });

  it('refuses while a worker without the migrating store is alive; --force goes ahead', async () => {
    const { from, to } = stores();
    await seed(from, 2);
    const migrating = createMigratingLeaseStore({ from, to, phaseRefreshMs: 5 });
    let beating = true;
    const heartbeats = (async () => {
      while (beating) {
        await from.workers.heartbeat('plain-worker');
        await migrating.workers.heartbeat('migrating-worker');
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
    })();
    try {
      const refused = cutOverLiveMigration({ from, to, watchMs: 60, phaseRefreshMs: 1, settleMarginMs: 0 });
      await expect(refused).rejects.toThrow(
        /worker "plain-worker" heartbeats on the source without the migrating store/,
      );
      expect(await from.admin.getMigrationMarker()).toBeNull();
      const forced = await cutOverLiveMigration({
        from,
        to,
        watchMs: 60,
        phaseRefreshMs: 1,
        settleMarginMs: 0,
        force: true,
      });
      expect(forced.preflight?.migratingWorkers).toEqual(['migrating-worker']);
      expect(forced.moved).toBe(2);
    } finally {
      beating = false;
      await heartbeats;
    }
  });

  it('resumes an interrupted cut-over and removes stale target copies', async () => {
    const { from, to } = stores();
    await seed(from, 4);
    await startLiveMigration({ from, to });
    await to.leases.create({ leaseKey: 'stale', checkpoint: esn(1) });
    const interrupt = new AbortController();
    const first = cutOverLiveMigration({
      from,
      to,
      watchMs: 1,
      phaseRefreshMs: 1,
      settleMarginMs: 0,
      signal: interrupt.signal,
      onStage: (stage) => {
        if (stage === 'moving') interrupt.abort();
      },
    });
    const interrupted = await first.catch((error: unknown) => error);
    expect(MigrationInterruptedError.is(interrupted)).toBe(true);
    expect(isKclError(interrupted, 'MIGRATION_INTERRUPTED')).toBe(true);
    expect((interrupted as Error).message).toMatch(/interrupted; run the same command again/);
    expect((await readLiveMigrationState(from, to)).phase).toBe('cutover');
    const status = await liveMigrationStatus({ from, to });
    expect(status).toMatchObject({ phase: 'cutover', sourceLeases: 4, targetGuarded: true });
    expect(status.nextStep).toContain('run `kcl-migrate cutover` again');
    const second = await cutOverLiveMigration({ from, to, phaseRefreshMs: 1, settleMarginMs: 0 });
    expect(second).toMatchObject({ startedIn: 'cutover', removedStaleCopies: 1, preflight: null });
    expect(second.moved + second.alreadyMoved).toBe(4);
    expect(await to.leases.get('stale')).toBeNull();
    expect((await liveMigrationStatus({ from, to })).phase).toBe('complete');
  });

  it('refuses to start while source lease rows cannot be read, and changes nothing', async () => {
    const { from: inner, to } = stores();
    const [, unreadable] = await seed(inner, 3);
    const from = withUnreadableRow(inner, 'shard-1');
    const started = await startLiveMigration({ from, to });
    expect(started.unreadable.map((row) => row.leaseKey)).toEqual(['shard-1']);
    expect(started.sourceLeases).toBe(2);
    // The copy the backfill wrote before the row went bad: it must not be taken for a stale one.
    await to.leases.create(exactCopyOf(unreadable as Lease));

    const refusal = await cutOverLiveMigration({
      from,
      to,
      watchMs: 1,
      phaseRefreshMs: 1,
      settleMarginMs: 0,
    }).catch((error: unknown) => error);
    expect(LiveMigrationRefusedError.is(refusal)).toBe(true);
    expect(isKclError(refusal, 'MIGRATION_REFUSED')).toBe(true);
    expect((refusal as LiveMigrationRefusedError).problems[0]).toMatch(
      /1 source lease rows cannot be read \("shard-1": checkpoint "banana"/,
    );
    expect((await readLiveMigrationState(from, to)).phase).toBe('mirroring');
    expect((await inner.leases.list()).some(isSealedLease)).toBe(false);
    expect(await to.leases.get('shard-1')).not.toBeNull();
    const status = await liveMigrationStatus({ from, to });
    expect(status.unreadableSourceRows.map((row) => row.leaseKey)).toEqual(['shard-1']);
    expect(status.nextStep).toMatch(/^1 source lease rows cannot be read \(shard-1\)/);
  });

  it('refuses to go on with a cut-over begun before a source row became unreadable', async () => {
    const { from: inner, to } = stores();
    await seed(inner, 3);
    await startLiveMigration({ from: inner, to });
    const interrupt = new AbortController();
    const first = cutOverLiveMigration({
      from: inner,
      to,
      watchMs: 1,
      phaseRefreshMs: 1,
      settleMarginMs: 0,
      signal: interrupt.signal,
      onStage: (stage) => {
        if (stage === 'cutover-marked') interrupt.abort();
      },
    });
    await expect(first).rejects.toSatisfy(MigrationInterruptedError.is);
    const from = withUnreadableRow(inner, 'shard-2');
    await expect(cutOverLiveMigration({ from, to, phaseRefreshMs: 1, settleMarginMs: 0 })).rejects.toSatisfy(
      LiveMigrationRefusedError.is,
    );
    expect((await readLiveMigrationState(from, to)).phase).toBe('cutover');
    expect(await to.leases.get('shard-2')).not.toBeNull();
    expect(isSealedLease((await inner.leases.get('shard-2')) as Lease)).toBe(false);
  });

  it('abort clears the guard before the cut-over and refuses after it', async () => {
    const { from, to } = stores();
    await seed(from, 1);
    await startLiveMigration({ from, to });
    await abortLiveMigration({ from, to });
    expect(await to.admin.getMigrationMarker()).toBeNull();
    await cutOverLiveMigration({ from, to, watchMs: 1, phaseRefreshMs: 1, settleMarginMs: 0 });
    await expect(abortLiveMigration({ from, to })).rejects.toThrow(/phase complete/);
  });
});

/**
 * The invariant, tested under load: while workers write through migrating stores and the cut-over
 * moves leases under them, every successful conditional write of a lease is conditioned on a counter
 * no other successful write used (one history per lease across both stores, as on one store), and
 * the lease ends up in the target with the checkpoint of its last successful checkpoint.
 */
describe('the single-history invariant under concurrent writers', () => {
  interface Write {
    readonly leaseKey: string;
    readonly worker: string;
    readonly operation: string;
    readonly before: number;
    readonly after: number;
    readonly checkpoint: string;
  }

  it.each([1, 2, 3, 4, 5, 6])('holds with seed %i', async (seed) => {
    const { from, to } = stores(`invariant-${seed}`);
    const random = seededRandom(seed);
    const leaseCount = 10;
    for (let index = 0; index < leaseCount; index++) {
      await from.leases.create({ leaseKey: `shard-${index}`, checkpoint: esn(0) });
    }
    const writes: Write[] = [];
    const creates = new Map<string, number>();
    let sequence = 1;
    let running = true;

    const worker = async (workerId: string): Promise<void> => {
      // The target fails now and then (so mirrored writes lag behind), which the cut-over must survive.
      const flakyTarget = createFaultyLeaseStore(to);
      const store = createMigratingLeaseStore({ from, to: flakyTarget, phaseRefreshMs: 5 });
      const held = new Map<string, number>();
      while (running) {
        const roll = random();
        if (random() < 0.2) flakyTarget.faults.failNext(1);
        try {
          await store.workers.heartbeat(workerId);
          if (roll < 0.3) {
            const leases = await store.leases.list();
            const lease = leases[Math.floor(random() * leases.length)];
            if (lease !== undefined && !held.has(lease.leaseKey)) {
              const result = await store.leases.take(lease.leaseKey, lease.leaseCounter, workerId);
              if (result.ok) {
                held.set(lease.leaseKey, result.lease.leaseCounter);
                writes.push({
                  leaseKey: lease.leaseKey,
                  worker: workerId,
                  operation: 'take',
                  before: lease.leaseCounter,
                  after: result.lease.leaseCounter,
                  checkpoint: result.lease.checkpoint.toString(),
                });
              }
            }
          } else if (roll < 0.9 && held.size > 0) {
            const keys = [...held.keys()];
            const leaseKey = keys[Math.floor(random() * keys.length)] as string;
            const counter = held.get(leaseKey) as number;
            const operation = roll < 0.55 ? 'renew' : roll < 0.85 ? 'checkpoint' : 'release';
            const result =
              operation === 'renew'
                ? await store.leases.renew(leaseKey, counter)
                : operation === 'checkpoint'
                  ? await store.leases.checkpoint(leaseKey, counter, { checkpoint: esn(sequence++) })
                  : await store.leases.release(leaseKey, counter);
            if (result.ok && operation !== 'release') held.set(leaseKey, result.lease.leaseCounter);
            else held.delete(leaseKey);
            if (result.ok) {
              writes.push({
                leaseKey,
                worker: workerId,
                operation,
                before: counter,
                after: result.lease.leaseCounter,
                checkpoint: result.lease.checkpoint.toString(),
              });
            }
          } else if (roll >= 0.97) {
            const leaseKey = `child-${Math.floor(random() * 4)}`;
            const result = await store.leases.create({
              leaseKey,
              checkpoint: ExtendedSequenceNumber.TRIM_HORIZON,
            });
            if (result.ok) creates.set(leaseKey, (creates.get(leaseKey) ?? 0) + 1);
          }
        } catch (error) {
          // A failed write was not applied; the worker gives up the lease it was writing, as on any store error.
          if (!LeaseStoreError.is(error)) throw error;
          held.clear();
        }
        await new Promise((resolve) => setTimeout(resolve, random() < 0.5 ? 0 : 1));
      }
    };

    // Wait for a number of writes, not for a time: on a loaded machine the workers run slower.
    const writesReach = async (count: number): Promise<void> => {
      while (writes.length < count) await new Promise((resolve) => setTimeout(resolve, 5));
    };
    const workers = ['w0', 'w1', 'w2', 'w3'].map(worker);
    await writesReach(20);
    await startLiveMigration({ from, to, concurrency: 3 });
    await writesReach(writes.length + 20);
    const report = await cutOverLiveMigration({
      from,
      to,
      watchMs: 40,
      phaseRefreshMs: 5,
      settleMarginMs: 10,
      concurrency: 3,
    });
    await writesReach(writes.length + 20);
    running = false;
    await Promise.all(workers);

    expect(report.preflight?.problems).toEqual([]);
    expect(writes.length).toBeGreaterThan(50);
    const byLease = new Map<string, Write[]>();
    for (const write of writes) byLease.set(write.leaseKey, [...(byLease.get(write.leaseKey) ?? []), write]);
    for (const [leaseKey, history] of byLease) {
      const befores = history.map((write) => write.before);
      expect(new Set(befores).size, `a counter of ${leaseKey} was used twice`).toBe(befores.length);
      for (const write of history) expect(write.after).toBe(write.before + 1);
      const last = history.reduce((latest, write) => (write.after > latest.after ? write : latest));
      const final = (await to.leases.get(leaseKey)) as Lease;
      expect(final.leaseCounter).toBe(last.after);
      expect(final.checkpoint.toString(), `the last checkpoint of ${leaseKey} was lost`).toBe(
        last.checkpoint,
      );
      // Leases created once the migration was complete exist in the target only.
      const row = await from.leases.get(leaseKey);
      if (row !== null) expect(isSealedLease(row)).toBe(true);
    }
    for (const [leaseKey, count] of creates) expect(count, `${leaseKey} was created twice`).toBe(1);
    for (const row of await from.leases.list()) expect(isSealedLease(row)).toBe(true);
    expect((await to.leases.list()).length).toBe(leaseCount + creates.size);
    // After the cut-over the copies are exact continuations; none is left behind in the source.
    for (const lease of await to.leases.list()) expect(lease.owner).not.toBe(SEAL_OWNER);
  });
});
