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
  | 'leases.create'
  | 'leases.get'
  | 'leases.list'
  | 'leases.renew'
  | 'leases.renew (lost)'
  | 'leases.take'
  | 'leases.checkpoint'
  | 'leases.release'
  | 'leases.requestHandoff'
  | 'leases.requestHandoff (lost)'
  | 'leases.completeHandoff'
  | 'leases.updateMeta'
  | 'leases.renewMany (100)'
  | 'leases.renewMany (100, 2 lost)'
  | 'workers.heartbeat'
  | 'workers.heartbeat (keeping metadata)'
  | 'admin.scan'
  | 'admin.ensureSchema (current)';

const ONE_STATEMENT_EACH: Record<Operation, number> = {
  'leases.create': 1,
  'leases.get': 1,
  'leases.list': 1,
  'leases.renew': 1,
  'leases.renew (lost)': 2,
  'leases.take': 1,
  'leases.checkpoint': 1,
  'leases.release': 1,
  'leases.requestHandoff': 1,
  // The lost race reads the row to tell handoff-mismatch from counter-mismatch and not-found.
  'leases.requestHandoff (lost)': 2,
  'leases.completeHandoff': 1,
  'leases.updateMeta': 1,
  'leases.renewMany (100)': 1,
  'leases.renewMany (100, 2 lost)': 2,
  'workers.heartbeat': 1,
  'workers.heartbeat (keeping metadata)': 1,
  'admin.scan': 1,
  'admin.ensureSchema (current)': 1,
};

