import type { Lease, LeaseStore, LeaseWriteResult, StoreCallOptions } from '@kcl/core';
import { ConfigurationError, ExtendedSequenceNumber, guardLeaseStore, leasesEqual } from '@kcl/core';
import type { MemoryLeaseStore } from '@kcl/testkit';
import { createFaultyLeaseStore, createMemoryLeaseStore, ManualClock } from '@kcl/testkit';
import { describe, expect, it } from 'vitest';
import { createMigratingLeaseStore } from './migrating-lease-store.js';
import type { LiveMigrationPhase } from './migration-phase.js';
import {
  isSealedLease,
  MIGRATING_WORKER_METADATA,
  PLACEHOLDER_COUNTER,
  pendingMarkerText,
  phaseMarkerText,
  REPAIR_OWNER,
  SEAL_OWNER,
} from './migration-phase.js';
import { moveLease } from './move-lease.js';

const esn = (value: string) => ExtendedSequenceNumber.of(value);

function stores(applicationName = 'billing') {
  const from = createMemoryLeaseStore({ applicationName });
  const to = createMemoryLeaseStore({ applicationName });
  return { from, to };
}

async function setPhase(from: LeaseStore, phase: Exclude<LiveMigrationPhase, 'mirroring'>): Promise<void> {
  await from.admin.setMigrationMarker({
    migratedTo: phaseMarkerText('the target', phase),
    migratedAt: new Date(0),
  });
}

function ok(result: LeaseWriteResult): Lease {
  if (!result.ok) throw new Error(`expected the write to succeed, it lost: ${result.reason}`);
  return result.lease;
}

async function stored(store: MemoryLeaseStore, leaseKey: string): Promise<Lease> {
  const lease = await store.leases.get(leaseKey);
  if (lease === null) throw new Error(`${leaseKey} is not in ${store.description}`);
  return lease;
}

/** A store that records, per call, the signal it was given (`role.method` → signals). */
function recording(
  inner: LeaseStore,
): LeaseStore & { readonly calls: Array<[string, AbortSignal | undefined]> } {
  const calls: Array<[string, AbortSignal | undefined]> = [];
  const wrap = <T extends object>(role: string, target: T): T =>
    Object.fromEntries(
      Object.entries(target).map(([method, call]) => [
        method,
        (...args: unknown[]) => {
          const options = args.find(
            (arg): arg is StoreCallOptions => typeof arg === 'object' && arg !== null && 'signal' in arg,
          );
          calls.push([`${role}.${method}`, options?.signal]);
          return (call as (...args: unknown[]) => unknown).apply(target, args);
        },
      ]),
    ) as T;
  return {
    ...inner,
    calls,
    leases: wrap('leases', inner.leases),
    workers: wrap('workers', inner.workers),
    admin: wrap('admin', inner.admin),
  };
}

