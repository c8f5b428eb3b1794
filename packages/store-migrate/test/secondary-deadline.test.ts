import type { LeaseStore } from '@kcl/core';
import { ExtendedSequenceNumber } from '@kcl/core';
import type { LeaseStoreOperation } from '@kcl/testkit';
import { ManualClock } from '@kcl/testkit';
import { afterAll, describe, expect, it } from 'vitest';
import { createMigratingLeaseStore, moveLease, phaseMarkerText } from '../src/index.js';
import { openStorePairs } from './support/store-pairs.js';

// The secondary store (the target while the source is authoritative, the source once the target is)
// gets every call only as a courtesy: mirrored writes, lazy copies, heartbeats, worker listings. A
// secondary that hangs must not hold up the primary's answer by more than `mirrorTimeoutMs`, or a hung
// target stops lease renewal across the fleet.

const pairs = await openStorePairs();
afterAll(() => pairs.close());

const MIRROR_TIMEOUT_MS = 250;

/** The store, except that the listed operations never answer. */
function hanging(store: LeaseStore, operations: readonly LeaseStoreOperation[]): LeaseStore {
  const hung = new Set<string>(operations);
  return new Proxy(store, {
    get(target, property, receiver) {
      const value = Reflect.get(target, property, receiver);
      if (typeof property === 'string' && hung.has(property)) return () => new Promise(() => undefined);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

/**
 * Runs `call` on a ManualClock and says whether it answered without the clock passing much more than
 * `mirrorTimeoutMs`. The clock moves only while the store waits on it (a pending sleep: a deadline);
 * real I/O on the primary gets real time, and the test never waits on a hang.
 */
async function answersWithinDeadline<T>(clock: ManualClock, call: () => Promise<T>): Promise<boolean> {
  let answered = false;
  const started = clock.monotonicNow();
  void call().then(
    () => {
      answered = true;
    },
    () => {
      answered = true;
    },
  );
  const realDeadline = Date.now() + 3_000;
  while (!answered && Date.now() < realDeadline) {
    await new Promise((resolve) => setTimeout(resolve, 5));
    if (clock.pendingSleeps > 0) await clock.advance(MIRROR_TIMEOUT_MS / 5);
  }
  return answered && clock.monotonicNow() - started <= MIRROR_TIMEOUT_MS * 1.5;
}

describe.each(pairs.kinds)('a hung secondary store ($name)', (kind) => {
  it.skipIf(kind.skip !== null)(
    'does not hold up heartbeats, worker listings, removals, the schema or the marker beyond mirrorTimeoutMs (target hung while mirroring)',
    async () => {
      const { from, to } = await kind.open('hung-registry');
      for (const operation of [
        'heartbeatWorker',
        'listWorkers',
        'removeWorker',
        'ensureSchema',
        'getMigrationMarker',
      ] as const) {
        const clock = new ManualClock();
        const store = createMigratingLeaseStore({
          from,
          to: hanging(to, [operation]),
          mirrorTimeoutMs: MIRROR_TIMEOUT_MS,
          clock,
        });
        await store.refreshPhase();
        const calls: Record<typeof operation, () => Promise<unknown>> = {
          heartbeatWorker: () => store.heartbeatWorker('worker-1'),
          listWorkers: () => store.listWorkers(),
          removeWorker: () => store.removeWorker('worker-1'),
          ensureSchema: () => store.ensureSchema(),
          getMigrationMarker: () => store.getMigrationMarker(),
        };
        const call = calls[operation];
        expect(await answersWithinDeadline(clock, call), operation).toBe(true);
      }
      // The primary's answer is the real one.
      const clock = new ManualClock();
      const store = createMigratingLeaseStore({
        from,
        to: hanging(to, ['heartbeatWorker', 'listWorkers']),
        mirrorTimeoutMs: MIRROR_TIMEOUT_MS,
        clock,
      });
      expect(await answersWithinDeadline(clock, () => store.heartbeatWorker('worker-2'))).toBe(true);
      let workers: string[] = [];
      expect(
        await answersWithinDeadline(clock, async () => {
          workers = (await store.listWorkers()).map((worker) => worker.workerId);
        }),
      ).toBe(true);
      expect(workers).toContain('worker-2');
    },
  );

  it.skipIf(kind.skip !== null)(
    'does not hold up a write or a batch renewal whose lazy copy to the target hangs',
    async () => {
      const { from, to } = await kind.open('hung-lazy-copy');
      // Leases that exist only in the source: the first mirrored write finds no copy and creates one.
      for (const leaseKey of ['shard-1', 'shard-2']) {
        await from.createLeaseIfAbsent({ leaseKey, checkpoint: ExtendedSequenceNumber.of('5'), owner: 'w' });
      }
      const clock = new ManualClock();
      const store = createMigratingLeaseStore({
        from,
        to: hanging(to, ['createLeaseIfAbsent']),
        mirrorTimeoutMs: MIRROR_TIMEOUT_MS,
        clock,
      });
      expect(await answersWithinDeadline(clock, () => store.renewLease('shard-1', 0))).toBe(true);
      expect((await from.getLease('shard-1'))?.leaseCounter).toBe(1);
      const batchClock = new ManualClock();
      const batchStore = createMigratingLeaseStore({
        from,
        to: hanging(to, ['createLeaseIfAbsent']),
        mirrorTimeoutMs: MIRROR_TIMEOUT_MS,
        clock: batchClock,
      });
      expect(
        await answersWithinDeadline(batchClock, () =>
          batchStore.renewLeases([{ leaseKey: 'shard-2', leaseCounter: 0 }]),
        ),
      ).toBe(true);
      expect((await from.getLease('shard-2'))?.leaseCounter).toBe(1);
    },
  );

  it.skipIf(kind.skip !== null)(
    'does not hold up heartbeats once the target is primary and the source hangs (target phase)',
    async () => {
      const { from, to } = await kind.open('hung-source');
      await from.createLeaseIfAbsent({ leaseKey: 'shard-1', checkpoint: ExtendedSequenceNumber.of('5') });
      expect(await moveLease(from, to, 'shard-1')).toBe('moved');
      await from.setMigrationMarker({
        migratedTo: phaseMarkerText(to.description, 'target'),
        migratedAt: new Date(0),
      });
      const clock = new ManualClock();
      const store = createMigratingLeaseStore({
        from: hanging(from, ['heartbeatWorker', 'listWorkers', 'removeWorker']),
        to,
        mirrorTimeoutMs: MIRROR_TIMEOUT_MS,
        clock,
      });
      expect(await store.refreshPhase()).toBe('target');
      expect(await answersWithinDeadline(clock, () => store.heartbeatWorker('worker-1'))).toBe(true);
      expect(await answersWithinDeadline(clock, () => store.listWorkers())).toBe(true);
      expect(await answersWithinDeadline(clock, () => store.removeWorker('worker-1'))).toBe(true);
    },
  );
});
