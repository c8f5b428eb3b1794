import type { Lease, LeaseStore } from '@kcl/core';
import { ExtendedSequenceNumber } from '@kcl/core';
import { afterAll, describe, expect, it } from 'vitest';
import type { CutOverStage } from '../src/index.js';
import {
  abortLiveMigration,
  createMigratingLeaseStore,
  cutOverLiveMigration,
  isSealedLease,
  liveMigrationStatus,
  pendingMarkerText,
  readLiveMigrationState,
  startLiveMigration,
} from '../src/index.js';
import { intercepted } from './support/intercepted.js';
import { openStorePairs } from './support/store-pairs.js';

// `kcl-migrate cutover` is a sequence of writes to two stores (markers, copies, seals, the guard). It
// can die between any two of them. Run again, it must finish the remaining steps, whichever they are,
// so that the fleet ends up running on the target: the migration complete, the target's guard gone, a
// plain target store usable, and the migrating workers carrying on with the leases they hold.

const pairs = await openStorePairs();
afterAll(() => pairs.close());

const WRITES = new Set<string>([
  'admin.setMigrationMarker',
  'leases.create',
  'leases.delete',
  'leases.take',
  'leases.renew',
  'leases.renewMany',
  'leases.release',
  'leases.checkpoint',
  'leases.updateMeta',
  'workers.remove',
]);

class Killed extends Error {}

/**
 * Stores that die after the k-th write of the cut-over: that write is done and answered, and every call
 * after it fails, as in a process killed right after it (a dead process makes no more calls).
 */
function killedAfter(writes: number) {
  let count = 0;
  let killed = false;
  const wrap = (store: LeaseStore): LeaseStore =>
    intercepted(store, async (operation, call) => {
      if (killed) throw new Killed('killed');
      const result = await call();
      if (WRITES.has(operation)) {
        count += 1;
        if (count === writes) killed = true;
      }
      return result;
    });
  return { wrap, killed: () => killed };
}

const fast = { watchMs: 1, phaseRefreshMs: 1, settleMarginMs: 0 } as const;

/** A fleet of one migrating worker holding three leases, one free lease, copies made, one copy missing, one stale. */
async function prepare(pair: Awaited<ReturnType<(typeof pairs.kinds)[number]['open']>>) {
  const { from, to, newFrom, newTo } = pair;
  const worker = createMigratingLeaseStore({ from: newFrom(), to: newTo(), phaseRefreshMs: 1 });
  await worker.workers.heartbeat('worker-1');
  const held = new Map<string, Lease>();
  for (const [index, leaseKey] of ['shard-1', 'shard-2', 'shard-3', 'shard-4'].entries()) {
    const created = await worker.leases.create({
      leaseKey,
      checkpoint: ExtendedSequenceNumber.TRIM_HORIZON,
    });
    if (!created.ok) throw new Error('create failed');
    if (leaseKey === 'shard-4') continue;
    const taken = await worker.leases.take(leaseKey, created.lease.leaseCounter, 'worker-1');
    if (!taken.ok) throw new Error('take failed');
    const checkpointed = await worker.leases.checkpoint(leaseKey, taken.lease.leaseCounter, {
      checkpoint: ExtendedSequenceNumber.of(String(100 + index)),
    });
    if (!checkpointed.ok) throw new Error('checkpoint failed');
    held.set(leaseKey, checkpointed.lease);
  }
  await startLiveMigration({ from, to });
  await to.leases.delete('shard-3'); // a copy the cut-over has to create
  await to.leases.create({ leaseKey: 'stale', checkpoint: ExtendedSequenceNumber.of('1') }); // and one to remove
  return { worker, held };
}

