import { sequence, shardId } from '../case-fixtures.js';
import { caseGroup } from '../conformance-case.js';

/** Several applications sharing one table never see each other. */
export const sharingCases = caseGroup('sharing', {
  'two applications on one table never see or touch each other’s leases': async ({
    store,
    otherStore,
    assert,
    check,
  }) => {
    const other = await otherStore();
    const mine = await check.createTaken(store, shardId(1), 'mine');
    const theirs = await check.create(other, { leaseKey: shardId(1), checkpoint: sequence('42') });
    await check.create(other, { leaseKey: shardId(2) });
    assert.equal(
      (await store.leases.list()).map((lease) => lease.leaseKey),
      [shardId(1)],
      'I list only mine',
    );
    assert.equal((await other.leases.list()).length, 2, 'they list only theirs');
    check.ok(await other.leases.take(shardId(1), theirs.leaseCounter, 'theirs'), 'they take theirs');
    await check.stored(store, mine);
    check.ok(await store.leases.renew(shardId(1), mine.leaseCounter), 'my counter is mine alone');
    await other.leases.delete(shardId(2));
    await other.leases.delete(shardId(1));
    assert.equal((await store.leases.get(shardId(1)))?.owner, 'mine', 'their delete left mine');
    assert.equal(await store.leases.get(shardId(2)), null, 'their lease never appeared here');
  },
  'workers and markers are per application': async ({ store, otherStore, assert }) => {
    const other = await otherStore();
    await store.workers.heartbeat('worker-1');
    await other.workers.heartbeat('worker-1');
    await other.workers.heartbeat('worker-2');
    assert.equal(
      (await store.workers.list()).map((worker) => [worker.workerId, worker.heartbeat]),
      [['worker-1', 1]],
    );
    await other.workers.remove('worker-1');
    assert.equal((await store.workers.list()).length, 1, 'their removal left mine');
    await other.admin.setMigrationMarker({ migratedTo: 'elsewhere', migratedAt: new Date(0) });
    assert.equal(await store.admin.getMigrationMarker(), null, 'their marker is not mine');
  },
  'application names that prefix or extend each other stay apart': async ({
    otherStore,
    freshApplicationName,
    assert,
    check,
  }) => {
    const base = freshApplicationName('team');
    const names = [base, `${base}:x`, `${base}#x`, `${base}/x`, `${base}x`, `${base} x`];
    const stores = await Promise.all(names.map((name) => otherStore(name)));
    for (const [index, store] of stores.entries()) {
      // Keys chosen so that naive "app + separator + key" layouts would collide.
      await check.create(store, { leaseKey: `x:${shardId(1)}`, checkpoint: sequence(String(index + 1)) });
      await check.create(store, { leaseKey: shardId(1), checkpoint: sequence(String(index + 100)) });
      await store.workers.heartbeat(`w${index}`);
    }
    for (const [index, store] of stores.entries()) {
      const leases = await store.leases.list();
      assert.equal(leases.length, 2, `${names[index]} has two leases`);
      assert.equal(
        leases.map((lease) => lease.checkpoint.toString()).sort(),
        [String(index + 1), String(index + 100)].sort(),
        `${names[index]} reads its own checkpoints`,
      );
      assert.equal(
        (await store.workers.list()).map((worker) => worker.workerId),
        [`w${index}`],
      );
    }
  },
  'an application name with quotes, spaces and non-ASCII characters works': async ({
    otherStore,
    freshApplicationName,
    assert,
    check,
  }) => {
    const name = freshApplicationName(`it's "billing" – Zürich ✓ %_\\`);
    const store = await otherStore(name);
    assert.equal(store.applicationName, name);
    const lease = await check.createTaken(store, shardId(1));
    await check.stored(store, lease);
    await store.workers.heartbeat('w');
    assert.equal((await store.leases.list()).length, 1);
    assert.equal((await store.workers.list()).length, 1);
  },
});
