import { shardId } from '../case-fixtures.js';
import { caseGroup } from '../conformance-case.js';

/** Schema and identity: ensureSchema, version, capabilities, description. */
export const schemaCases = caseGroup('schema', {
  'ensureSchema is idempotent, also when run concurrently': async ({ store, assert, check }) => {
    await store.admin.ensureSchema();
    await Promise.all([store.admin.ensureSchema(), store.admin.ensureSchema(), store.admin.ensureSchema()]);
    await check.create(store, { leaseKey: shardId(0) });
    await store.admin.ensureSchema();
    assert.equal((await store.leases.list()).length, 1, 'ensureSchema keeps existing leases');
  },
  'declares version, application, capabilities and a description': async ({
    store,
    applicationName,
    assert,
  }) => {
    assert.equal(store.specificationVersion, 'v2');
    assert.equal(store.applicationName, applicationName);
    assert.equal(typeof store.capabilities.batchRenew, 'boolean');
    assert.equal(typeof store.capabilities.consistentReads, 'boolean');
    assert.equal(typeof store.capabilities.sessionLiveness, 'boolean');
    assert.equal(
      [typeof store.workers.attachSession, typeof store.workers.liveSessions],
      store.capabilities.sessionLiveness ? ['function', 'function'] : ['undefined', 'undefined'],
      'the session calls exist exactly when capabilities.sessionLiveness is true',
    );
    assert.ok(typeof store.description === 'string' && store.description.length > 0, 'description is set');
  },
});
