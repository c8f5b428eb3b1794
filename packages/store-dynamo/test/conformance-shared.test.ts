import { GetItemCommand } from '@aws-sdk/client-dynamodb';
import { describeLeaseStoreConformance } from '@kcl/testkit/conformance';
import { createDynamoLeaseStore } from '../src/index.js';
import { startLocalDynamo } from './local-dynamo.js';

// Every application of the suite on one table, told apart by the applicationName partition key.
const dynamo = await startLocalDynamo();
const tableName = 'kcl-conformance-shared';

describeLeaseStoreConformance({
  name: "dynamo, 'shared' layout (all applications in one table)",
  skip: dynamo.check.reason,
  setup: async () => {
    const client = dynamo.client();
    return {
      createStore: (applicationName) =>
        createDynamoLeaseStore({
          client,
          applicationName,
          tableName,
          layout: 'shared',
          schemaPollIntervalMs: 10,
        }),
      readRawLease: async (applicationName, leaseKey) => {
        const output = await client.send(
          new GetItemCommand({
            TableName: tableName,
            Key: { applicationName: { S: applicationName }, leaseKey: { S: leaseKey } },
            ConsistentRead: true,
          }),
        );
        return output.Item ?? null;
      },
    };
  },
  teardown: () => dynamo.stop(),
});
