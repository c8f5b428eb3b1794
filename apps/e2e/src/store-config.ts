import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { LeaseStore } from '@kcl/core';
import { createDynamoLeaseStore } from '@kcl/store-dynamo';
import { createMigratingLeaseStore } from '@kcl/store-migrate';
import { configureSqliteLeaseDatabase, createSqlLeaseStore } from '@kcl/store-sql';
import Database from 'better-sqlite3';
import { Kysely, MysqlDialect, PostgresDialect, SqliteDialect } from 'kysely';
import { createPool } from 'mysql2';
import pg from 'pg';

/** Which lease store a worker process uses, and how to reach it. Plain data: it crosses process boundaries. */
export type StoreConfig = PlainStoreConfig | MigratingStoreConfig;

/** A worker running a live migration from one store to another (`createMigratingLeaseStore`). */
export interface MigratingStoreConfig {
  readonly kind: 'migrating';
  readonly from: PlainStoreConfig;
  readonly to: PlainStoreConfig;
  readonly phaseRefreshMs?: number;
  readonly mirrorTimeoutMs?: number;
}

export type PlainStoreConfig =
  | { readonly kind: 'sqlite'; readonly file: string }
  | { readonly kind: 'postgres'; readonly url: string }
  | { readonly kind: 'mysql'; readonly url: string }
  | {
      readonly kind: 'dynamo';
      readonly endpoint: string;
      readonly region: string;
      /** Absent: the Java layout's default, a table named after the application. */
      readonly tableName?: string;
    };

export interface OpenedStore {
  readonly store: LeaseStore;
  close(): Promise<void>;
}

/** Opens the lease store a config names, for one application. */
export function openLeaseStore(config: StoreConfig, applicationName: string): OpenedStore {
  if (config.kind === 'migrating') {
    const from = openPlainLeaseStore(config.from, applicationName);
    const to = openPlainLeaseStore(config.to, applicationName);
    return {
      store: createMigratingLeaseStore({
        from: from.store,
        to: to.store,
        ...(config.phaseRefreshMs === undefined ? {} : { phaseRefreshMs: config.phaseRefreshMs }),
        ...(config.mirrorTimeoutMs === undefined ? {} : { mirrorTimeoutMs: config.mirrorTimeoutMs }),
      }),
      close: async () => {
        await Promise.all([from.close(), to.close()]);
      },
    };
  }
  return openPlainLeaseStore(config, applicationName);
}

function openPlainLeaseStore(config: PlainStoreConfig, applicationName: string): OpenedStore {
  switch (config.kind) {
    case 'sqlite': {
      const db = new Kysely({
        dialect: new SqliteDialect({
          database: configureSqliteLeaseDatabase(new Database(config.file, { timeout: 5_000 })),
        }),
      });
      return { store: createSqlLeaseStore({ db, applicationName }), close: () => db.destroy() };
    }
    case 'postgres': {
      const db = new Kysely({
        dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: config.url, max: 4 }) }),
      });
      return { store: createSqlLeaseStore({ db, applicationName }), close: () => db.destroy() };
    }
    case 'mysql': {
      const db = new Kysely({
        dialect: new MysqlDialect({ pool: createPool({ uri: config.url, connectionLimit: 4 }) }),
      });
      return { store: createSqlLeaseStore({ db, applicationName }), close: () => db.destroy() };
    }
    case 'dynamo': {
      const client = new DynamoDBClient({
        endpoint: config.endpoint,
        region: config.region,
        credentials: { accessKeyId: 'AKIAKCLLOCALTESTING0', secretAccessKey: 'kcl-local-secret' },
      });
      return {
        store: createDynamoLeaseStore({
          client,
          applicationName,
          ...(config.tableName === undefined ? {} : { tableName: config.tableName }),
        }),
        close: async () => client.destroy(),
      };
    }
  }
}