describe('createMigratingLeaseStore: the v2 contract', () => {
  it('is a v2 store whose close() leaves both stores to the caller who gave them', async () => {
    const { from, to } = stores();
    let closed = 0;
    const counting = (store: LeaseStore): LeaseStore => ({
      ...store,
      async close() {
        closed += 1;
      },
    });
    const store = createMigratingLeaseStore({ from: counting(from), to: counting(to) });
    expect(store.specificationVersion).toBe('v2');
    expect(guardLeaseStore(store, 'test').specificationVersion).toBe('v2');
    await store.close();
    await store.close();
    expect(closed).toBe(0);
    ok(await store.leases.create({ leaseKey: 'shard-1', checkpoint: esn('1') }));
    expect(await from.leases.get('shard-1')).not.toBeNull();
  });

  it('has no session liveness, even between two stores that have it', () => {
    const store = createMigratingLeaseStore({
      from: createMemoryLeaseStore({ applicationName: 'billing', sessions: true }),
      to: createMemoryLeaseStore({ applicationName: 'billing', sessions: true }),
    });
    expect(store.capabilities.sessionLiveness).toBe(false);
    expect(store.workers.attachSession).toBeUndefined();
    expect(store.workers.liveSessions).toBeUndefined();
    expect(guardLeaseStore(store, 'test').capabilities.sessionLiveness).toBe(false);
  });

  it('refuses a store of another contract version, naming the side', () => {
    const { from, to } = stores();
    const old = { ...to, specificationVersion: 'v1' } as unknown as LeaseStore;
    try {
      createMigratingLeaseStore({ from, to: old });
      expect.unreachable('a v1 store was accepted');
    } catch (error) {
      expect(ConfigurationError.is(error)).toBe(true);
      expect((error as ConfigurationError).problems).toEqual([
        expect.stringMatching(
          /^to implements the LeaseStore specification "v1"; this version of kcl needs v2/,
        ),
      ]);
    }
  });

  it('passes every call’s signal on to both stores, in every phase', async () => {
    for (const phase of ['mirroring', 'cutover', 'target', 'complete'] as const) {
      const plain = stores();
      const from = recording(plain.from);
      const to = recording(plain.to);
      if (phase !== 'mirroring') await setPhase(plain.from, phase);
      const store = createMigratingLeaseStore({ from, to });
      await store.refreshPhase();
      from.calls.length = 0;
      const { signal } = new AbortController();
      const options = { signal };
      await store.admin.ensureSchema(options);
      const created = ok(await store.leases.create({ leaseKey: 'shard-1', checkpoint: esn('1') }, options));
      const taken = ok(await store.leases.take('shard-1', created.leaseCounter, 'worker-a', options));
      const renewed = ok(await store.leases.renew('shard-1', taken.leaseCounter, options));
      const [batch] = await store.leases.renewMany(
        [{ leaseKey: 'shard-1', leaseCounter: renewed.leaseCounter }],
        options,
      );
      const checkpointed = ok(
        await store.leases.checkpoint(
          'shard-1',
          ok(batch as LeaseWriteResult).leaseCounter,
          { checkpoint: esn('5') },
          options,
        ),
      );
      const handoff = { from: 'worker-a', to: 'worker-b', deadline: null };
      const requested = ok(
        await store.leases.requestHandoff('shard-1', checkpointed.leaseCounter, handoff, options),
      );
      const completed = ok(await store.leases.completeHandoff('shard-1', requested.leaseCounter, options));
      await store.leases.updateMeta('shard-1', { childShardIds: ['shard-2'] }, options);
      ok(await store.leases.release('shard-1', completed.leaseCounter, options));
      await store.leases.get('shard-1', options);
      await store.leases.list(options);
      await store.admin.scan(options);
      await store.leases.delete('shard-1', options);
      await store.workers.heartbeat('worker-a', { host: 'h' }, options);
      await store.workers.list(options);
      await store.workers.remove('worker-a', options);
      await store.admin.setMigrationMarker(null, options);
      await store.admin.getMigrationMarker(options);
      // The phase is read once for every caller waiting on it, so it carries no one caller's signal.
      const phaseReads = (call: [string, AbortSignal | undefined]) => call[0] === 'admin.getMigrationMarker';
      const unsignalled = [...from.calls.filter((call) => !phaseReads(call)), ...to.calls].filter(
        ([, given]) => given !== signal,
      );
      expect(unsignalled, `phase ${phase}`).toEqual([]);
      expect(to.calls.length, `phase ${phase}`).toBeGreaterThan(10);
    }
  });

  it('a heartbeat without metadata keeps what the worker gave before, with fresh tags, in both registries', async () => {
    const { from, to } = stores();
    const first = createMigratingLeaseStore({ from, to });
    await first.workers.heartbeat('worker-a', { host: 'h1' });
    // The worker restarts (a new store instance) after the cut-over began, and beats without metadata.
    await setPhase(from, 'cutover');
    const restarted = createMigratingLeaseStore({ from, to });
    const record = await restarted.workers.heartbeat('worker-a');
    expect(record.metadata).toEqual({ host: 'h1' });
    for (const registry of [from, to]) {
      const [raw] = await registry.workers.list();
      expect(raw?.metadata).toMatchObject({
        host: 'h1',
        [MIGRATING_WORKER_METADATA.store]: 'migrating',
        [MIGRATING_WORKER_METADATA.phase]: 'cutover',
      });
    }
    expect((await restarted.workers.heartbeat('worker-a')).metadata).toEqual({ host: 'h1' });
    expect((await restarted.workers.heartbeat('worker-a', { host: 'h2' })).metadata).toEqual({ host: 'h2' });
    expect((await restarted.workers.heartbeat('worker-a')).metadata).toEqual({ host: 'h2' });
    expect((await restarted.workers.heartbeat('worker-b')).metadata).toEqual({});
  });

  it('scans moved and unmoved leases, and reports the rows that cannot be read where the lease lives', async () => {
    const { from: sourceStore, to: targetStore } = stores();
    const unreadable = (store: LeaseStore, leaseKey: string): LeaseStore => ({
      ...store,
      admin: {
        ...store.admin,
        async scan() {
          const scan = await store.admin.scan();
          return {
            leases: scan.leases.filter((lease) => lease.leaseKey !== leaseKey),
            unreadable: [{ leaseKey, problem: 'garbled' }],
          };
        },
      },
    });
    const writer = createMigratingLeaseStore({ from: sourceStore, to: targetStore });
    for (const key of ['a', 'b', 'c', 'd'])
      ok(await writer.leases.create({ leaseKey: key, checkpoint: esn('1') }));
    expect(await moveLease(sourceStore, targetStore, 'b')).toBe('moved');
    expect(await moveLease(sourceStore, targetStore, 'c')).toBe('moved');
    await setPhase(sourceStore, 'target');

    // A source row nobody can read: its target row is a copy, not a lease of its own.
    const source = unreadable(sourceStore, 'a');
    expect(await createMigratingLeaseStore({ from: source, to: targetStore }).admin.scan()).toEqual({
      leases: [
        await stored(sourceStore, 'd'),
        await stored(targetStore, 'b'),
        await stored(targetStore, 'c'),
      ].sort((x, y) => x.leaseKey.localeCompare(y.leaseKey)),
      unreadable: [{ leaseKey: 'a', problem: 'garbled' }],
    });
    // A moved lease whose target row cannot be read is reported; a copy's would not be.
    const target = unreadable(targetStore, 'c');
    const scan = await createMigratingLeaseStore({ from: sourceStore, to: target }).admin.scan();
    expect(scan.leases.map((lease) => lease.leaseKey)).toEqual(['a', 'b', 'd']);
    expect(scan.unreadable).toEqual([{ leaseKey: 'c', problem: 'garbled' }]);
    const copyOnly = unreadable(targetStore, 'd');
    const copyScan = await createMigratingLeaseStore({ from: sourceStore, to: copyOnly }).admin.scan();
    expect(copyScan.unreadable).toEqual([]);
    expect(copyScan.leases.map((lease) => lease.leaseKey)).toEqual(['a', 'b', 'c', 'd']);
  });
});

