import { sequence, shardId } from '../case-fixtures.js';
import { caseGroup } from '../conformance-case.js';
import { leaseSnapshot } from '../lease-snapshot.js';

/** A stream identifier as the Java KCL writes it in multi-stream mode: account:name:creation epoch. */
const STREAM = '123456789012:orders:1700000000';

/** What contract v2 added: stream identity, hand-off state, scans, heartbeat metadata, close(). */
export const v2Cases = caseGroup('v2', {
  'a lease round-trips its stream identifier through every write': async ({ store, assert, check }) => {
    const created = await check.create(store, {
      leaseKey: `${STREAM}:${shardId(1)}`,
      streamIdentifier: STREAM,
    });
    assert.equal(created.streamIdentifier, STREAM);
    const taken = check.ok(
      await store.leases.take(created.leaseKey, created.leaseCounter, 'worker-a'),
      'take',
    );
    const renewed = check.ok(await store.leases.renew(taken.leaseKey, taken.leaseCounter), 'renew');
    const checkpointed = check.ok(
      await store.leases.checkpoint(renewed.leaseKey, renewed.leaseCounter, { checkpoint: sequence('7') }),
      'checkpoint',
    );
    await store.leases.updateMeta(checkpointed.leaseKey, { childShardIds: [shardId(2)] });
    const released = check.ok(
      await store.leases.release(checkpointed.leaseKey, checkpointed.leaseCounter),
      'release',
    );
    assert.equal(released.streamIdentifier, STREAM);
    assert.equal((await store.leases.get(created.leaseKey))?.streamIdentifier, STREAM, 'stored');
    const plain = await check.create(store, { leaseKey: shardId(9) });
    assert.equal(plain.streamIdentifier, null, 'a single-stream lease has none');
  },
  'a hand-off state round-trips, and a take or release ends it': async ({ store, assert, check }) => {
    const deadline = new Date('2030-01-02T03:04:05.678Z');
    const created = await check.create(store, {
      leaseKey: shardId(1),
      owner: 'worker-a',
      handoff: { from: 'worker-a', to: 'worker-b', deadline },
    });
    const stored = await store.leases.get(shardId(1));
    assert.equal(leaseSnapshot(stored), leaseSnapshot(created), 'read back as written');
    assert.equal(stored?.handoff?.deadline?.getTime(), deadline.getTime(), 'deadline to the millisecond');
    assert.equal(
      [stored?.owner, stored?.handoff?.from, stored?.handoff?.to],
      ['worker-a', 'worker-a', 'worker-b'],
    );
    const renewed = check.ok(await store.leases.renew(shardId(1), created.leaseCounter), 'renew');
    assert.equal(renewed.handoff?.to, 'worker-b', 'a renewal keeps it');
    const checkpointed = check.ok(
      await store.leases.checkpoint(shardId(1), renewed.leaseCounter, { checkpoint: sequence('5') }),
      'checkpoint',
    );
    assert.equal(checkpointed.handoff?.to, 'worker-b', 'a checkpoint keeps it');
    const taken = check.ok(
      await store.leases.take(shardId(1), checkpointed.leaseCounter, 'worker-b'),
      'take',
    );
    assert.equal([taken.owner, taken.handoff], ['worker-b', null]);
    assert.equal((await store.leases.get(shardId(1)))?.handoff, null, 'stored without it');
    const again = await check.create(store, {
      leaseKey: shardId(2),
      owner: 'worker-a',
      handoff: { from: 'worker-a', to: 'worker-c', deadline: null },
    });
    assert.equal(again.handoff?.deadline, null, 'a hand-off without a deadline');
    const released = check.ok(await store.leases.release(shardId(2), again.leaseCounter), 'release');
    assert.equal([released.owner, released.handoff], [null, null]);
  },
  'a scan lists every lease of the application, and no unreadable rows in a healthy table': async ({
    store,
    otherStore,
    assert,
    check,
  }) => {
    await check.create(store, { leaseKey: shardId(2) });
    await check.create(store, { leaseKey: shardId(1) });
    const other = await otherStore();
    await check.create(other, { leaseKey: shardId(3) });
    const scan = await store.admin.scan();
    assert.equal(
      scan.leases.map((lease) => lease.leaseKey),
      [shardId(1), shardId(2)],
    );
    assert.equal(scan.unreadable, []);
  },
  'a heartbeat without metadata keeps the last metadata; with metadata, replaces it': async ({
    store,
    assert,
  }) => {
    await store.workers.heartbeat('worker-a', { role: 'migrating', started: '1' });
    const kept = await store.workers.heartbeat('worker-a');
    assert.equal(kept.metadata, { role: 'migrating', started: '1' });
    const replaced = await store.workers.heartbeat('worker-a', { started: '2' });
    assert.equal(replaced.metadata, { started: '2' });
    assert.equal((await store.workers.list())[0]?.metadata, { started: '2' });
  },
  'close() can be called twice': async ({ harness, freshApplicationName }) => {
    const store = await harness.createStore(freshApplicationName('close'));
    await store.admin.ensureSchema();
    await store.close();
    await store.close();
  },
});
