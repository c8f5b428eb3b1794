import { createHash } from 'node:crypto';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { DynaliteOptions, RunningEmulator, ServiceCheck } from '@kcl/testkit';
import { checkService, startDynalite } from '@kcl/testkit';

export interface LocalDynamo {
  readonly check: ServiceCheck;
  /** The running emulator; throws when it could not start (the tests are skipped then). */
  emulator(): RunningEmulator;
  /** A new client for the emulator. */
  client(overrides?: { readonly maxAttempts?: number }): DynamoDBClient;
  stop(): Promise<void>;
}

/** Starts dynalite for one test file, through `checkService` so a failure to start is visible. */
export async function startLocalDynamo(options: DynaliteOptions = {}): Promise<LocalDynamo> {
  let running: RunningEmulator | undefined;
  const clients: DynamoDBClient[] = [];
  const check = await checkService('dynalite (in-process DynamoDB emulator)', async () => {
    running = await startDynalite({ createTableMs: 5, deleteTableMs: 5, updateTableMs: 5, ...options });
  });
  const emulator = (): RunningEmulator => {
    if (running === undefined) throw new Error('dynalite is not running');
    return running;
  };
  return {
    check,
    emulator,
    client: (overrides = {}) => {
      const client = clientFor(emulator().endpoint, overrides);
      clients.push(client);
      return client;
    },
    stop: async () => {
      for (const client of clients) client.destroy();
      await running?.stop();
    },
  };
}

export function clientFor(
  endpoint: string,
  overrides: { readonly maxAttempts?: number } = {},
): DynamoDBClient {
  return new DynamoDBClient({
    endpoint,
    region: 'us-east-1',
    credentials: { accessKeyId: 'AKIAKCLLOCALTESTING0', secretAccessKey: 'kcl-local-secret' },
    ...overrides,
  });
}

/** A valid, unique DynamoDB table name for any application name (which may hold ':', '#', spaces…). */
export function tableNameFor(applicationName: string, prefix = 'kcl'): string {
  const slug = applicationName.replace(/[^a-zA-Z0-9_.-]/g, '_').slice(0, 60);
  const digest = createHash('sha256').update(applicationName, 'utf8').digest('hex').slice(0, 12);
  return `${prefix}-${slug}-${digest}`;
}