describe('createMigratingLeaseStore: mirroring', () => {
  it('writes the source, mirrors every write to the target, and returns the source lease', async () => {
    const { from, to } = stores();
    const store = createMigratingLeaseStore({ from, to });
    const created = ok(
      await store.leases.create({
        leaseKey: 'shard-1',
        checkpoint: ExtendedSequenceNumber.TRIM_HORIZON,
      }),
    );
    const taken = ok(await store.leases.take('shard-1', created.leaseCounter, 'worker-a'));
    const renewed = ok(await store.leases.renew('shard-1', taken.leaseCounter));
    const checkpointed = ok(
      await store.leases.checkpoint('shard-1', renewed.leaseCounter, {
        checkpoint: esn('100'),
        pendingCheckpoint: esn('150'),
      }),
    );
    await store.leases.updateMeta('shard-1', { childShardIds: ['shard-2', 'shard-3'] });
    const [batch] = await store.leases.renewMany([
      { leaseKey: 'shard-1', leaseCounter: checkpointed.leaseCounter },
    ]);
    const released = ok(await store.leases.release('shard-1', ok(batch as LeaseWriteResult).leaseCounter));

    const source = await stored(from, 'shard-1');
    expect(leasesEqual(source, released)).toBe(true);
    expect(leasesEqual(await stored(to, 'shard-1'), source)).toBe(true);
    expect(source).toMatchObject({ owner: null, leaseCounter: 5, childShardIds: ['shard-2', 'shard-3'] });
    expect(store.mirrorStatistics()).toEqual({ mirrored: 7, repaired: 0, lagging: 0, failed: 0 });

    await store.leases.delete('shard-1');
    expect(await from.leases.get('shard-1')).toBeNull();
    expect(await to.leases.get('shard-1')).toBeNull();
  });

  it('mirrors a hand-off request and its completion; a write the source refuses is not mirrored', async () => {
    const { from, to } = stores();
    const store = createMigratingLeaseStore({ from, to });
    const created = ok(await store.leases.create({ leaseKey: 'shard-1', checkpoint: esn('10') }));
    const taken = ok(await store.leases.take('shard-1', created.leaseCounter, 'worker-a'));
    const handoff = { from: 'worker-a', to: 'worker-b', deadline: new Date('2030-01-01T00:00:00.000Z') };
    const requested = ok(await store.leases.requestHandoff('shard-1', taken.leaseCounter, handoff));
    expect(requested).toMatchObject({ owner: 'worker-a', leaseCounter: taken.leaseCounter, handoff });
    expect(leasesEqual(await stored(to, 'shard-1'), requested)).toBe(true);
    expect(
      await store.leases.requestHandoff('shard-1', taken.leaseCounter, { ...handoff, to: 'worker-c' }),
    ).toEqual({ ok: false, reason: 'handoff-mismatch' });
    expect(await store.leases.completeHandoff('shard-1', taken.leaseCounter - 1)).toEqual({
      ok: false,
      reason: 'counter-mismatch',
    });
    expect(leasesEqual(await stored(to, 'shard-1'), requested)).toBe(true);

    const completed = ok(await store.leases.completeHandoff('shard-1', requested.leaseCounter));
    expect(completed).toMatchObject({
      owner: 'worker-b',
      handoff: null,
      leaseCounter: taken.leaseCounter + 1,
    });
    expect(leasesEqual(await stored(from, 'shard-1'), completed)).toBe(true);
    expect(leasesEqual(await stored(to, 'shard-1'), completed)).toBe(true);
    expect(store.mirrorStatistics()).toEqual({ mirrored: 4, repaired: 0, lagging: 0, failed: 0 });
  });

  it('repairs a copy that lost the mirror of a hand-off request at the next write', async () => {
    const { from, to } = stores();
    const store = createMigratingLeaseStore({ from, to });
    const created = ok(await store.leases.create({ leaseKey: 'shard-1', checkpoint: esn('10') }));
    const taken = ok(await store.leases.take('shard-1', created.leaseCounter, 'worker-a'));
    // The request reaches the source only (a worker whose mirror call was lost).
    const requested = ok(
      await from.leases.requestHandoff('shard-1', taken.leaseCounter, {
        from: 'worker-a',
        to: 'worker-b',
        deadline: null,
      }),
    );
    expect((await stored(to, 'shard-1')).handoff).toBeNull();
    const renewed = ok(await store.leases.renew('shard-1', requested.leaseCounter));
    expect(renewed.handoff).toEqual(requested.handoff);
    expect(leasesEqual(await stored(to, 'shard-1'), renewed)).toBe(true);
    expect(store.mirrorStatistics()).toMatchObject({ repaired: 1 });
  });

  it('starts a missing target copy from the source state, and repairs a copy that is behind', async () => {
    const { from, to } = stores();
    const lease = ok(
      await from.leases.create({
        leaseKey: 'shard-1',
        checkpoint: esn('5'),
        owner: 'w',
        leaseCounter: 7,
      }),
    );
    const store = createMigratingLeaseStore({ from, to });
    const renewed = ok(await store.leases.renew('shard-1', lease.leaseCounter));
    expect(leasesEqual(await stored(to, 'shard-1'), renewed)).toBe(true);

    await to.leases.delete('shard-1');
    await to.leases.create({ leaseKey: 'shard-1', checkpoint: esn('1'), leaseCounter: 2 });
    const again = ok(await store.leases.renew('shard-1', renewed.leaseCounter));
    expect(store.mirrorStatistics()).toMatchObject({ repaired: 2, lagging: 0 });
    expect(leasesEqual(await stored(to, 'shard-1'), again)).toBe(true);
  });

  it('never moves a copy backwards, and leaves a copy under repair to its repairer', async () => {
    const { from, to } = stores();
    const lease = ok(await from.leases.create({ leaseKey: 'shard-1', checkpoint: esn('5'), owner: 'w' }));
    const store = createMigratingLeaseStore({ from, to });
    // A copy at a later counter than this write produced: a newer write was mirrored meanwhile.
    await to.leases.create({ leaseKey: 'shard-1', checkpoint: esn('9'), owner: 'w', leaseCounter: 5 });
    ok(await store.leases.renew('shard-1', lease.leaseCounter));
    expect((await stored(to, 'shard-1')).leaseCounter).toBe(5);
    // A copy another repair holds (its lock) is left alone.
    await to.leases.delete('shard-1');
    await to.leases.create({ leaseKey: 'shard-1', checkpoint: esn('1'), owner: REPAIR_OWNER });
    ok(await store.leases.renew('shard-1', lease.leaseCounter + 1));
    expect((await stored(to, 'shard-1')).owner).toBe(REPAIR_OWNER);
    expect(store.mirrorStatistics()).toMatchObject({ repaired: 0, lagging: 2 });
  });

  it('repairs a copy only on a fresh reading of the mirroring phase', async () => {
    const { to } = stores();
    const from = createFaultyLeaseStore(createMemoryLeaseStore({ applicationName: 'billing' }));
    const clock = new ManualClock();
    const lease = ok(await from.leases.create({ leaseKey: 'shard-1', checkpoint: esn('5'), owner: 'w' }));
    const store = createMigratingLeaseStore({ from, to, clock, phaseRefreshMs: 1_000 });
    expect(await store.refreshPhase()).toBe('mirroring');
    // The marker cannot be read any more: the store goes on with the phase it last read, but the
    // cut-over may have begun meanwhile, so it no longer touches copies.
    from.faults.failNext(10, { operations: ['admin.getMigrationMarker'] });
    await clock.advance(1_000);
    const renewed = ok(await store.leases.renew('shard-1', lease.leaseCounter));
    expect(await to.leases.get('shard-1')).toBeNull();
    expect(store.mirrorStatistics()).toMatchObject({ repaired: 0, lagging: 1 });
    from.faults.restore();
    await clock.advance(1_000);
    ok(await store.leases.renew('shard-1', renewed.leaseCounter));
    expect(store.mirrorStatistics()).toMatchObject({ repaired: 1 });
  });

  it('breaks a repair lock left by a repair that died, once it has been seen unchanged long enough', async () => {
    const { from, to } = stores();
    const clock = new ManualClock();
    const lease = ok(await from.leases.create({ leaseKey: 'shard-1', checkpoint: esn('5'), owner: 'w' }));
    await to.leases.create({ leaseKey: 'shard-1', checkpoint: esn('1'), owner: REPAIR_OWNER });
    const store = createMigratingLeaseStore({ from, to, clock, mirrorTimeoutMs: 100 });
    const first = ok(await store.leases.renew('shard-1', lease.leaseCounter));
    await clock.advance(499);
    const second = ok(await store.leases.renew('shard-1', first.leaseCounter));
    expect((await stored(to, 'shard-1')).owner).toBe(REPAIR_OWNER);
    await clock.advance(1);
    const third = ok(await store.leases.renew('shard-1', second.leaseCounter));
    expect(leasesEqual(await stored(to, 'shard-1'), third)).toBe(true);
  });

  it('keeps working when the target fails or hangs: the source decides', async () => {
    const { from } = stores();
    const clock = new ManualClock();
    const to = createFaultyLeaseStore(createMemoryLeaseStore({ applicationName: 'billing' }), { clock });
    const store = createMigratingLeaseStore({ from, to, mirrorTimeoutMs: 100, clock });
    to.faults.setUnavailable();
    const created = ok(await store.leases.create({ leaseKey: 'shard-1', checkpoint: esn('1') }));
    to.faults.restore().setLatency(10_000);
    const taking = store.leases.take('shard-1', created.leaseCounter, 'worker-a');
    await clock.advance(100);
    const taken = ok(await taking);
    expect(taken.owner).toBe('worker-a');
    expect(store.mirrorStatistics()).toEqual({ mirrored: 0, repaired: 0, lagging: 0, failed: 2 });
  });
});

