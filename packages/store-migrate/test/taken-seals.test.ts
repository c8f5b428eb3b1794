import type { Lease } from '@kcl/core';
import { ExtendedSequenceNumber, leasesEqual } from '@kcl/core';
import { ManualClock } from '@kcl/testkit';
import { afterAll, describe, expect, it } from 'vitest';
import type { CutOverStage } from '../src/index.js';
import {
  createMigratingLeaseStore,
  cutOverLiveMigration,
  isSealedLease,
  LiveMigrationRefusedError,
  liveMigrationStatus,
  startLiveMigration,
} from '../src/index.js';
import { intercepted } from './support/intercepted.js';
import { openStorePairs } from './support/store-pairs.js';

// A sealed source row looks like an ordinary expired lease to a Java KCL worker, or to a kcl worker
// not running the migrating store. If one takes it, the lease has two live rows: the target row its
// migrating owner keeps writing (newer counter and checkpoint), and the source row the other worker
// now holds. A move must never replace that target row with the source's: the taken seal is
// reported, not silently undone. Likewise a backfill still running when the cut-over starts must not
// put back a lease that was moved or deleted.

const pairs = await openStorePairs();
afterAll(() => pairs.close());

const esn = (value: string) => ExtendedSequenceNumber.of(value);
const fast = { watchMs: 1, phaseRefreshMs: 1, settleMarginMs: 0 } as const;

function ok(result: { ok: boolean; lease?: Lease; reason?: string }): Lease {
  if (!result.ok || result.lease === undefined) throw new Error(`the write lost: ${result.reason}`);
  return result.lease;
}

class Interrupted extends Error {}

/** A migrating worker holding shard-1 and shard-2, their copies made, and a cut-over stopped after `stopAfter`. */
async function movedThenInterrupted(
  pair: Awaited<ReturnType<(typeof pairs.kinds)[number]['open']>>,
  stopAfter: CutOverStage,
) {
  const { from, to, newFrom, newTo } = pair;
  const worker = createMigratingLeaseStore({ from: newFrom(), to: newTo(), phaseRefreshMs: 1 });
  await worker.workers.heartbeat('worker-1');
  const held = new Map<string, Lease>();
  for (const leaseKey of ['shard-1', 'shard-2']) {
    const created = ok(await worker.leases.create({ leaseKey, checkpoint: esn('10') }));
    const taken = ok(await worker.leases.take(leaseKey, created.leaseCounter, 'worker-1'));
    held.set(
      leaseKey,
      ok(await worker.leases.checkpoint(leaseKey, taken.leaseCounter, { checkpoint: esn('20') })),
    );
  }
  await startLiveMigration({ from, to });
  await expect(
    cutOverLiveMigration({
      from,
      to,
      ...fast,
      onStage: (stage) => {
        if (stage === stopAfter) throw new Interrupted(stage);
      },
    }),
  ).rejects.toBeInstanceOf(Interrupted);
  expect(isSealedLease((await from.leases.get('shard-1')) as Lease)).toBe(true);
  return { worker, held };
}

