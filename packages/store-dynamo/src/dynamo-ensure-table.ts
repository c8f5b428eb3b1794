import type { DynamoDBClient, TableDescription } from '@aws-sdk/client-dynamodb';
import { CreateTableCommand, DescribeTableCommand } from '@aws-sdk/client-dynamodb';
import type { Clock } from '@kcl/core';
import { LeaseStoreError } from '@kcl/core';
import { isTableInUse, isTableMissing, mapDynamoError, sendOptions } from './dynamo-error-mapping.js';
import type { DynamoTableBilling } from './dynamo-lease-store-options.js';
import { PACKAGE_NAME } from './dynamo-lease-store-options.js';
import type { DynamoTableDefinition } from './dynamo-table-schema.js';
import { createTableInput, describeKeySchema, keySchema } from './dynamo-table-schema.js';

export interface EnsureTableOptions {
  readonly client: DynamoDBClient;
  readonly definition: DynamoTableDefinition;
  readonly billing: DynamoTableBilling;
  readonly clock: Clock;
  readonly timeoutMs: number;
  readonly pollIntervalMs: number;
  readonly signal?: AbortSignal | undefined;
}

/**
 * Makes sure a table exists and is usable: describe it, create it when missing (someone else creating
 * it at the same moment is fine), then wait for ACTIVE, polling on the injected clock until a
 * deadline. An existing table with another key schema is an error, never something to repair.
 * Resolves with the table's description once it is usable.
 */
export async function ensureTable(options: EnsureTableOptions): Promise<TableDescription> {
  const { client, definition, billing, clock, signal } = options;
  const deadline = clock.monotonicNow() + options.timeoutMs;
  let lastStatus = 'missing';
  for (;;) {
    const table = await describeTable(client, definition, billing, signal);
    if (table === null) {
      lastStatus = 'missing';
      await createTable(client, definition, billing, signal);
    } else {
      checkKeySchema(definition, table);
      lastStatus = table.TableStatus ?? 'unknown';
      // An UPDATING table serves reads and writes; the Java KCL treats it as existing too.
      if (lastStatus === 'ACTIVE' || lastStatus === 'UPDATING') return table;
      if (lastStatus !== 'CREATING' && lastStatus !== 'DELETING') {
        throw new LeaseStoreError(
          PACKAGE_NAME,
          `${PACKAGE_NAME}: table ${JSON.stringify(definition.tableName)} is ${lastStatus} and cannot be used; repair or recreate it (see the DynamoDB console)`,
          { code: 'LEASE_STORE_FAILURE', retryable: false },
        );
      }
    }
    const remaining = deadline - clock.monotonicNow();
    if (remaining <= 0) {
      throw new LeaseStoreError(
        PACKAGE_NAME,
        `${PACKAGE_NAME}: table ${JSON.stringify(definition.tableName)} did not become ACTIVE within ${options.timeoutMs} ms (last status: ${lastStatus}); check it in the DynamoDB console, or raise schemaWaitTimeoutMs`,
        { code: 'LEASE_STORE_UNAVAILABLE', retryable: true },
      );
    }
    await clock.sleep(Math.min(options.pollIntervalMs, remaining), signal);
    // The clock's sleep ends early on abort; the wait must not go on polling after it.
    if (signal?.aborted === true) {
      throw mapDynamoError(signal.reason, { operation: 'DescribeTable', table: definition, billing, signal });
    }
  }
}

async function describeTable(
  client: DynamoDBClient,
  definition: DynamoTableDefinition,
  billing: DynamoTableBilling,
  signal: AbortSignal | undefined,
): Promise<TableDescription | null> {
  try {
    const output = await client.send(
      new DescribeTableCommand({ TableName: definition.tableName }),
      sendOptions(signal),
    );
    return output.Table ?? null;
  } catch (error) {
    if (isTableMissing(error)) return null;
    throw mapDynamoError(error, { operation: 'DescribeTable', table: definition, billing, signal });
  }
}

async function createTable(
  client: DynamoDBClient,
  definition: DynamoTableDefinition,
  billing: DynamoTableBilling,
  signal: AbortSignal | undefined,
): Promise<void> {
  try {
    await client.send(new CreateTableCommand(createTableInput(definition, billing)), sendOptions(signal));
  } catch (error) {
    // Another worker created it between our DescribeTable and CreateTable: wait for it like our own.
    if (isTableInUse(error)) return;
    throw mapDynamoError(error, { operation: 'CreateTable', table: definition, billing, signal });
  }
}

function checkKeySchema(definition: DynamoTableDefinition, table: TableDescription): void {
  const expected = keySchema(definition)
    .map((element) => `${element.AttributeName}:${element.KeyType}`)
    .sort();
  const actual = (table.KeySchema ?? [])
    .map((element) => `${element.AttributeName}:${element.KeyType}`)
    .sort();
  if (expected.join(',') === actual.join(',')) return;
  const found = (table.KeySchema ?? []).map((element) => `${element.AttributeName} (${element.KeyType})`);
  const purpose =
    definition.role === 'worker'
      ? 'the kcl worker registry'
      : definition.rangeKey === null
        ? "the 'java' layout (the Java KCL lease table)"
        : "the 'shared' layout";
  throw new LeaseStoreError(
    PACKAGE_NAME,
    `${PACKAGE_NAME}: table ${JSON.stringify(definition.tableName)} has the key schema ${found.join(' + ') || '(none)'}, but ${purpose} needs ${describeKeySchema(definition)}; use another table name, or the layout that matches this table`,
    { code: 'LEASE_STORE_FAILURE', retryable: false },
  );
}
