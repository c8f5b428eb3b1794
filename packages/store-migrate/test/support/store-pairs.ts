import { randomBytes } from 'node:crypto';
import type { LeaseStore } from '@kcl/core';
import { createDynamoLeaseStore } from '@kcl/store-dynamo';
import { createSqlLeaseStore } from '@kcl/store-sql';
import type { TestDatabase } from './databases.js';
import { checkPostgres, createPostgresDatabase, createSqliteDatabase } from './databases.js';
import type { LocalDynamo } from './local-dynamo.js';
import { startLocalDynamo } from './local-dynamo.js';

/** A source and a target store of one (fresh) application, both with their schema in place. */
export interface StorePair {
  readonly applicationName: string;
  readonly from: LeaseStore;
  readonly to: LeaseStore;
  /** Another store instance on the source (another worker's, or a tool's). */
  newFrom(): LeaseStore;
  /** Another store instance on the target. */
  newTo(): LeaseStore;
}

/** A kind of pair: how to open one for a fresh application. Null `skip` when it can run. */
export interface StorePairKind {
  readonly name: string;
  readonly skip: string | null;
  open(prefix?: string): Promise<StorePair>;
}

export interface StorePairs {
  readonly kinds: readonly StorePairKind[];
  close(): Promise<void>;
}

function unique(prefix: string): string {
  return `${prefix}-${randomBytes(4).toString('hex')}`;
}

/**
 * Real stores for live-migration tests: two SQLite files (always), and DynamoDB (dynalite, in this
 * process) to PostgreSQL when both are there. Each `open` binds a new application, so tests never see
 * each other's rows.
 */
export async function openStorePairs(): Promise<StorePairs> {
  const sqliteFrom = createSqliteDatabase();
  const sqliteTo = createSqliteDatabase();
  const [dynamo, postgres] = await Promise.all([startLocalDynamo(), checkPostgres()]);
  let postgresDatabase: TestDatabase | undefined;
  if (postgres.available) postgresDatabase = await createPostgresDatabase();

  const withSchemas = async (pair: StorePair): Promise<StorePair> => {
    await pair.from.admin.ensureSchema();
    await pair.to.admin.ensureSchema();
    return pair;
  };

  const sqlite: StorePairKind = {
    name: 'SQLite → SQLite',
    skip: null,
    open(prefix = 'app') {
      const applicationName = unique(prefix);
      const newFrom = () => createSqlLeaseStore({ db: sqliteFrom.db, applicationName });
      const newTo = () => createSqlLeaseStore({ db: sqliteTo.db, applicationName });
      return withSchemas({ applicationName, from: newFrom(), to: newTo(), newFrom, newTo });
    },
  };

  const dynamoToPostgres: StorePairKind = {
    name: 'DynamoDB → PostgreSQL',
    skip: !dynamo.check.available
      ? (dynamo.check.reason ?? 'dynalite did not start')
      : !postgres.available
        ? (postgres.reason ?? 'PostgreSQL is not reachable')
        : null,
    open(prefix = 'app') {
      const applicationName = unique(prefix);
      const database = postgresDatabase as TestDatabase;
      const local = dynamo as LocalDynamo;
      const newFrom = () => createDynamoLeaseStore({ client: local.client(), applicationName });
      const newTo = () => createSqlLeaseStore({ db: database.db, applicationName });
      return withSchemas({ applicationName, from: newFrom(), to: newTo(), newFrom, newTo });
    },
  };

  return {
    kinds: [sqlite, dynamoToPostgres],
    async close() {
      await postgresDatabase?.drop();
      await sqliteFrom.drop();
      await sqliteTo.drop();
      await dynamo.stop();
    },
  };
}