describe.each(pairs.kinds)('a taken seal ($name)', (kind) => {
  it.skipIf(kind.skip !== null)(
    'taken by a worker without the migrating store, is reported by the resumed cut-over and status; the newer target row is kept',
    async () => {
      const pair = await kind.open('taken-above');
      const { from, to, newFrom } = pair;
      const { worker, held } = await movedThenInterrupted(pair, 'target-marked');
      // The migrating owner carries on in the target: renews and checkpoints further.
      const lease = held.get('shard-1') as Lease;
      const renewed = ok(await worker.leases.renew('shard-1', lease.leaseCounter));
      const checkpointed = ok(
        await worker.leases.checkpoint('shard-1', renewed.leaseCounter, { checkpoint: esn('500') }),
      );
      const targetRow = (await to.leases.get('shard-1')) as Lease;
      expect(leasesEqual(targetRow, checkpointed)).toBe(true);
      // A Java (or plain kcl) worker sees the seal as an expired lease and takes it.
      const seal = (await from.leases.get('shard-1')) as Lease;
      const foreign = newFrom();
      ok(await foreign.leases.take('shard-1', seal.leaseCounter, 'java-worker-1'));

      const stages: Array<[CutOverStage, string]> = [];
      const report = await cutOverLiveMigration({
        from,
        to,
        ...fast,
        onStage: (stage, detail) => stages.push([stage, detail]),
      });

      expect(leasesEqual((await to.leases.get('shard-1')) as Lease, targetRow)).toBe(true);
      expect(report.takenSeals).toEqual([
        expect.objectContaining({
          leaseKey: 'shard-1',
          sourceOwner: 'java-worker-1',
          targetCounter: targetRow.leaseCounter,
        }),
      ]);
      expect(
        stages.some(([stage, detail]) => stage === 'taken-seal' && detail.includes('java-worker-1')),
      ).toBe(true);
      const status = await liveMigrationStatus({ from, to });
      expect(status.phase).toBe('complete');
      expect(status.takenSeals.map((taken) => taken.leaseKey)).toEqual(['shard-1']);
      expect(status.nextStep).toContain('java-worker-1');
      // The owner is not disturbed.
      expect(
        ok(await worker.leases.renew('shard-1', checkpointed.leaseCounter)).checkpoint.sequenceNumber,
      ).toBe('500');
    },
  );

  it.skipIf(kind.skip !== null)(
    'taken and renewed past the target row’s counter, is still not moved over the target row',
    async () => {
      const pair = await kind.open('taken-below');
      const { from, to, newFrom } = pair;
      await movedThenInterrupted(pair, 'target-marked');
      const targetRow = (await to.leases.get('shard-1')) as Lease;
      const foreign = newFrom();
      let lease = ok(
        await foreign.leases.take(
          'shard-1',
          ((await from.leases.get('shard-1')) as Lease).leaseCounter,
          'java-worker-1',
        ),
      );
      for (let renewal = 0; renewal < 5; renewal++)
        lease = ok(await foreign.leases.renew('shard-1', lease.leaseCounter));
      expect(lease.leaseCounter).toBeGreaterThan(targetRow.leaseCounter);

      const report = await cutOverLiveMigration({ from, to, ...fast });

      expect(leasesEqual((await to.leases.get('shard-1')) as Lease, targetRow)).toBe(true);
      expect(report.takenSeals.map((taken) => taken.leaseKey)).toEqual(['shard-1']);
    },
  );

  it.skipIf(kind.skip !== null)(
    'taken during the cut-over that moved it, even by a worker with a migrating worker’s name, is not moved again',
    async () => {
      const { from, to, newFrom, newTo } = await kind.open('taken-same-run');
      const worker = createMigratingLeaseStore({ from: newFrom(), to: newTo(), phaseRefreshMs: 1 });
      await worker.workers.heartbeat('worker-1');
      const created = ok(await worker.leases.create({ leaseKey: 'shard-1', checkpoint: esn('10') }));
      ok(await worker.leases.take('shard-1', created.leaseCounter, 'worker-1'));
      await startLiveMigration({ from, to });
      const clock = new ManualClock();
      const stages: CutOverStage[] = [];
      const running = cutOverLiveMigration({
        from,
        to,
        clock,
        watchMs: 10,
        phaseRefreshMs: 100,
        settleMarginMs: 0,
        onStage: (stage) => stages.push(stage),
      });
      for (let step = 0; step < 200 && !stages.includes('target-marked'); step++) {
        await new Promise((resolve) => setTimeout(resolve, 5));
        await clock.advance(10);
      }
      expect(stages).toContain('target-marked');
      const targetRow = (await to.leases.get('shard-1')) as Lease;
      // While the cut-over waits for the workers, a plain source worker that (wrongly) uses the same
      // worker name takes the sealed row. Owner and counter now look like a copy that is behind.
      const seal = (await from.leases.get('shard-1')) as Lease;
      ok(await newFrom().leases.take('shard-1', seal.leaseCounter, 'worker-1'));
      for (let step = 0; step < 200 && !stages.includes('complete'); step++) {
        await new Promise((resolve) => setTimeout(resolve, 5));
        await clock.advance(50);
      }
      const report = await running;
      expect(leasesEqual((await to.leases.get('shard-1')) as Lease, targetRow)).toBe(true);
      expect(report.takenSeals.map((taken) => taken.leaseKey)).toEqual(['shard-1']);
    },
  );
});

describe.each(pairs.kinds)('a backfill still running at cut-over ($name)', (kind) => {
  it.skipIf(kind.skip !== null)('puts back neither a moved nor a deleted lease', async () => {
    const { from, to, newFrom, newTo } = await kind.open('late-backfill');
    const worker = createMigratingLeaseStore({ from: newFrom(), to: newTo(), phaseRefreshMs: 1 });
    await worker.workers.heartbeat('worker-1');
    for (const leaseKey of ['shard-moved', 'shard-deleted']) {
      const created = ok(await worker.leases.create({ leaseKey, checkpoint: esn('10') }));
      ok(await worker.leases.take(leaseKey, created.leaseCounter, 'worker-1'));
    }
    await startLiveMigration({ from, to });

    // `kcl-migrate --live` runs again and has listed the source, slowly …
    let release: () => void = () => undefined;
    let listed = false;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    const slowFrom = intercepted(from, async (operation, call) => {
      const result = await call();
      if (operation === 'leases.list' || operation === 'admin.scan') {
        listed = true;
        await gate;
      }
      return result;
    });
    const backfill = startLiveMigration({ from: slowFrom, to });
    while (!listed) await new Promise((resolve) => setTimeout(resolve, 5));
    // … meanwhile the cut-over runs, the owner checkpoints one lease in the target and finishes the
    // other, whose lease is deleted there.
    await cutOverLiveMigration({ from, to, ...fast });
    const moved = ok(
      await worker.leases.checkpoint(
        'shard-moved',
        ((await to.leases.get('shard-moved')) as Lease).leaseCounter,
        {
          checkpoint: esn('99'),
        },
      ),
    );
    await worker.leases.delete('shard-deleted');
    release();
    await expect(backfill).rejects.toSatisfy(LiveMigrationRefusedError.is);

    expect(await to.leases.get('shard-deleted')).toBeNull();
    expect(leasesEqual((await to.leases.get('shard-moved')) as Lease, moved)).toBe(true);
    expect(await to.admin.getMigrationMarker()).toBeNull();
  });
});
