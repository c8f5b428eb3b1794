import { compareLeaseKeys } from '@kcl/core';
import { sequence } from '../case-fixtures.js';
import { caseGroup } from '../conformance-case.js';

/** Unusual lease keys and worker ids. */
export const keyCases = caseGroup('keys', {
  'unusual but legal lease keys round-trip and sort by bytes': async ({ store, assert, check }) => {
    const keys = [
      '123456789012:orders:1600000000:shardId-000000000007',
      "shard'; DROP TABLE leases; --",
      'shard "quoted" \\ backslash',
      'space in key',
      'ünïcödé-shard-😀',
      '%_wildcards_%',
      `long-${'k'.repeat(200)}`,
      'a',
    ];
    for (const leaseKey of keys) {
      const lease = await check.createTaken(store, leaseKey, `owner of ${leaseKey.slice(0, 10)}`);
      await check.stored(store, lease);
    }
    assert.equal(
      (await store.leases.list()).map((lease) => lease.leaseKey),
      [...keys].sort(compareLeaseKeys),
    );
    for (const leaseKey of keys) await store.leases.delete(leaseKey);
    assert.equal(await store.leases.list(), []);
  },
  'keys that differ only in trailing spaces or case are distinct leases': async ({
    store,
    assert,
    check,
  }) => {
    const keys = ['shard', 'shard ', 'shard  ', 'Shard', 'shard\t'];
    for (const [index, leaseKey] of keys.entries()) {
      await check.create(store, { leaseKey, checkpoint: sequence(String(index + 1)) });
    }
    for (const [index, leaseKey] of keys.entries()) {
      assert.equal(
        (await store.leases.get(leaseKey))?.checkpoint.toString(),
        String(index + 1),
        `lease ${JSON.stringify(leaseKey)}`,
      );
    }
    assert.equal(
      (await store.leases.list()).map((lease) => lease.leaseKey),
      [...keys].sort(compareLeaseKeys),
    );
    await store.leases.delete('shard ');
    assert.equal((await store.leases.list()).length, keys.length - 1, 'only the one key deleted');
  },
  'unusual worker ids round-trip': async ({ store, assert, check }) => {
    const workerIds = ["host-1:pid'7", 'worker with spaces', 'wörker-✓', 'x'.repeat(200)];
    for (const workerId of workerIds) {
      await store.workers.heartbeat(workerId, { note: 'quote " and \' and \\' });
      await check.createTaken(store, `lease-of-${workerIds.indexOf(workerId)}`, workerId);
    }
    const listed = await store.workers.list();
    assert.equal(listed.map((worker) => worker.workerId).sort(), [...workerIds].sort());
    assert.equal(listed[0]?.metadata, { note: 'quote " and \' and \\' });
    const owners = (await store.leases.list()).map((lease) => lease.owner).sort();
    assert.equal(owners, [...workerIds].sort());
  },
});
