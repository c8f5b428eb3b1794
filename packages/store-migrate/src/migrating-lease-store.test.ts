import type { Lease, LeaseStore, LeaseWriteResult } from '@kcl/core';
import { ConfigurationError, ExtendedSequenceNumber, leasesEqual } from '@kcl/core';
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
  await from.setMigrationMarker({
    migratedTo: phaseMarkerText('the target', phase),
    migratedAt: new Date(0),
  });
}

function ok(result: LeaseWriteResult): Lease {
  if (!result.ok) throw new Error(`expected the write to succeed, it lost: ${result.reason}`);
  return result.lease;
}

async function stored(store: MemoryLeaseStore, leaseKey: string): Promise<Lease> {
  const lease = await store.getLease(leaseKey);
  if (lease === null) throw new Error(`${leaseKey} is not in ${store.description}`);
  return lease;
}

describe('createMigratingLeaseStore: mirroring', () => {
  it('writes the source, mirrors every write to the target, and returns the source lease', async () => {
    const { from, to } = stores();
    const store = createMigratingLeaseStore({ from, to });
    const created = ok(
      await store.createLeaseIfAbsent({
        leaseKey: 'shard-1',
        checkpoint: ExtendedSequenceNumber.TRIM_HORIZON,
      }),
    );
    const taken = ok(await store.takeLease('shard-1', created.leaseCounter, 'worker-a'));
    const renewed = ok(await store.renewLease('shard-1', taken.leaseCounter));
    const checkpointed = ok(
      await store.updateCheckpoint('shard-1', renewed.leaseCounter, {
        checkpoint: esn('100'),
        pendingCheckpoint: esn('150'),
      }),
    );
    await store.updateLeaseMeta('shard-1', { childShardIds: ['shard-2', 'shard-3'] });
    const [batch] = await store.renewLeases([
      { leaseKey: 'shard-1', leaseCounter: checkpointed.leaseCounter },
    ]);
    const released = ok(await store.releaseLease('shard-1', ok(batch as LeaseWriteResult).leaseCounter));

    const source = await stored(from, 'shard-1');
    expect(leasesEqual(source, released)).toBe(true);
    expect(leasesEqual(await stored(to, 'shard-1'), source)).toBe(true);
    expect(source).toMatchObject({ owner: null, leaseCounter: 5, childShardIds: ['shard-2', 'shard-3'] });
    expect(store.mirrorStatistics()).toEqual({ mirrored: 7, repaired: 0, lagging: 0, failed: 0 });

    await store.deleteLease('shard-1');
    expect(await from.getLease('shard-1')).toBeNull();
    expect(await to.getLease('shard-1')).toBeNull();
  });

  it('starts a missing target copy from the source state, and repairs a copy that is behind', async () => {
    const { from, to } = stores();
    const lease = ok(
      await from.createLeaseIfAbsent({
        leaseKey: 'shard-1',
        checkpoint: esn('5'),
        owner: 'w',
        leaseCounter: 7,
      }),
    );
    const store = createMigratingLeaseStore({ from, to });
    const renewed = ok(await store.renewLease('shard-1', lease.leaseCounter));
    expect(leasesEqual(await stored(to, 'shard-1'), renewed)).toBe(true);

    await to.deleteLease('shard-1');
    await to.createLeaseIfAbsent({ leaseKey: 'shard-1', checkpoint: esn('1'), leaseCounter: 2 });
    const again = ok(await store.renewLease('shard-1', renewed.leaseCounter));
    expect(store.mirrorStatistics()).toMatchObject({ repaired: 2, lagging: 0 });
    expect(leasesEqual(await stored(to, 'shard-1'), again)).toBe(true);
  });

  it('never moves a copy backwards, and leaves a copy under repair to its repairer', async () => {
    const { from, to } = stores();
    const lease = ok(
      await from.createLeaseIfAbsent({ leaseKey: 'shard-1', checkpoint: esn('5'), owner: 'w' }),
    );
    const store = createMigratingLeaseStore({ from, to });
    // A copy at a later counter than this write produced: a newer write was mirrored meanwhile.
    await to.createLeaseIfAbsent({ leaseKey: 'shard-1', checkpoint: esn('9'), owner: 'w', leaseCounter: 5 });
    ok(await store.renewLease('shard-1', lease.leaseCounter));
    expect((await stored(to, 'shard-1')).leaseCounter).toBe(5);
    // A copy another repair holds (its lock) is left alone.
    await to.deleteLease('shard-1');
    await to.createLeaseIfAbsent({ leaseKey: 'shard-1', checkpoint: esn('1'), owner: REPAIR_OWNER });
    ok(await store.renewLease('shard-1', lease.leaseCounter + 1));
    expect((await stored(to, 'shard-1')).owner).toBe(REPAIR_OWNER);
    expect(store.mirrorStatistics()).toMatchObject({ repaired: 0, lagging: 2 });
  });

  it('repairs a copy only on a fresh reading of the mirroring phase', async () => {
    const { to } = stores();
    const from = createFaultyLeaseStore(createMemoryLeaseStore({ applicationName: 'billing' }));
    const clock = new ManualClock();
    const lease = ok(
      await from.createLeaseIfAbsent({ leaseKey: 'shard-1', checkpoint: esn('5'), owner: 'w' }),
    );
    const store = createMigratingLeaseStore({ from, to, clock, phaseRefreshMs: 1_000 });
    expect(await store.refreshPhase()).toBe('mirroring');
    // The marker cannot be read any more: the store goes on with the phase it last read, but the
    // cut-over may have begun meanwhile, so it no longer touches copies.
    from.faults.failNext(10, { operations: ['getMigrationMarker'] });
    await clock.advance(1_000);
    const renewed = ok(await store.renewLease('shard-1', lease.leaseCounter));
    expect(await to.getLease('shard-1')).toBeNull();
    expect(store.mirrorStatistics()).toMatchObject({ repaired: 0, lagging: 1 });
    from.faults.restore();
    await clock.advance(1_000);
    ok(await store.renewLease('shard-1', renewed.leaseCounter));
    expect(store.mirrorStatistics()).toMatchObject({ repaired: 1 });
  });

  it('breaks a repair lock left by a repair that died, once it has been seen unchanged long enough', async () => {
    const { from, to } = stores();
    const clock = new ManualClock();
    const lease = ok(
      await from.createLeaseIfAbsent({ leaseKey: 'shard-1', checkpoint: esn('5'), owner: 'w' }),
    );
    await to.createLeaseIfAbsent({ leaseKey: 'shard-1', checkpoint: esn('1'), owner: REPAIR_OWNER });
    const store = createMigratingLeaseStore({ from, to, clock, mirrorTimeoutMs: 100 });
    const first = ok(await store.renewLease('shard-1', lease.leaseCounter));
    await clock.advance(499);
    const second = ok(await store.renewLease('shard-1', first.leaseCounter));
    expect((await stored(to, 'shard-1')).owner).toBe(REPAIR_OWNER);
    await clock.advance(1);
    const third = ok(await store.renewLease('shard-1', second.leaseCounter));
    expect(leasesEqual(await stored(to, 'shard-1'), third)).toBe(true);
  });

  it('keeps working when the target fails or hangs: the source decides', async () => {
    const { from } = stores();
    const clock = new ManualClock();
    const to = createFaultyLeaseStore(createMemoryLeaseStore({ applicationName: 'billing' }), { clock });
    const store = createMigratingLeaseStore({ from, to, mirrorTimeoutMs: 100, clock });
    to.faults.setUnavailable();
    const created = ok(await store.createLeaseIfAbsent({ leaseKey: 'shard-1', checkpoint: esn('1') }));
    to.faults.restore().setLatency(10_000);
    const taking = store.takeLease('shard-1', created.leaseCounter, 'worker-a');
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
    const created = ok(await owner.createLeaseIfAbsent({ leaseKey: 'shard-1', checkpoint: esn('1') }));
    const taken = ok(await owner.takeLease('shard-1', created.leaseCounter, 'worker-a'));
    const checkpointed = ok(
      await owner.updateCheckpoint('shard-1', taken.leaseCounter, { checkpoint: esn('20') }),
    );

    expect(await moveLease(from, to, 'shard-1')).toBe('moved');
    const seal = await stored(from, 'shard-1');
    expect(isSealedLease(seal)).toBe(true);
    expect(seal.leaseCounter).toBe(checkpointed.leaseCounter + 1);

    // The owner carries on with the counter it holds; the write lands in the target.
    const renewed = ok(await owner.renewLease('shard-1', checkpointed.leaseCounter));
    expect(renewed).toMatchObject({ owner: 'worker-a', leaseCounter: checkpointed.leaseCounter + 1 });
    const next = ok(await owner.updateCheckpoint('shard-1', renewed.leaseCounter, { checkpoint: esn('30') }));
    expect(leasesEqual(await stored(to, 'shard-1'), next)).toBe(true);
    expect(leasesEqual(await stored(from, 'shard-1'), seal)).toBe(true);

    // A worker holding a counter from before the move loses, as it would on one store.
    expect(await other.renewLease('shard-1', taken.leaseCounter)).toEqual({
      ok: false,
      reason: 'counter-mismatch',
    });
    expect(await other.takeLease('shard-1', seal.leaseCounter, 'worker-b')).toEqual({
      ok: false,
      reason: 'counter-mismatch',
    });
    // Reads show the target's lease, never the seal.
    expect(leasesEqual((await other.getLease('shard-1')) as Lease, next)).toBe(true);
    expect((await other.listLeases()).map((lease) => lease.owner)).toEqual(['worker-a']);
    // A steal with the listed counter goes through, in the target.
    const stolen = ok(await other.takeLease('shard-1', next.leaseCounter, 'worker-b'));
    expect(stolen.owner).toBe('worker-b');
    expect(await owner.renewLease('shard-1', next.leaseCounter)).toEqual({
      ok: false,
      reason: 'counter-mismatch',
    });
  });

  it('never sends a write for a moved lease to the source again, even after a stale listing', async () => {
    const { from: inner, to } = stores();
    let release: () => void = () => undefined;
    let gate: Promise<void> | null = null;
    // A source whose listing is read now and returned later (a slow response).
    const from: LeaseStore = {
      ...inner,
      async listLeases() {
        const rows = await inner.listLeases();
        if (gate !== null) await gate;
        return rows;
      },
    };
    const store = createMigratingLeaseStore({ from, to });
    const created = ok(await store.createLeaseIfAbsent({ leaseKey: 'shard-1', checkpoint: esn('1') }));
    const taken = ok(await store.takeLease('shard-1', created.leaseCounter, 'worker-a'));
    gate = new Promise((resolve) => {
      release = resolve;
    });
    const staleListing = store.listLeases();
    await new Promise((resolve) => setImmediate(resolve));
    expect(await moveLease(inner, to, 'shard-1')).toBe('moved');
    const seal = await stored(inner, 'shard-1');
    const renewed = ok(await store.renewLease('shard-1', taken.leaseCounter));
    // The target's counter now equals the seal's counter in the source.
    expect(renewed.leaseCounter).toBe(seal.leaseCounter);
    release();
    expect((await staleListing)[0]?.owner).toBe('worker-a');
    const again = ok(await store.renewLease('shard-1', renewed.leaseCounter));
    expect(again.leaseCounter).toBe(renewed.leaseCounter + 1);
    expect(leasesEqual(await stored(inner, 'shard-1'), seal)).toBe(true);
    expect((await stored(to, 'shard-1')).leaseCounter).toBe(again.leaseCounter);
  });

  it('lists moved and unmoved leases together, in key order', async () => {
    const { from, to } = stores();
    const store = createMigratingLeaseStore({ from, to });
    for (const key of ['b', 'a', 'c'])
      await store.createLeaseIfAbsent({ leaseKey: key, checkpoint: esn('1') });
    await moveLease(from, to, 'b');
    const a = await stored(from, 'a');
    await to.deleteLease('c'); // a target copy that is missing does not hide the unmoved lease
    const listed = await store.listLeases();
    expect(listed.map((lease) => lease.leaseKey)).toEqual(['a', 'b', 'c']);
    expect(leasesEqual(listed[0] as Lease, a)).toBe(true);
    ok(await store.renewLease('b', (listed[1] as Lease).leaseCounter));
    expect((await stored(to, 'b')).leaseCounter).toBe(1);
    expect(isSealedLease(await stored(from, 'b'))).toBe(true);
  });

  it('deletes a moved lease in the target and keeps its seal', async () => {
    const { from, to } = stores();
    const store = createMigratingLeaseStore({ from, to });
    await store.createLeaseIfAbsent({ leaseKey: 'shard-1', checkpoint: ExtendedSequenceNumber.SHARD_END });
    await moveLease(from, to, 'shard-1');
    await store.deleteLease('shard-1');
    expect(await to.getLease('shard-1')).toBeNull();
    expect(isSealedLease(await stored(from, 'shard-1'))).toBe(true);
    expect(await store.getLease('shard-1')).toBeNull();
    expect(await store.listLeases()).toEqual([]);
  });
});

