import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { type LeaseStoreLocation, openLeaseStore, redactUrl } from '@kcl/stores';
import { startDynalite } from '@kcl/testkit';
import pg from 'pg';
import type { DemoOptions } from './demo-options.js';
import { createOutputTable } from './output-table.js';

export interface PreparedLeaseStore {
  /** Where the workers find the store (they open it with `openLeaseStore`). Plain data: it is handed to worker processes. */
  readonly location: LeaseStoreLocation;
  /** Removes what was created for the run (database, emulator). Idempotent. */
  teardown(): Promise<void>;
}

/** Thrown when the store's server cannot be reached: the message says what to do. */
export class DemoSetupError extends Error {
  override readonly name = 'DemoSetupError';
}

/**
 * Creates what the chosen store needs for one run: a SQLite file in the run directory, a throwaway
 * PostgreSQL database, or a DynamoDB emulator in a child process.
 */
export async function prepareLeaseStore(
  options: Pick<DemoOptions, 'store' | 'postgresUrl'> & Partial<Pick<DemoOptions, 'exactlyOnce'>>,
  runDirectory: string,
): Promise<PreparedLeaseStore> {
  switch (options.store) {
    case 'sqlite': {
      // The file lives in the run directory, which is removed at the end unless --keep. Created here,
      // in WAL mode with its tables, before the workers start, so they do not all create it at once.
      const location = { kind: 'sqlite', file: join(runDirectory, 'leases.db') } as const;
      // The schema is the same for every application sharing the file.
      const store = await openLeaseStore(location, { applicationName: 'kcl-demo' });
      try {
        await store.admin.ensureSchema();
      } finally {
        await store.close();
      }
      if (options.exactlyOnce === true) createOutputTable(location.file);
      return { location, teardown: async () => {} };
    }
    case 'postgres':
      return createPostgresDatabase(options.postgresUrl);
    case 'dynamo-local': {
      const emulator = await startDynalite({ separateProcess: true });
      return {
        // No credentials: for a local endpoint the store uses placeholder ones, which dynalite accepts.
        location: {
          kind: 'dynamo',
          endpoint: emulator.endpoint,
          region: emulator.region,
          tableName: 'kcl-demo-leases',
        },
        teardown: () => emulator.stop(),
      };
    }
  }
}

async function withClient<T>(url: string, work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 10_000 });
  client.on('error', () => undefined);
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end().catch(() => undefined);
  }
}

async function createPostgresDatabase(serverUrl: string): Promise<PreparedLeaseStore> {
  const name = `kcl_demo_${randomBytes(4).toString('hex')}`;
  try {
    await withClient(serverUrl, (client) => client.query(`CREATE DATABASE ${name}`));
  } catch (error) {
    throw new DemoSetupError(
      `could not create a database on PostgreSQL at ${redactUrl(serverUrl)}: ${(error as Error).message}. ` +
        'Start PostgreSQL, pass --postgres-url postgres://user@host:port/database (a user that may CREATE DATABASE), ' +
        'or use --store sqlite.',
      { cause: error },
    );
  }
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  let dropped: Promise<void> | undefined;
  return {
    location: { kind: 'postgres', url: url.toString(), poolSize: 4 },
    teardown: () => {
      dropped ??= withClient(serverUrl, async (client) => {
        await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      });
      return dropped;
    },
  };
}
