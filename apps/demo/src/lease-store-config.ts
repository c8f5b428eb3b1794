import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { LeaseStore } from '@kcl/core';
import { createDynamoLeaseStore } from '@kcl/store-dynamo';
import { configureSqliteLeaseDatabase, createSqlLeaseStore } from '@kcl/store-sql';
import { NodeHttpHandler } from '@smithy/node-http-handler';
import Database from 'better-sqlite3';
import { Kysely, PostgresDialect, SqliteDialect } from 'kysely';
import pg from 'pg';

/** Which lease store a worker uses and how to reach it. Plain data: it is handed to worker processes. */
export type LeaseStoreConfig =
  | { readonly kind: 'sqlite'; readonly file: string }
  | { readonly kind: 'postgres'; readonly url: string }
  | {
      readonly kind: 'dynamo';
      readonly endpoint: string;
      readonly region: string;
      readonly credentials: { readonly accessKeyId: string; readonly secretAccessKey: string };
      readonly tableName: string;
    };

export interface OpenedLeaseStore {
  readonly store: LeaseStore;
  close(): Promise<void>;
}

/** Opens the lease store a config names, for one application. */
export function openLeaseStore(config: LeaseStoreConfig, applicationName: string): OpenedLeaseStore {
  switch (config.kind) {
    case 'sqlite': {
      const db = new Kysely({
        dialect: new SqliteDialect({
          // Several processes share the file: WAL mode, and wait for another process's write lock.
          database: configureSqliteLeaseDatabase(new Database(config.file, { timeout: 5_000 })),
        }),
      });
      return { store: createSqlLeaseStore({ db, applicationName }), close: () => db.destroy() };
    }
    case 'postgres': {
      const pool = new pg.Pool({ connectionString: config.url, max: 4 });
      // An idle connection dropped by the server must not crash the worker; the next query reconnects.
      pool.on('error', () => undefined);
      const db = new Kysely({ dialect: new PostgresDialect({ pool }) });
      return { store: createSqlLeaseStore({ db, applicationName }), close: () => db.destroy() };
    }
    case 'dynamo': {
      const client = new DynamoDBClient({
        endpoint: config.endpoint,
        region: config.region,
        credentials: { ...config.credentials },
        requestHandler: new NodeHttpHandler({ requestTimeout: 10_000 }),
      });
      return {
        store: createDynamoLeaseStore({ client, tableName: config.tableName, applicationName }),
        close: async () => client.destroy(),
      };
    }
  }
}

/** One line in the header: which store, where. */
export function describeLeaseStore(config: LeaseStoreConfig): string {
  switch (config.kind) {
    case 'sqlite':
      return `SQLite file ${config.file}`;
    case 'postgres': {
      const url = new URL(config.url);
      url.password = url.password === '' ? '' : '***';
      return `PostgreSQL ${url.toString()}`;
    }
    case 'dynamo':
      return `DynamoDB emulator (dynalite) at ${config.endpoint}, table ${config.tableName}`;
  }
}
