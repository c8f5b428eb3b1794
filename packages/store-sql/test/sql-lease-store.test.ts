import { ExtendedSequenceNumber } from '@kcl/core';
import { ManualClock } from '@kcl/testkit';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SqlLeaseStore } from '../src/index.js';
import { createSqlLeaseStore, MAX_RENEWALS_PER_STATEMENT } from '../src/index.js';
import type { TestDatabase } from './test-databases.js';
import { checkDialects, TEST_DIALECTS } from './test-databases.js';

/** Behaviour the conformance suite leaves open, checked on every dialect. */
const checks = await checkDialects();
const LATEST = ExtendedSequenceNumber.LATEST;

for (const dialect of TEST_DIALECTS) {
  const skip = checks.get(dialect.flavor)?.reason ?? null;

  describe.skipIf(skip !== null)(`${dialect.flavor}: store details`, () => {
    let database: TestDatabase;
    let store: SqlLeaseStore;
    let updates = 0;

    beforeAll(async () => {
      database = await dialect.createDatabase();
      const db = database.connect({
        log: (event) => {
          if (event.level === 'query' && /^\s*update\b/i.test(event.query.sql)) updates += 1;
        },
      });
      store = createSqlLeaseStore({ db, applicationName: 'details' });
      await store.ensureSchema();
    });

    afterAll(async () => {
      await database?.drop();
    });

    it(`renews more than ${MAX_RENEWALS_PER_STATEMENT} leases with one UPDATE per ${MAX_RENEWALS_PER_STATEMENT}`, async () => {
      const count = MAX_RENEWALS_PER_STATEMENT + 1;
      const keys = Array.from({ length: count }, (_, index) => `bulk-${String(index).padStart(5, '0')}`);
      // Inserted in one statement: the test is about renewal, not about creating leases.
      await sql`insert into kcl_leases (application_name, lease_key, lease_counter, checkpoint_sequence_number,
          checkpoint_sub_sequence_number, owner_switches_since_checkpoint, parent_shard_ids, child_shard_ids)
        values ${sql.join(keys.map((key) => sql`(${'details'}, ${key}, 7, ${'LATEST'}, 0, 0, ${'[]'}, ${'[]'})`))}`.execute(
        database.db,
      );
      updates = 0;
      const results = await store.renewLeases(keys.map((leaseKey) => ({ leaseKey, leaseCounter: 7 })));
      expect(updates).toBe(2);
      expect(results.map((result) => (result.ok ? result.lease.leaseCounter : result.reason))).toEqual(
        keys.map(() => 8),
      );
      expect(results.map((result) => (result.ok ? result.lease.leaseKey : null))).toEqual(keys);
    });

    it('renews a key named twice once; the repeat loses with counter-mismatch', async () => {
      const created = await store.createLeaseIfAbsent({ leaseKey: 'twice', checkpoint: LATEST });
      expect(created.ok).toBe(true);
      const results = await store.renewLeases([
        { leaseKey: 'twice', leaseCounter: 0 },
        { leaseKey: 'twice', leaseCounter: 0 },
      ]);
      expect(results.map((result) => (result.ok ? result.lease.leaseCounter : result.reason))).toEqual([
        1,
        'counter-mismatch',
      ]);
    });

    it('treats a counter that is not an integer as a lost race, without a database error', async () => {
      await store.createLeaseIfAbsent({ leaseKey: 'fractional', checkpoint: LATEST });
      expect(await store.renewLease('fractional', 0.5)).toEqual({ ok: false, reason: 'counter-mismatch' });
      expect(await store.takeLease('absent', Number.NaN, 'w')).toEqual({ ok: false, reason: 'not-found' });
      expect(
        await store.renewLeases([{ leaseKey: 'fractional', leaseCounter: Number.POSITIVE_INFINITY }]),
      ).toEqual([{ ok: false, reason: 'counter-mismatch' }]);
      expect((await store.getLease('fractional'))?.leaseCounter).toBe(0);
    });

    it('stamps heartbeats with the injected clock', async () => {
      const clock = new ManualClock({ now: Date.UTC(2030, 4, 6, 7, 8, 9, 123) });
      const clocked = createSqlLeaseStore({ db: database.db, applicationName: 'clocked', clock });
      const first = await clocked.heartbeatWorker('w', { role: 'test' });
      expect(first.lastHeartbeatAt.toISOString()).toBe('2030-05-06T07:08:09.123Z');
      await clock.advance(1_500);
      await clocked.heartbeatWorker('w', { role: 'test' });
      const [listed] = await clocked.listWorkers();
      expect([listed?.heartbeat, listed?.lastHeartbeatAt.toISOString(), listed?.metadata]).toEqual([
        2,
        '2030-05-06T07:08:10.623Z',
        { role: 'test' },
      ]);
    });

    it('records child shard ids and the hash range together, and reads an empty meta update as a read', async () => {
      await store.createLeaseIfAbsent({ leaseKey: 'parent', checkpoint: LATEST });
      const updated = await store.updateLeaseMeta('parent', { childShardIds: ['c2', 'c1', 'c1'] });
      expect(updated?.childShardIds).toEqual(['c1', 'c2']);
      expect((await store.updateLeaseMeta('parent', {}))?.childShardIds).toEqual(['c1', 'c2']);
      expect(await store.updateLeaseMeta('absent', {})).toBeNull();
    });
  });
}