/** The fleet can run on the target: complete, unguarded, every lease there, holders carry on. */
async function expectRunningOnTarget(
  pair: Awaited<ReturnType<(typeof pairs.kinds)[number]['open']>>,
  worker: ReturnType<typeof createMigratingLeaseStore>,
  held: Map<string, Lease>,
  context: string,
): Promise<void> {
  const { from, to, newTo } = pair;
  const state = await readLiveMigrationState(from, to);
  expect(state.phase, context).toBe('complete');
  expect(state.targetGuarded, context).toBe(false);
  for (const row of await from.leases.list())
    expect(isSealedLease(row), `${context}: ${row.leaseKey}`).toBe(true);
  const plainTarget = newTo();
  // A plain target worker starts (the consumer refuses to start on a store with a marker).
  expect(await plainTarget.admin.getMigrationMarker(), context).toBeNull();
  const leases = await plainTarget.leases.list();
  expect(
    leases.map((lease) => lease.leaseKey),
    context,
  ).toEqual(['shard-1', 'shard-2', 'shard-3', 'shard-4']);
  // The migrating worker carries on with the counters it holds, in the target.
  for (const [leaseKey, lease] of held) {
    const renewed = await worker.leases.renew(leaseKey, lease.leaseCounter);
    expect(renewed.ok, `${context}: ${leaseKey} renewal`).toBe(true);
    if (renewed.ok) {
      expect(renewed.lease.checkpoint.equals(lease.checkpoint), context).toBe(true);
      held.set(leaseKey, renewed.lease);
    }
  }
  // And a plain target worker takes the free lease.
  const free = leases.find((lease) => lease.leaseKey === 'shard-4') as Lease;
  expect(
    (await plainTarget.leases.take('shard-4', free.leaseCounter, 'plain-target-worker')).ok,
    context,
  ).toBe(true);
  expect((await liveMigrationStatus({ from, to })).nextStep, context).toContain('redeploy the workers');
}

describe.each(pairs.kinds)('an interrupted cut-over ($name)', (kind) => {
  it.skipIf(kind.skip !== null)(
    'killed after any one of its writes, finishes when run again, and the fleet runs on the target',
    async () => {
      let completedUndisturbed = false;
      for (let writes = 1; !completedUndisturbed; writes++) {
        expect(writes, 'the cut-over never finished undisturbed').toBeLessThan(40);
        const pair = await kind.open(`resume-${writes}`);
        const { worker, held } = await prepare(pair);
        const killer = killedAfter(writes);
        const first = await cutOverLiveMigration({
          from: killer.wrap(pair.from),
          to: killer.wrap(pair.to),
          ...fast,
        }).then(
          () => null,
          (error: unknown) => error,
        );
        if (first === null) {
          completedUndisturbed = true;
          // Its ten writes (the cutover marker, a copy, four seals, a stale copy removed, the target
          // and complete markers, the guard lifted): killed after each of the first nine, and after
          // the last there is nothing left to do.
          expect(writes).toBe(10);
          await expectRunningOnTarget(pair, worker, held, 'undisturbed');
          continue;
        }
        expect(first, `killed after write ${writes}`).toBeInstanceOf(Killed);
        const context = `killed after write ${writes}`;
        const interruptedIn = (await readLiveMigrationState(pair.from, pair.to)).phase;
        const stages: CutOverStage[] = [];
        await cutOverLiveMigration({
          from: pair.from,
          to: pair.to,
          ...fast,
          onStage: (stage) => stages.push(stage),
        });
        if (interruptedIn === 'cutover') {
          // Workers may not have read the cutover phase yet: wait for them before anything else.
          expect(stages[0], `${context}: ${stages.join(', ')}`).toBe('settling');
        }
        await expectRunningOnTarget(pair, worker, held, context);
      }
    },
  );

  it.skipIf(kind.skip !== null)(
    'stopped between marking complete and lifting the guard: status and abort say to run it again',
    async () => {
      const pair = await kind.open('complete-guarded');
      await prepare(pair);
      await cutOverLiveMigration({ from: pair.from, to: pair.to, ...fast });
      // The guard as a run that died right before lifting it leaves it.
      await pair.to.admin.setMigrationMarker({
        migratedTo: pendingMarkerText(pair.from.description),
        migratedAt: new Date(0),
      });
      const status = await liveMigrationStatus({ from: pair.from, to: pair.to });
      expect(status).toMatchObject({ phase: 'complete', targetGuarded: true });
      expect(status.nextStep).toContain('run `kcl-migrate cutover` again');
      await expect(abortLiveMigration({ from: pair.from, to: pair.to })).rejects.toThrow(
        /run `kcl-migrate cutover` again/,
      );
      const report = await cutOverLiveMigration({ from: pair.from, to: pair.to, ...fast });
      expect(report).toMatchObject({ startedIn: 'complete', moved: 0 });
      expect(await pair.to.admin.getMigrationMarker()).toBeNull();
    },
  );
});
