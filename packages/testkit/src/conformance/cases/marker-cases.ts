import { shardId } from '../case-fixtures.js';
import { caseGroup } from '../conformance-case.js';

/** The migration marker. */
export const markerCases = caseGroup('marker', {
  'the migration marker is set, read and cleared': async ({ store, assert, check }) => {
    assert.equal(await store.admin.getMigrationMarker(), null, 'none at first');
    const migratedAt = new Date('2026-01-02T03:04:05.000Z');
    await store.admin.setMigrationMarker({ migratedTo: 'postgres table "kcl_leases"', migratedAt });
    const marker = await store.admin.getMigrationMarker();
    assert.equal(marker?.migratedTo, 'postgres table "kcl_leases"');
    assert.equal(marker?.migratedAt.toISOString(), migratedAt.toISOString());
    await store.admin.setMigrationMarker(null);
    assert.equal(await store.admin.getMigrationMarker(), null, 'cleared');
    await check.create(store, { leaseKey: shardId(1) });
    assert.equal((await store.leases.list()).length, 1, 'the marker is not a lease');
    assert.equal(await store.workers.list(), [], 'the marker is not a worker');
  },
});