const EXPECTED: Record<SqlFlavorName, Record<Operation, number>> = {
  postgres: ONE_STATEMENT_EACH,
  sqlite: ONE_STATEMENT_EACH,
  // No UPDATE … RETURNING: begin, update, select, commit (the select also classifies a lost race).
  mysql: {
    ...ONE_STATEMENT_EACH,
    'leases.renew': 4,
    'leases.renew (lost)': 4,
    'leases.take': 4,
    'leases.checkpoint': 4,
    'leases.release': 4,
    'leases.requestHandoff': 4,
    'leases.requestHandoff (lost)': 4,
    'leases.completeHandoff': 4,
    'leases.updateMeta': 4,
    // begin, select … for update, update, commit
    'leases.renewMany (100)': 4,
    'leases.renewMany (100, 2 lost)': 4,
    // begin, upsert, select (the metadata kept), commit
    'workers.heartbeat (keeping metadata)': 4,
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
      await store.admin.ensureSchema();
      for (let index = 0; index < 100; index++) {
        const leaseKey = `shardId-${String(index).padStart(12, '0')}`;
        const created = await store.leases.create({
          leaseKey,
          checkpoint: ExtendedSequenceNumber.TRIM_HORIZON,
        });
        if (!created.ok) throw new Error(`could not create ${leaseKey}`);
        const taken = await store.leases.take(leaseKey, 0, 'worker-a');
        if (!taken.ok) throw new Error(`could not take ${leaseKey}`);
      }
      held = await store.leases.list();
    });

    afterAll(async () => {
      await database?.drop();
    });

    it('renews 100 leases with one UPDATE statement', async () => {
      const sent = await count(async () => {
        const results = await store.leases.renewMany(
          held.map(({ leaseKey, leaseCounter }) => ({ leaseKey, leaseCounter })),
        );
        expect(results.every((result) => result.ok)).toBe(true);
      });
      expect(sent.filter((statement) => statement === 'update')).toHaveLength(1);
      expect(sent).toHaveLength(EXPECTED[dialect.flavor]['leases.renewMany (100)']);
      held = await store.leases.list();
      expect(held.every((lease) => lease.leaseCounter === 2)).toBe(true);
    });

    it('sends the documented number of statements for every operation', async () => {
      const measured: Partial<Record<Operation, number>> = {};
      const measure = async (operation: Operation, run: () => Promise<unknown>): Promise<void> => {
        measured[operation] = (await count(run)).length;
      };
      const key = 'measured-lease';
      await measure('leases.create', () =>
        store.leases.create({ leaseKey: key, checkpoint: ExtendedSequenceNumber.TRIM_HORIZON }),
      );
      await measure('leases.get', () => store.leases.get(key));
      await measure('leases.list', () => store.leases.list());
      await measure('leases.take', () => store.leases.take(key, 0, 'worker-a'));
      await measure('leases.renew', () => store.leases.renew(key, 1));
      await measure('leases.renew (lost)', () => store.leases.renew(key, 1));
      await measure('leases.checkpoint', () =>
        store.leases.checkpoint(key, 2, { checkpoint: ExtendedSequenceNumber.of('1') }),
      );
      await measure('leases.release', () => store.leases.release(key, 3));
      await measure('leases.updateMeta', () => store.leases.updateMeta(key, { childShardIds: ['child'] }));
      const handedOver = 'handed-over-lease';
      await store.leases.create({ leaseKey: handedOver, checkpoint: ExtendedSequenceNumber.TRIM_HORIZON });
      await store.leases.take(handedOver, 0, 'worker-a');
      const handoff = { from: 'worker-a', to: 'worker-b', deadline: null };
      await measure('leases.requestHandoff', () => store.leases.requestHandoff(handedOver, 1, handoff));
      await measure('leases.requestHandoff (lost)', () =>
        store.leases.requestHandoff(handedOver, 1, handoff),
      );
      await measure('leases.completeHandoff', () => store.leases.completeHandoff(handedOver, 1));
      const renewals = held.map(({ leaseKey, leaseCounter }) => ({ leaseKey, leaseCounter }));
      await measure('leases.renewMany (100)', () => store.leases.renewMany(renewals));
      await measure('leases.renewMany (100, 2 lost)', () =>
        store.leases.renewMany([
          ...renewals.slice(2).map((renewal) => ({ ...renewal, leaseCounter: renewal.leaseCounter + 1 })),
          { leaseKey: 'absent', leaseCounter: 0 },
          { leaseKey: renewals[0]?.leaseKey ?? '', leaseCounter: 0 },
        ]),
      );
      await measure('workers.heartbeat', () => store.workers.heartbeat('worker-a', { host: 'h' }));
      await measure('workers.heartbeat (keeping metadata)', () => store.workers.heartbeat('worker-a'));
      await measure('admin.scan', () => store.admin.scan());
      await measure('admin.ensureSchema (current)', () => store.admin.ensureSchema());
      expect(measured).toEqual(EXPECTED[dialect.flavor]);
      const lease = await store.leases.get(key);
      expect([lease?.leaseCounter, lease?.owner, lease?.childShardIds]).toEqual([4, null, ['child']]);
      const handed = await store.leases.get('handed-over-lease');
      expect([handed?.leaseCounter, handed?.owner, handed?.handoff]).toEqual([2, 'worker-b', null]);
    });

    it.skipIf(dialect.flavor === 'sqlite')(
      'sends the documented number of statements for session calls',
      async () => {
        const sessions = createSqlLeaseStore({
          db: database.connect({
            log: (event) => {
              if (event.level === 'query')
                statements.push(event.query.sql.trim().split(/\s+/)[0]?.toLowerCase() ?? '');
            },
          }),
          applicationName: 'statements',
          sessionLiveness: true,
        });
        const workerIds = Array.from({ length: 100 }, (_, index) => `worker-${index}`);
        let session: Awaited<ReturnType<NonNullable<typeof sessions.workers.attachSession>>> | undefined;
        const measured = {
          attach: (
            await count(async () => {
              session = await sessions.workers.attachSession?.('worker-7');
            })
          ).length,
          check: (await count(() => session?.check() ?? Promise.resolve())).length,
          'liveSessions (100, first)': (
            await count(() => sessions.workers.liveSessions?.(workerIds) ?? Promise.resolve())
          ).length,
          'liveSessions (100)': (
            await count(() => sessions.workers.liveSessions?.(workerIds) ?? Promise.resolve())
          ).length,
          close: (await count(() => session?.close() ?? Promise.resolve())).length,
        };
        expect(measured).toEqual(
          dialect.flavor === 'postgres'
            ? { attach: 1, check: 1, 'liveSessions (100, first)': 1, 'liveSessions (100)': 1, close: 1 }
            : // MySQL: the lock's name carries the database's, read once per connection or store.
              { attach: 2, check: 1, 'liveSessions (100, first)': 2, 'liveSessions (100)': 1, close: 1 },
        );
      },
    );
  });
}
