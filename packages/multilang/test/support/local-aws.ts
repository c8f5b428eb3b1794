import { DynamoDBClient, ScanCommand } from '@aws-sdk/client-dynamodb';
import type { KinesisClient } from '@aws-sdk/client-kinesis';
import { type RunningEmulator, startDynalite, startKinesisLocal } from '@kcl/testkit';
import { localKinesisClient } from '@kcl/testkit/kinesis';

export { waitUntil as until } from '@kcl/testkit';
export { createStream, listAllShards as listShards, putRecords, splitShard } from '@kcl/testkit/kinesis';

/** kinesis-local and dynalite, with clients for the tests' own calls. */
export interface LocalAws {
  readonly kinesisEmulator: RunningEmulator;
  readonly dynamoEmulator: RunningEmulator;
  readonly kinesis: KinesisClient;
  readonly dynamo: DynamoDBClient;
  stop(): Promise<void>;
}

export async function startLocalAws(): Promise<LocalAws> {
  const [kinesisEmulator, dynamoEmulator] = await Promise.all([
    startKinesisLocal({
      durations: {
        createStream: 50,
        splitShard: 50,
        mergeShards: 50,
        updateShardCount: 50,
        registerStreamConsumer: 50,
      },
    }),
    // In a child process: a forced stop can leave a request in flight when the tests end, and an
    // in-process dynalite throws on it once closed.
    startDynalite({ separateProcess: true }),
  ]);
  const kinesis = localKinesisClient(kinesisEmulator);
  const dynamo = new DynamoDBClient({
    endpoint: dynamoEmulator.endpoint,
    region: dynamoEmulator.region,
    credentials: dynamoEmulator.credentials,
  });
  return {
    kinesisEmulator,
    dynamoEmulator,
    kinesis,
    dynamo,
    stop: async () => {
      kinesis.destroy();
      dynamo.destroy();
      await Promise.all([kinesisEmulator.stop(), dynamoEmulator.stop()]);
    },
  };
}

/** The raw items of a DynamoDB table, as the Java KCL would read them. */
export async function scanTable(client: DynamoDBClient, tableName: string) {
  const output = await client.send(new ScanCommand({ TableName: tableName, ConsistentRead: true }));
  return output.Items ?? [];
}