describe('createMigratingLeaseStore: a moved lease', () => {
  it('goes on in the target at the same counter; stale counters lose on both sides', async () => {
    const { from, to } = stores();
    const owner = createMigratingLeaseStore({ from, to });
    const other = createMigratingLeaseStore({ from, to });
    const created = ok(await owner.leases.create({ leaseKey: 'shard-1', checkpoint: esn('1') }));
    const taken = ok(await owner.leases.take('shard-1', created.leaseCounter, 'worker-a'));
    const checkpointed = ok(
      await owner.leases.checkpoint('shard-1', taken.leaseCounter, { checkpoint: esn('20') }),
    );

    expect(await moveLease(from, to, 'shard-1')).toBe('moved');
    const seal = await stored(from, 'shard-1');
    expect(isSealedLease(seal)).toBe(true);
    expect(seal.leaseCounter).toBe(checkpointed.leaseCounter + 1);

    // The owner carries on with the counter it holds; the write lands in the target.
    const renewed = ok(await owner.leases.renew('shard-1', checkpointed.leaseCounter));
    expect(renewed).toMatchObject({ owner: 'worker-a', leaseCounter: checkpointed.leaseCounter + 1 });
    const next = ok(
      await owner.leases.checkpoint('shard-1', renewed.leaseCounter, { checkpoint: esn('30') }),
    );
    expect(leasesEqual(await stored(to, 'shard-1'), next)).toBe(true);
    expect(leasesEqual(await stored(from, 'shard-1'), seal)).toBe(true);

    // A worker holding a counter from before the move loses, as it would on one store.
    expect(await other.leases.renew('shard-1', taken.leaseCounter)).toEqual({
      ok: false,
      reason: 'counter-mismatch',
    });
    expect(await other.leases.take('shard-1', seal.leaseCounter, 'worker-b')).toEqual({
      ok: false,
      reason: 'counter-mismatch',
    });
    // Reads show the target's lease, never the seal.
    expect(leasesEqual((await other.leases.get('shard-1')) as Lease, next)).toBe(true);
    expect((await other.leases.list()).map((lease) => lease.owner)).toEqual(['worker-a']);
    // A steal with the listed counter goes through, in the target.
    const stolen = ok(await other.leases.take('shard-1', next.leaseCounter, 'worker-b'));
    expect(stolen.owner).toBe('worker-b');
    expect(await owner.leases.renew('shard-1', next.leaseCounter)).toEqual({
      ok: false,
      reason: 'counter-mismatch',
    });
  });

  it('hands a moved lease over in the target, fenced as any other write', async () => {
    const { from, to } = stores();
    const owner = createMigratingLeaseStore({ from, to });
    const other = createMigratingLeaseStore({ from, to });
    const created = ok(await owner.leases.create({ leaseKey: 'shard-1', checkpoint: esn('1') }));
    const taken = ok(await owner.leases.take('shard-1', created.leaseCounter, 'worker-a'));
    expect(await moveLease(from, to, 'shard-1')).toBe('moved');
    const seal = await stored(from, 'shard-1');

    const handoff = { from: 'worker-a', to: 'worker-b', deadline: null };
    const requested = ok(await other.leases.requestHandoff('shard-1', taken.leaseCounter, handoff));
    expect(requested).toMatchObject({ owner: 'worker-a', leaseCounter: taken.leaseCounter, handoff });
    expect(leasesEqual(await stored(to, 'shard-1'), requested)).toBe(true);
    expect(await owner.leases.requestHandoff('shard-1', taken.leaseCounter, handoff)).toEqual({
      ok: false,
      reason: 'handoff-mismatch',
    });
    expect(await owner.leases.completeHandoff('shard-1', seal.leaseCounter)).toEqual({
      ok: false,
      reason: 'counter-mismatch',
    });
    const completed = ok(await owner.leases.completeHandoff('shard-1', requested.leaseCounter));
    expect(completed).toMatchObject({ owner: 'worker-b', handoff: null });
    expect(leasesEqual(await stored(to, 'shard-1'), completed)).toBe(true);
    expect(leasesEqual(await stored(from, 'shard-1'), seal)).toBe(true);
  });

  it('never sends a write for a moved lease to the source again, even after a stale listing', async () => {
    const { from: inner, to } = stores();
    let release: () => void = () => undefined;
    let gate: Promise<void> | null = null;
    // A source whose listing is read now and returned later (a slow response).
    const from: LeaseStore = {
      ...inner,
      leases: {
        ...inner.leases,
        async list() {
          const rows = await inner.leases.list();
          if (gate !== null) await gate;
          return rows;
        },
      },
    };
    const store = createMigratingLeaseStore({ from, to });
    const created = ok(await store.leases.create({ leaseKey: 'shard-1', checkpoint: esn('1') }));
    const taken = ok(await store.leases.take('shard-1', created.leaseCounter, 'worker-a'));
    gate = new Promise((resolve) => {
      release = resolve;
    });
    const staleListing = store.leases.list();
    await new Promise((resolve) => setImmediate(resolve));
    expect(await moveLease(inner, to, 'shard-1')).toBe('moved');
    const seal = await stored(inner, 'shard-1');
    const renewed = ok(await store.leases.renew('shard-1', taken.leaseCounter));
    // The target's counter now equals the seal's counter in the source.
    expect(renewed.leaseCounter).toBe(seal.leaseCounter);
    release();
    expect((await staleListing)[0]?.owner).toBe('worker-a');
    const again = ok(await store.leases.renew('shard-1', renewed.leaseCounter));
    expect(again.leaseCounter).toBe(renewed.leaseCounter + 1);
    expect(leasesEqual(await stored(inner, 'shard-1'), seal)).toBe(true);
    expect((await stored(to, 'shard-1')).leaseCounter).toBe(again.leaseCounter);
  });

  it('lists moved and unmoved leases together, in key order', async () => {
    const { from, to } = stores();
    const store = createMigratingLeaseStore({ from, to });
    for (const key of ['b', 'a', 'c']) await store.leases.create({ leaseKey: key, checkpoint: esn('1') });
    await moveLease(from, to, 'b');
    const a = await stored(from, 'a');
    await to.leases.delete('c'); // a target copy that is missing does not hide the unmoved lease
    const listed = await store.leases.list();
    expect(listed.map((lease) => lease.leaseKey)).toEqual(['a', 'b', 'c']);
    expect(leasesEqual(listed[0] as Lease, a)).toBe(true);
    ok(await store.leases.renew('b', (listed[1] as Lease).leaseCounter));
    expect((await stored(to, 'b')).leaseCounter).toBe(1);
    expect(isSealedLease(await stored(from, 'b'))).toBe(true);
  });

  it('deletes a moved lease in the target and keeps its seal', async () => {
    const { from, to } = stores();
    const store = createMigratingLeaseStore({ from, to });
    await store.leases.create({ leaseKey: 'shard-1', checkpoint: ExtendedSequenceNumber.SHARD_END });
    await moveLease(from, to, 'shard-1');
    await store.leases.delete('shard-1');
    expect(await to.leases.get('shard-1')).toBeNull();
    expect(isSealedLease(await stored(from, 'shard-1'))).toBe(true);
    expect(await store.leases.get('shard-1')).toBeNull();
    expect(await store.leases.list()).toEqual([]);
  });
});

