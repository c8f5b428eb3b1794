import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { RunningEmulator, ServiceCheck } from '@kcl/testkit';
import { checkService, LOCAL_CREDENTIALS, startDynalite } from '@kcl/testkit';

export interface LocalDynamo {
  readonly check: ServiceCheck;
  readonly endpoint: string;
  client(): DynamoDBClient;
  stop(): Promise<void>;
}

/** dynalite in this process, through `checkService` so a failure to start is a visible skip. */
export async function startLocalDynamo(): Promise<LocalDynamo> {
  let running: RunningEmulator | undefined;
  const clients: DynamoDBClient[] = [];
  const check = await checkService('dynalite (in-process DynamoDB emulator)', async () => {
    running = await startDynalite({ createTableMs: 5, deleteTableMs: 5, updateTableMs: 5 });
  });
  return {
    check,
    get endpoint() {
      if (running === undefined) throw new Error('dynalite is not running');
      return running.endpoint;
    },
    client() {
      if (running === undefined) throw new Error('dynalite is not running');
      const client = new DynamoDBClient({
        endpoint: running.endpoint,
        region: running.region,
        credentials: { ...LOCAL_CREDENTIALS },
      });
      clients.push(client);
      return client;
    },
    async stop() {
      for (const client of clients) client.destroy();
      await running?.stop();
    },
  };
}
