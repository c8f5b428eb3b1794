import type { AttributeValue } from '@aws-sdk/client-dynamodb';
import { BatchWriteItemCommand, CreateTableCommand, DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { RunningEmulator, ServiceCheck } from '@kcl/testkit';
import { checkService, LOCAL_CREDENTIALS, startDynalite } from '@kcl/testkit';

export type DynamoItem = Record<string, AttributeValue>;

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

/** Creates a lease table exactly as the Java KCL does (hash key leaseKey), and nothing else. */
export async function createJavaLeaseTable(client: DynamoDBClient, tableName: string): Promise<void> {
  await client.send(
    new CreateTableCommand({
      TableName: tableName,
      AttributeDefinitions: [{ AttributeName: 'leaseKey', AttributeType: 'S' }],
      KeySchema: [{ AttributeName: 'leaseKey', KeyType: 'HASH' }],
      BillingMode: 'PAY_PER_REQUEST',
    }),
  );
  // dynalite keeps a table CREATING for a few milliseconds.
  await new Promise((resolve) => setTimeout(resolve, 50));
}

/** Writes items 25 at a time (BatchWriteItem, eight calls in flight), retrying unprocessed ones. */
export async function putItems(
  client: DynamoDBClient,
  tableName: string,
  items: readonly DynamoItem[],
): Promise<void> {
  const batches: DynamoItem[][] = [];
  for (let index = 0; index < items.length; index += 25) batches.push(items.slice(index, index + 25));
  let next = 0;
  const lane = async (): Promise<void> => {
    while (next < batches.length) {
      let requests = (batches[next++] ?? []).map((item) => ({ PutRequest: { Item: item } }));
      for (let attempt = 0; requests.length > 0; attempt++) {
        if (attempt > 20) throw new Error('BatchWriteItem keeps leaving items unprocessed');
        const output = await client.send(
          new BatchWriteItemCommand({ RequestItems: { [tableName]: requests } }),
        );
        requests = (output.UnprocessedItems?.[tableName] ?? []) as typeof requests;
      }
    }
  };
  await Promise.all(Array.from({ length: 8 }, lane));
}

export const SHARD = (n: number): string => `shardId-${String(n).padStart(12, '0')}`;
export const LONG = '49590338271490256608559692538361571095921575989136588898';
export const NEXT = '49590338271490256608559692538361571095921575989136599999';
export const MAX_HASH = ((1n << 128n) - 1n).toString();
export const HALF = (1n << 127n).toString();

/**
 * A Java KCL table after a split (0 → 2, 3) and a merge (2 + 3 → 4), written by 2.x and 3.x workers,
 * with the KCL 3.x rows that are not leases.
 */
export function javaTableItems(): { readonly leases: DynamoItem[]; readonly others: DynamoItem[] } {
  const leases: DynamoItem[] = [
    {
      leaseKey: { S: SHARD(0) },
      leaseOwner: { S: 'java-worker-1' },
      leaseCounter: { N: '2204' },
      checkpoint: { S: 'SHARD_END' },
      checkpointSubSequenceNumber: { N: '0' },
      ownerSwitchesSinceCheckpoint: { N: '0' },
      childShardIds: { SS: [SHARD(2), SHARD(3)] },
      startingHashKey: { S: '0' },
      endingHashKey: { S: MAX_HASH },
    },
    {
      leaseKey: { S: SHARD(1) },
      leaseOwner: { S: 'java-worker-1' },
      leaseCounter: { N: '1523' },
      checkpoint: { S: LONG },
      checkpointSubSequenceNumber: { N: '3' },
      pendingCheckpoint: { S: NEXT },
      pendingCheckpointSubSequenceNumber: { N: '0' },
      pendingCheckpointState: { B: new Uint8Array([1, 2, 3]) },
      ownerSwitchesSinceCheckpoint: { N: '1' },
      startingHashKey: { S: '0' },
      endingHashKey: { S: MAX_HASH },
    },
    ...[2, 3].map(
      (n): DynamoItem => ({
        leaseKey: { S: SHARD(n) },
        leaseOwner: { S: 'java-worker-2' },
        leaseCounter: { N: String(300 + n) },
        checkpoint: { S: 'SHARD_END' },
        checkpointSubSequenceNumber: { N: '0' },
        ownerSwitchesSinceCheckpoint: { N: '0' },
        parentShardId: { SS: [SHARD(0)] },
        childShardIds: { SS: [SHARD(4)] },
        startingHashKey: { S: n === 2 ? '0' : HALF },
        endingHashKey: { S: n === 2 ? ((1n << 127n) - 1n).toString() : MAX_HASH },
      }),
    ),
    {
      leaseKey: { S: SHARD(4) },
      leaseOwner: { S: 'java-worker-2' },
      leaseCounter: { N: '12' },
      checkpoint: { S: 'TRIM_HORIZON' },
      checkpointSubSequenceNumber: { N: '0' },
      ownerSwitchesSinceCheckpoint: { N: '0' },
      parentShardId: { SS: [SHARD(2), SHARD(3)] },
      startingHashKey: { S: '0' },
      endingHashKey: { S: MAX_HASH },
      throughputKBps: { N: '12.345678' },
      entityType: { S: 'LEASE' },
    },
    {
      leaseKey: { S: SHARD(5) },
      leaseCounter: { N: '77' },
      checkpoint: { S: '12345' },
    },
  ];
  const others: DynamoItem[] = [
    ...['java-worker-1', 'java-worker-2'].map(
      (workerId): DynamoItem => ({
        leaseKey: { S: workerId },
        wid: { S: workerId },
        lut: { N: '1735689600' },
        sts: { M: { C: { L: [{ N: '12.5' }] } } },
        entityType: { S: 'WORKER_METRIC_STATS' },
      }),
    ),
    {
      leaseKey: { S: 'Leader' },
      ownerName: { S: 'java-worker-1' },
      leaseDuration: { S: '20000' },
      recordVersionNumber: { S: '5e1c8d6e-7a4e-4b8e-9d0e-1a2b3c4d5e6f' },
      entityType: { S: 'LEADER' },
    },
    {
      leaseKey: { S: 'Migration3.0' },
      cv: { S: 'CLIENT_VERSION_3X' },
      mts: { N: '1735689600' },
      entityType: { S: 'CLIENT_VERSION_MIGRATION' },
    },
  ];
  return { leases, others };
}
