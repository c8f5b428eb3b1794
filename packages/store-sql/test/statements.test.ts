import type { Lease } from '@kcl/core';
import { ExtendedSequenceNumber } from '@kcl/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SqlFlavorName, SqlLeaseStore } from '../src/index.js';
import { createSqlLeaseStore } from '../src/index.js';
import type { TestDatabase } from './test-databases.js';
import { checkDialects, TEST_DIALECTS } from './test-databases.js';

/**
 * How many statements (and so round trips) each operation sends, counted with Kysely's `log`
 * callback, which sees every statement including BEGIN and COMMIT.
 */
type Operation =
  | 'createLeaseIfAbsent'
  | 'getLease'
  | 'listLeases'
  | 'renewLease'
  | 'renewLease (lost)'
  | 'takeLease'
  | 'updateCheckpoint'
  | 'releaseLease'
  | 'updateLeaseMeta'
  | 'renewLeases (100)'
  | 'renewLeases (100, 2 lost)'
  | 'heartbeatWorker'
  | 'ensureSchema (current)';

const ONE_STATEMENT_EACH: Record<Operation, number> = {
  createLeaseIfAbsent: 1,
  getLease: 1,
  listLeases: 1,
  renewLease: 1,
  'renewLease (lost)': 2,
  takeLease: 1,
  updateCheckpoint: 1,
  releaseLease: 1,
  updateLeaseMeta: 1,
  'renewLeases (100)': 1,
  'renewLeases (100, 2 lost)': 2,
  heartbeatWorker: 1,
  'ensureSchema (current)': 1,
};

const EXPECTED: Record<SqlFlavorName, Record<Operation, number>> = {
  postgres: ONE_STATEMENT_EACH,
  sqlite: ONE_STATEMENT_EACH,
  // No UPDATE … RETURNING: begin, update, select, commit (the select also classifies a lost race).
  mysql: {
    ...ONE_STATEMENT_EACH,
    renewLease: 4,
    'renewLease (lost)': 4,
    takeLease: 4,
    updateCheckpoint: 4,
    releaseLease: 4,
    updateLeaseMeta: 4,
    // begin, select … for update, update, commit
    'renewLeases (100)': 4,
    'renewLeases (100, 2 lost)': 4,
  },
};

const checks = await checkDialects();

for (const dialect of TEST_DIALECTS) {
  const skip = checks.get(dialect.flavor)?.reason ?? null;

  describe.skipIf(skip !== null)(`${dialect.flavor}: statements per operation`, () => {
    let database: TestDatabase;
    let store: SqlLeaseStore;
    const statements: string[] = [];
    let held: Lease[] = [];

    const count = async (run: () => Promise<unknown>): Promise<string[]> => {
      statements.length = 0;
      await run();
      return [...statements];
    };

    beforeAll(async () => {
      database = await dialect.createDatabase();
      const db = database.connect({
        log: (event) => {
          if (event.level === 'query')
            statements.push(event.query.sql.trim().split(/\s+/)[0]?.toLowerCase() ?? '');
        },
      });
      store = createSqlLeaseStore({ db, applicationName: 'statements' });
      await store.ensureSchema();
      for (let index = 0; index < 100; index++) {
        const leaseKey = `shardId-${String(index).padStart(12, '0')}`;
        const created = await store.createLeaseIfAbsent({
          leaseKey,
          checkpoint: ExtendedSequenceNumber.TRIM_HORIZON,
        });
        if (!created.ok) throw new Error(`could not create ${leaseKey}`);
        const taken = await store.takeLease(leaseKey, 0, 'worker-a');
        if (!taken.ok) throw new Error(`could not take ${leaseKey}`);
      }
      held = await store.listLeases();
    });

    afterAll(async () => {
      await database?.drop();
    });

    it('renews 100 leases with one UPDATE statement', async () => {
      const sent = await count(async () => {
        const results = await store.renewLeases(
          held.map(({ leaseKey, leaseCounter }) => ({ leaseKey, leaseCounter })),
        );
        expect(results.every((result) => result.ok)).toBe(true);
      });
      expect(sent.filter((statement) => statement === 'update')).toHaveLength(1);
      expect(sent).toHaveLength(EXPECTED[dialect.flavor]['renewLeases (100)']);
      held = await store.listLeases();
      expect(held.every((lease) => lease.leaseCounter === 2)).toBe(true);
    });

    it('sends the documented number of statements for every operation', async () => {
      const measured: Partial<Record<Operation, number>> = {};
      const measure = async (operation: Operation, run: () => Promise<unknown>): Promise<void> => {
        measured[operation] = (await count(run)).length;
      };
      const key = 'measured-lease';
      await measure('createLeaseIfAbsent', () =>
        store.createLeaseIfAbsent({ leaseKey: key, checkpoint: ExtendedSequenceNumber.TRIM_HORIZON }),
      );
      await measure('getLease', () => store.getLease(key));
      await measure('listLeases', () => store.listLeases());
      await measure('takeLease', () => store.takeLease(key, 0, 'worker-a'));
      await measure('renewLease', () => store.renewLease(key, 1));
      await measure('renewLease (lost)', () => store.renewLease(key, 1));
      await measure('updateCheckpoint', () =>
        store.updateCheckpoint(key, 2, { checkpoint: ExtendedSequenceNumber.of('1') }),
      );
      await measure('releaseLease', () => store.releaseLease(key, 3));
      await measure('updateLeaseMeta', () => store.updateLeaseMeta(key, { childShardIds: ['child'] }));
      const renewals = held.map(({ leaseKey, leaseCounter }) => ({ leaseKey, leaseCounter }));
      await measure('renewLeases (100)', () => store.renewLeases(renewals));
      await measure('renewLeases (100, 2 lost)', () =>
        store.renewLeases([
          ...renewals.slice(2).map((renewal) => ({ ...renewal, leaseCounter: renewal.leaseCounter + 1 })),
          { leaseKey: 'absent', leaseCounter: 0 },
          { leaseKey: renewals[0]?.leaseKey ?? '', leaseCounter: 0 },
        ]),
      );
      await measure('heartbeatWorker', () => store.heartbeatWorker('worker-a'));
      await measure('ensureSchema (current)', () => store.ensureSchema());
      expect(measured).toEqual(EXPECTED[dialect.flavor]);
      const lease = await store.getLease(key);
      expect([lease?.leaseCounter, lease?.owner, lease?.childShardIds]).toEqual([4, null, ['child']]);
    });
  });
}