describe('createMigratingLeaseStore: phases', () => {
  it('in the target phase creates a sealed placeholder in the source and the lease in the target', async () => {
    const { from, to } = stores();
    await setPhase(from, 'target');
    const store = createMigratingLeaseStore({ from, to });
    const created = ok(
      await store.leases.create({
        leaseKey: 'shard-9',
        checkpoint: ExtendedSequenceNumber.TRIM_HORIZON,
      }),
    );
    expect(created.leaseCounter).toBe(0);
    expect(await stored(from, 'shard-9')).toMatchObject({
      owner: SEAL_OWNER,
      leaseCounter: PLACEHOLDER_COUNTER,
    });
    expect(leasesEqual(await stored(to, 'shard-9'), created)).toBe(true);
    expect(await store.leases.create({ leaseKey: 'shard-9', checkpoint: esn('1') })).toEqual({
      ok: false,
      reason: 'already-exists',
    });
    // A lease a worker in an older phase created in the source (not moved yet) wins.
    await from.leases.create({ leaseKey: 'shard-8', checkpoint: esn('3') });
    expect(await store.leases.create({ leaseKey: 'shard-8', checkpoint: esn('1') })).toEqual({
      ok: false,
      reason: 'already-exists',
    });
    expect(await to.leases.get('shard-8')).toBeNull();
    expect((await store.leases.list()).map((lease) => lease.leaseKey)).toEqual(['shard-8', 'shard-9']);
  });

  it('in the complete phase never touches the source', async () => {
    const { to } = stores();
    const from = createFaultyLeaseStore(createMemoryLeaseStore({ applicationName: 'billing' }));
    await setPhase(from.inner, 'complete');
    const store = createMigratingLeaseStore({ from, to });
    expect(await store.refreshPhase()).toBe('complete');
    from.faults.setUnavailable();
    await store.admin.ensureSchema();
    const created = ok(await store.leases.create({ leaseKey: 'shard-1', checkpoint: esn('1') }));
    ok(await store.leases.take('shard-1', created.leaseCounter, 'w'));
    expect(await store.leases.list()).toHaveLength(1);
    await store.workers.heartbeat('w');
    expect(await store.workers.list()).toHaveLength(1);
    expect(store.phase()).toBe('complete');
  });

  it('reads the phase again only when its reading is older than phaseRefreshMs', async () => {
    const { from, to } = stores();
    const clock = new ManualClock();
    const store = createMigratingLeaseStore({ from, to, phaseRefreshMs: 1_000, clock });
    await store.leases.list();
    expect(store.phase()).toBe('mirroring');
    await setPhase(from, 'target');
    await store.leases.list();
    expect(store.phase()).toBe('mirroring');
    await clock.advance(1_000);
    await store.leases.list();
    expect(store.phase()).toBe('target');
  });

  it('a plain marker naming the target means complete; naming another store, workers must stop', async () => {
    const { from, to } = stores();
    const store = createMigratingLeaseStore({ from, to });
    await from.admin.setMigrationMarker({
      migratedTo: `${to.description} at somewhere`,
      migratedAt: new Date(0),
    });
    expect(await store.refreshPhase()).toBe('complete');
    expect(await store.admin.getMigrationMarker()).toBeNull();

    const other = stores('payments');
    const stopping = createMigratingLeaseStore(other);
    await other.from.admin.setMigrationMarker({
      migratedTo: 'a DynamoDB table elsewhere',
      migratedAt: new Date(5),
    });
    expect((await stopping.admin.getMigrationMarker())?.migratedTo).toBe('a DynamoDB table elsewhere');
  });

  it("hides the target's guard marker but shows a marker the target got from a later migration", async () => {
    const { from, to } = stores();
    const store = createMigratingLeaseStore({ from, to });
    await to.admin.setMigrationMarker({
      migratedTo: pendingMarkerText(from.description),
      migratedAt: new Date(0),
    });
    expect(await store.admin.getMigrationMarker()).toBeNull();
    await to.admin.setMigrationMarker({ migratedTo: 'MySQL table "kcl_leases"', migratedAt: new Date(0) });
    expect((await store.admin.getMigrationMarker())?.migratedTo).toBe('MySQL table "kcl_leases"');
  });
});

