import type { LeaseStore } from '@kcl/core';
import { mysqlFlavor } from './mysql/mysql-flavor.js';
import { postgresFlavor } from './postgres/postgres-flavor.js';
import type { SqlFlavor, SqlFlavorName } from './sql-flavor.js';
import { createSqlLeaseAdministration } from './sql-lease-administration.js';
import { createSqlLeaseRepository } from './sql-lease-repository.js';
import type { SqlLeaseStoreOptions } from './sql-lease-store-options.js';
import { resolveSqlLeaseStoreOptions } from './sql-lease-store-options.js';
import { PACKAGE_NAME } from './sql-package-name.js';
import type { SqlStoreContext } from './sql-store-context.js';
import type { SqlLeaseTableNames } from './sql-table-names.js';
import { createSqlWorkerRegistry } from './sql-worker-registry.js';
import { createSqlWorkerSessions } from './sql-worker-sessions.js';
import { sqliteFlavor } from './sqlite/sqlite-flavor.js';

/** A `LeaseStore` on a SQL database, with what it runs on. */
export interface SqlLeaseStore extends LeaseStore {
  readonly flavor: SqlFlavorName;
  readonly tableNames: SqlLeaseTableNames;
}

const FLAVORS: Readonly<Record<SqlFlavorName, SqlFlavor>> = {
  postgres: postgresFlavor,
  mysql: mysqlFlavor,
  sqlite: sqliteFlavor,
};

/**
 * A `LeaseStore` (contract v2) on PostgreSQL, MySQL/MariaDB or SQLite through Kysely. Many
 * applications share the tables; this store reads and writes only the rows of `applicationName`.
 *
 * `close()` closes the worker sessions the store attached and leaves the caller's Kysely instance
 * open (the store opened nothing itself), unless the options say `destroyDbOnClose: true`.
 */
export function createSqlLeaseStore(options: SqlLeaseStoreOptions): SqlLeaseStore {
  const resolved = resolveSqlLeaseStoreOptions(options);
  const { applicationName, tableNames } = resolved;
  const flavor = FLAVORS[resolved.flavor];
  const description = `${flavor.label} table "${tableNames.leases}" (application ${JSON.stringify(applicationName)})`;
  const context: SqlStoreContext = {
    // The store's SQL names every column itself; a user's plugins (CamelCasePlugin, say) must not
    // rewrite it.
    db: resolved.db.withoutPlugins(),
    userDb: resolved.db,
    flavor,
    tables: tableNames,
    applicationName,
    store: `${PACKAGE_NAME} (${description})`,
    clock: resolved.clock,
    logger: resolved.logger,
    transactionTimeoutMs: resolved.transactionTimeoutMs,
  };

  const sessions =
    resolved.sessionLiveness && flavor.sessions !== null
      ? createSqlWorkerSessions(context, flavor.sessions)
      : null;

  let closing: Promise<void> | null = null;
  return {
    specificationVersion: 'v2',
    applicationName,
    // MySQL needs four round trips for a batch (begin, locking read, update, commit), still one
    // UPDATE statement and a constant number of round trips for any number of leases.
    capabilities: {
      batchRenew: true,
      consistentReads: true,
      sessionLiveness: sessions !== null,
      transactionalCheckpoint: true,
    },
    description,
    flavor: flavor.name,
    tableNames,
    leases: createSqlLeaseRepository(context),
    workers: createSqlWorkerRegistry(context, sessions),
    admin: createSqlLeaseAdministration(context),
    close() {
      // The sessions go first: each holds a connection the pool would wait for. `withoutPlugins()`
      // shares the caller's executor and driver, so destroying the original instance releases the
      // pool the store used.
      closing ??= (async () => {
        await sessions?.closeAll();
        if (resolved.destroyDbOnClose) await resolved.db.destroy();
      })();
      return closing;
    },
  };
}