describe('createMigratingLeaseStore: phases', () => {
  it('in the target phase creates a sealed placeholder in the source and the lease in the target', async () => {
    const { from, to } = stores();
    await setPhase(from, 'target');
    const store = createMigratingLeaseStore({ from, to });
    const created = ok(
      await store.createLeaseIfAbsent({
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
    expect(await store.createLeaseIfAbsent({ leaseKey: 'shard-9', checkpoint: esn('1') })).toEqual({
      ok: false,
      reason: 'already-exists',
    });
    // A lease a worker in an older phase created in the source (not moved yet) wins.
    await from.createLeaseIfAbsent({ leaseKey: 'shard-8', checkpoint: esn('3') });
    expect(await store.createLeaseIfAbsent({ leaseKey: 'shard-8', checkpoint: esn('1') })).toEqual({
      ok: false,
      reason: 'already-exists',
    });
    expect(await to.getLease('shard-8')).toBeNull();
    expect((await store.listLeases()).map((lease) => lease.leaseKey)).toEqual(['shard-8', 'shard-9']);
  });

  it('in the complete phase never touches the source', async () => {
    const { to } = stores();
    const from = createFaultyLeaseStore(createMemoryLeaseStore({ applicationName: 'billing' }));
    await setPhase(from.inner, 'complete');
    const store = createMigratingLeaseStore({ from, to });
    expect(await store.refreshPhase()).toBe('complete');
    from.faults.setUnavailable();
    await store.ensureSchema();
    const created = ok(await store.createLeaseIfAbsent({ leaseKey: 'shard-1', checkpoint: esn('1') }));
    ok(await store.takeLease('shard-1', created.leaseCounter, 'w'));
    expect(await store.listLeases()).toHaveLength(1);
    await store.heartbeatWorker('w');
    expect(await store.listWorkers()).toHaveLength(1);
    expect(store.phase()).toBe('complete');
  });

  it('reads the phase again only when its reading is older than phaseRefreshMs', async () => {
    const { from, to } = stores();
    const clock = new ManualClock();
    const store = createMigratingLeaseStore({ from, to, phaseRefreshMs: 1_000, clock });
    await store.listLeases();
    expect(store.phase()).toBe('mirroring');
    await setPhase(from, 'target');
    await store.listLeases();
    expect(store.phase()).toBe('mirroring');
    await clock.advance(1_000);
    await store.listLeases();
    expect(store.phase()).toBe('target');
  });

  it('a plain marker naming the target means complete; naming another store, workers must stop', async () => {
    const { from, to } = stores();
    const store = createMigratingLeaseStore({ from, to });
    await from.setMigrationMarker({ migratedTo: `${to.description} at somewhere`, migratedAt: new Date(0) });
    expect(await store.refreshPhase()).toBe('complete');
    expect(await store.getMigrationMarker()).toBeNull();

    const other = stores('payments');
    const stopping = createMigratingLeaseStore(other);
    await other.from.setMigrationMarker({
      migratedTo: 'a DynamoDB table elsewhere',
      migratedAt: new Date(5),
    });
    expect((await stopping.getMigrationMarker())?.migratedTo).toBe('a DynamoDB table elsewhere');
  });

  it("hides the target's guard marker but shows a marker the target got from a later migration", async () => {
    const { from, to } = stores();
    const store = createMigratingLeaseStore({ from, to });
    await to.setMigrationMarker({ migratedTo: pendingMarkerText(from.description), migratedAt: new Date(0) });
    expect(await store.getMigrationMarker()).toBeNull();
    await to.setMigrationMarker({ migratedTo: 'MySQL table "kcl_leases"', migratedAt: new Date(0) });
    expect((await store.getMigrationMarker())?.migratedTo).toBe('MySQL table "kcl_leases"');
  });
});

describe('createMigratingLeaseStore: workers', () => {
  it('heartbeats in both registries with its tag, and lists workers without it', async () => {
    const { from, to } = stores();
    const store = createMigratingLeaseStore({ from, to, phaseRefreshMs: 1_234 });
    const record = await store.heartbeatWorker('worker-a', { host: 'h1' });
    expect(record).toMatchObject({ workerId: 'worker-a', heartbeat: 1, metadata: { host: 'h1' } });
    const [raw] = await from.listWorkers();
    expect(raw?.metadata).toEqual({
      host: 'h1',
      [MIGRATING_WORKER_METADATA.store]: 'migrating',
      [MIGRATING_WORKER_METADATA.phase]: 'mirroring',
      [MIGRATING_WORKER_METADATA.phaseRefreshMs]: '1234',
    });
    expect((await to.listWorkers()).map((worker) => worker.workerId)).toEqual(['worker-a']);
    await from.heartbeatWorker('plain-source-worker');
    await to.heartbeatWorker('plain-target-worker');
    expect((await store.listWorkers()).map((worker) => [worker.workerId, worker.metadata])).toEqual([
      ['plain-source-worker', {}],
      ['plain-target-worker', {}],
      ['worker-a', { host: 'h1' }],
    ]);
    await store.removeWorker('worker-a');
    expect(await from.listWorkers()).toHaveLength(1);
    expect(await to.listWorkers()).toHaveLength(1);
  });
});

describe('createMigratingLeaseStore: configuration', () => {
  it('lists every problem at once', () => {
    const from = createMemoryLeaseStore({ applicationName: 'a' });
    const to = createMemoryLeaseStore({ applicationName: 'b' });
    const attempt = () => createMigratingLeaseStore({ from, to, phaseRefreshMs: 0, mirrorTimeoutMs: -1 });
    expect(attempt).toThrow(ConfigurationError);
    try {
      attempt();
    } catch (error) {
      expect((error as ConfigurationError).problems).toEqual([
        'from and to must be bound to the same application (from: "a", to: "b")',
        'phaseRefreshMs must be a positive integer',
        'mirrorTimeoutMs must be a positive integer',
      ]);
    }
    expect(() => createMigratingLeaseStore({ from, to: from })).toThrow(/different stores/);
  });
});