describe('createMigratingLeaseStore: workers', () => {
  it('heartbeats in both registries with its tag, and lists workers without it', async () => {
    const { from, to } = stores();
    const store = createMigratingLeaseStore({ from, to, phaseRefreshMs: 1_234 });
    const record = await store.workers.heartbeat('worker-a', { host: 'h1' });
    expect(record).toMatchObject({ workerId: 'worker-a', heartbeat: 1, metadata: { host: 'h1' } });
    const [raw] = await from.workers.list();
    expect(raw?.metadata).toEqual({
      host: 'h1',
      [MIGRATING_WORKER_METADATA.store]: 'migrating',
      [MIGRATING_WORKER_METADATA.phase]: 'mirroring',
      [MIGRATING_WORKER_METADATA.phaseRefreshMs]: '1234',
    });
    expect((await to.workers.list()).map((worker) => worker.workerId)).toEqual(['worker-a']);
    await from.workers.heartbeat('plain-source-worker');
    await to.workers.heartbeat('plain-target-worker');
    expect((await store.workers.list()).map((worker) => [worker.workerId, worker.metadata])).toEqual([
      ['plain-source-worker', {}],
      ['plain-target-worker', {}],
      ['worker-a', { host: 'h1' }],
    ]);
    await store.workers.remove('worker-a');
    expect(await from.workers.list()).toHaveLength(1);
    expect(await to.workers.list()).toHaveLength(1);
  });
});

describe('createMigratingLeaseStore: configuration', () => {
  it('lists every problem at once', () => {
    const from = createMemoryLeaseStore({ applicationName: 'a' });
    const to = createMemoryLeaseStore({ applicationName: 'b' });
    const attempt = () => createMigratingLeaseStore({ from, to, phaseRefreshMs: 0, mirrorTimeoutMs: -1 });
    expect(attempt).toThrow(/invalid configuration/);
    try {
      attempt();
    } catch (error) {
      expect((error as ConfigurationError).problems).toEqual([
        'from and to must be bound to the same application (from: "a", to: "b")',
        'phaseRefreshMs must be an integer from 1 to ∞, got 0',
        'mirrorTimeoutMs must be an integer from 1 to ∞, got -1',
      ]);
    }
    expect(() => createMigratingLeaseStore({ from, to: from })).toThrow(/different stores/);
  });
});
