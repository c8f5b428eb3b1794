import { ExtendedSequenceNumber, LeaseStoreError } from '@kcl/core';
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
      await store.admin.ensureSchema();
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
      const results = await store.leases.renewMany(keys.map((leaseKey) => ({ leaseKey, leaseCounter: 7 })));
      expect(updates).toBe(2);
      expect(results.map((result) => (result.ok ? result.lease.leaseCounter : result.reason))).toEqual(
        keys.map(() => 8),
      );
      expect(results.map((result) => (result.ok ? result.lease.leaseKey : null))).toEqual(keys);
    });

    it('refuses to create a hand-off that does not come from the lease owner, as store-dynamo does', async () => {
      const refusal = async (init: Parameters<SqlLeaseStore['leases']['create']>[0]) => {
        const error = await store.leases.create(init).then(
          () => null,
          (caught: unknown) => caught,
        );
        expect(LeaseStoreError.is(error), String(error)).toBe(true);
        expect([(error as LeaseStoreError).code, (error as LeaseStoreError).retryable]).toEqual([
          'LEASE_DATA_INVALID',
          false,
        ]);
        expect(await store.leases.get(init.leaseKey)).toBeNull();
        return (error as LeaseStoreError).message;
      };
      const handoff = { from: 'worker-a', to: 'worker-b', deadline: null };
      expect(
        await refusal({ leaseKey: 'handoff-other-owner', checkpoint: LATEST, owner: 'worker-x', handoff }),
      ).toContain(
        'a hand-off comes from the lease\'s owner, but it names "worker-a" and the owner is "worker-x"; create it with owner equal to handoff.from',
      );
      expect(await refusal({ leaseKey: 'handoff-no-owner', checkpoint: LATEST, handoff })).toContain(
        'the owner is null',
      );
      expect(
        await refusal({
          leaseKey: 'handoff-to-nobody',
          checkpoint: LATEST,
          owner: 'worker-a',
          handoff: { ...handoff, to: '' },
        }),
      ).toContain("handoff.to must be the receiving worker's id (a non-empty string)");
      const created = await store.leases.create({
        leaseKey: 'handoff-from-owner',
        checkpoint: LATEST,
        owner: 'worker-a',
        handoff,
      });
      expect(created.ok && created.lease.handoff).toEqual(handoff);
    });

    it('renews a key named twice once; the repeat loses with counter-mismatch', async () => {
      const created = await store.leases.create({ leaseKey: 'twice', checkpoint: LATEST });
      expect(created.ok).toBe(true);
      const results = await store.leases.renewMany([
        { leaseKey: 'twice', leaseCounter: 0 },
        { leaseKey: 'twice', leaseCounter: 0 },
      ]);
      expect(results.map((result) => (result.ok ? result.lease.leaseCounter : result.reason))).toEqual([
        1,
        'counter-mismatch',
      ]);
    });

    it('treats a counter that is not an integer as a lost race, without a database error', async () => {
      await store.leases.create({ leaseKey: 'fractional', checkpoint: LATEST });
      expect(await store.leases.renew('fractional', 0.5)).toEqual({ ok: false, reason: 'counter-mismatch' });
      expect(await store.leases.take('absent', Number.NaN, 'w')).toEqual({ ok: false, reason: 'not-found' });
      expect(
        await store.leases.renewMany([{ leaseKey: 'fractional', leaseCounter: Number.POSITIVE_INFINITY }]),
      ).toEqual([{ ok: false, reason: 'counter-mismatch' }]);
      expect((await store.leases.get('fractional'))?.leaseCounter).toBe(0);
    });

    it('stamps heartbeats with the injected clock', async () => {
      const clock = new ManualClock({ now: Date.UTC(2030, 4, 6, 7, 8, 9, 123) });
      const clocked = createSqlLeaseStore({ db: database.db, applicationName: 'clocked', clock });
      const first = await clocked.workers.heartbeat('w', { role: 'test' });
      expect(first.lastHeartbeatAt.toISOString()).toBe('2030-05-06T07:08:09.123Z');
      await clock.advance(1_500);
      await clocked.workers.heartbeat('w', { role: 'test' });
      const [listed] = await clocked.workers.list();
      expect([listed?.heartbeat, listed?.lastHeartbeatAt.toISOString(), listed?.metadata]).toEqual([
        2,
        '2030-05-06T07:08:10.623Z',
        { role: 'test' },
      ]);
    });

    it('records child shard ids and the hash range together, and reads an empty meta update as a read', async () => {
      await store.leases.create({ leaseKey: 'parent', checkpoint: LATEST });
      const updated = await store.leases.updateMeta('parent', { childShardIds: ['c2', 'c1', 'c1'] });
      expect(updated?.childShardIds).toEqual(['c1', 'c2']);
      expect((await store.leases.updateMeta('parent', {}))?.childShardIds).toEqual(['c1', 'c2']);
      expect(await store.leases.updateMeta('absent', {})).toBeNull();
    });
  });
}
