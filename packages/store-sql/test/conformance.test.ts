import { describeLeaseStoreConformance } from '@kcl/testkit/conformance';
import { createSqlLeaseStore } from '../src/index.js';
import type { TestDatabase } from './test-databases.js';
import { checkDialects, readRawLease, TEST_DIALECTS } from './test-databases.js';

const checks = await checkDialects();

for (const dialect of TEST_DIALECTS) {
  let database: TestDatabase | undefined;
  describeLeaseStoreConformance({
    name: `${dialect.flavor} (@kcl/store-sql)`,
    skip: checks.get(dialect.flavor)?.reason ?? null,
    setup: async () => {
      const created = await dialect.createDatabase();
      database = created;
      return {
        createStore: (applicationName) => createSqlLeaseStore({ db: created.db, applicationName }),
        readRawLease: (applicationName, leaseKey) => readRawLease(created.db, applicationName, leaseKey),
      };
    },
    teardown: async () => {
      await database?.drop();
    },
  });
}
