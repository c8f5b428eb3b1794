import { GetItemCommand } from '@aws-sdk/client-dynamodb';
import { describeLeaseStoreConformance } from '@kcl/testkit/conformance';
import { createDynamoLeaseStore } from '../src/index.js';
import { startLocalDynamo, tableNameFor } from './local-dynamo.js';

// The Java layout is one table per application, so every application name gets its own table.
const dynamo = await startLocalDynamo();

describeLeaseStoreConformance({
  name: "dynamo, 'java' layout (one table per application)",
  skip: dynamo.check.reason,
  setup: async () => {
    const client = dynamo.client();
    return {
      createStore: (applicationName) =>
        createDynamoLeaseStore({
          client,
          applicationName,
          tableName: tableNameFor(applicationName),
          schemaPollIntervalMs: 10,
        }),
      readRawLease: async (applicationName, leaseKey) => {
        const output = await client.send(
          new GetItemCommand({
            TableName: tableNameFor(applicationName),
            Key: { leaseKey: { S: leaseKey } },
            ConsistentRead: true,
          }),
        );
        return output.Item ?? null;
      },
    };
  },
  teardown: () => dynamo.stop(),
});
