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

/** The store, except that the listed operations (`role.method`) never answer. */
function hanging(store: LeaseStore, operations: readonly LeaseStoreOperation[]): LeaseStore {
  const hung = new Set<string>(operations);
  const role = <T extends object>(name: string, methods: T): T =>
    new Proxy(methods, {
      get(target, property, receiver) {
        const value = Reflect.get(target, property, receiver);
        if (typeof property === 'string' && hung.has(`${name}.${property}`)) {
          return () => new Promise(() => undefined);
        }
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
  return {
    ...store,
    leases: role('leases', store.leases),
    workers: role('workers', store.workers),
    admin: role('admin', store.admin),
  };
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
        'workers.heartbeat',
        'workers.list',
        'workers.remove',
        'admin.ensureSchema',
        'admin.getMigrationMarker',
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
          'workers.heartbeat': () => store.workers.heartbeat('worker-1'),
          'workers.list': () => store.workers.list(),
          'workers.remove': () => store.workers.remove('worker-1'),
          'admin.ensureSchema': () => store.admin.ensureSchema(),
          'admin.getMigrationMarker': () => store.admin.getMigrationMarker(),
        };
        const call = calls[operation];
        expect(await answersWithinDeadline(clock, call), operation).toBe(true);
      }
      // The primary's answer is the real one.
      const clock = new ManualClock();
      const store = createMigratingLeaseStore({
        from,
        to: hanging(to, ['workers.heartbeat', 'workers.list']),
        mirrorTimeoutMs: MIRROR_TIMEOUT_MS,
        clock,
      });
      expect(await answersWithinDeadline(clock, () => store.workers.heartbeat('worker-2'))).toBe(true);
      let workers: string[] = [];
      expect(
        await answersWithinDeadline(clock, async () => {
          workers = (await store.workers.list()).map((worker) => worker.workerId);
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
        await from.leases.create({ leaseKey, checkpoint: ExtendedSequenceNumber.of('5'), owner: 'w' });
      }
      const clock = new ManualClock();
      const store = createMigratingLeaseStore({
        from,
        to: hanging(to, ['leases.create']),
        mirrorTimeoutMs: MIRROR_TIMEOUT_MS,
        clock,
      });
      expect(await answersWithinDeadline(clock, () => store.leases.renew('shard-1', 0))).toBe(true);
      expect((await from.leases.get('shard-1'))?.leaseCounter).toBe(1);
      const batchClock = new ManualClock();
      const batchStore = createMigratingLeaseStore({
        from,
        to: hanging(to, ['leases.create']),
        mirrorTimeoutMs: MIRROR_TIMEOUT_MS,
        clock: batchClock,
      });
      expect(
        await answersWithinDeadline(batchClock, () =>
          batchStore.leases.renewMany([{ leaseKey: 'shard-2', leaseCounter: 0 }]),
        ),
      ).toBe(true);
      expect((await from.leases.get('shard-2'))?.leaseCounter).toBe(1);
    },
  );

  it.skipIf(kind.skip !== null)(
    'does not hold up heartbeats once the target is primary and the source hangs (target phase)',
    async () => {
      const { from, to } = await kind.open('hung-source');
      await from.leases.create({ leaseKey: 'shard-1', checkpoint: ExtendedSequenceNumber.of('5') });
      expect(await moveLease(from, to, 'shard-1')).toBe('moved');
      await from.admin.setMigrationMarker({
        migratedTo: phaseMarkerText(to.description, 'target'),
        migratedAt: new Date(0),
      });
      const clock = new ManualClock();
      const store = createMigratingLeaseStore({
        from: hanging(from, ['workers.heartbeat', 'workers.list', 'workers.remove']),
        to,
        mirrorTimeoutMs: MIRROR_TIMEOUT_MS,
        clock,
      });
      expect(await store.refreshPhase()).toBe('target');
      expect(await answersWithinDeadline(clock, () => store.workers.heartbeat('worker-1'))).toBe(true);
      expect(await answersWithinDeadline(clock, () => store.workers.list())).toBe(true);
      expect(await answersWithinDeadline(clock, () => store.workers.remove('worker-1'))).toBe(true);
    },
  );
});
