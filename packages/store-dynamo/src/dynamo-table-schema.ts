import type { CreateTableCommandInput, KeySchemaElement } from '@aws-sdk/client-dynamodb';
import type { DynamoLeaseTableLayout, DynamoTableBilling } from './dynamo-lease-store-options.js';

/** The key attributes of one of the store's tables. All keys are strings (S). */
export interface DynamoTableDefinition {
  readonly tableName: string;
  /** `lease` is the lease table, `worker` the worker registry table. */
  readonly role: 'lease' | 'worker';
  readonly hashKey: string;
  readonly rangeKey: string | null;
}

/** The worker registry's range key: `worker:<workerId>` for workers, `migration-marker` for the marker. */
export const WORKER_TABLE_RANGE_KEY = 'entryKey';

export function leaseTableDefinition(
  tableName: string,
  layout: DynamoLeaseTableLayout,
): DynamoTableDefinition {
  return layout === 'java'
    ? { tableName, role: 'lease', hashKey: 'leaseKey', rangeKey: null }
    : { tableName, role: 'lease', hashKey: 'applicationName', rangeKey: 'leaseKey' };
}

export function workerTableDefinition(tableName: string): DynamoTableDefinition {
  return { tableName, role: 'worker', hashKey: 'applicationName', rangeKey: WORKER_TABLE_RANGE_KEY };
}

export function keySchema(definition: DynamoTableDefinition): KeySchemaElement[] {
  const schema: KeySchemaElement[] = [{ AttributeName: definition.hashKey, KeyType: 'HASH' }];
  if (definition.rangeKey !== null) schema.push({ AttributeName: definition.rangeKey, KeyType: 'RANGE' });
  return schema;
}

/** The CreateTable request `ensureSchema` sends. */
export function createTableInput(
  definition: DynamoTableDefinition,
  billing: DynamoTableBilling,
): CreateTableCommandInput {
  const schema = keySchema(definition);
  return {
    TableName: definition.tableName,
    KeySchema: schema,
    AttributeDefinitions: schema.map((element) => ({
      AttributeName: element.AttributeName,
      AttributeType: 'S',
    })),
    ...(billing.mode === 'PAY_PER_REQUEST'
      ? { BillingMode: 'PAY_PER_REQUEST' as const }
      : {
          BillingMode: 'PROVISIONED' as const,
          ProvisionedThroughput: {
            ReadCapacityUnits: billing.readCapacityUnits,
            WriteCapacityUnits: billing.writeCapacityUnits,
          },
        }),
  };
}

/** The AWS CLI command that creates the table as `ensureSchema` would. */
export function createTableCommandLine(
  definition: DynamoTableDefinition,
  billing: DynamoTableBilling,
): string {
  const schema = keySchema(definition);
  const attributes = schema.map((element) => `AttributeName=${element.AttributeName},AttributeType=S`);
  const keys = schema.map((element) => `AttributeName=${element.AttributeName},KeyType=${element.KeyType}`);
  const billingFlags =
    billing.mode === 'PAY_PER_REQUEST'
      ? '--billing-mode PAY_PER_REQUEST'
      : `--billing-mode PROVISIONED --provisioned-throughput ReadCapacityUnits=${billing.readCapacityUnits},WriteCapacityUnits=${billing.writeCapacityUnits}`;
  return `aws dynamodb create-table --table-name ${definition.tableName} --attribute-definitions ${attributes.join(' ')} --key-schema ${keys.join(' ')} ${billingFlags}`;
}

export function describeKeySchema(definition: DynamoTableDefinition): string {
  return definition.rangeKey === null
    ? `${definition.hashKey} (HASH, S)`
    : `${definition.hashKey} (HASH, S) + ${definition.rangeKey} (RANGE, S)`;
}
