import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { ConfigurationError } from '@kcl/core';
import { describe, expect, it } from 'vitest';
import type { DynamoLeaseStoreOptions } from './dynamo-lease-store-options.js';
import { resolveDynamoLeaseStoreOptions } from './dynamo-lease-store-options.js';

const client = new DynamoDBClient({ region: 'us-east-1' });

function problemsOf(options: unknown): readonly string[] {
  try {
    resolveDynamoLeaseStoreOptions(options as DynamoLeaseStoreOptions);
  } catch (error) {
    if (error instanceof ConfigurationError) return error.problems;
    throw error;
  }
  return [];
}

describe('resolveDynamoLeaseStoreOptions', () => {
  it('defaults to the Java layout with the application name as the table name', () => {
    const resolved = resolveDynamoLeaseStoreOptions({ client, applicationName: 'orders-app' });
    expect(resolved).toMatchObject({
      layout: 'java',
      tableName: 'orders-app',
      workerTableName: 'orders-app-kcl-workers',
      billing: { mode: 'PAY_PER_REQUEST' },
      consistentReads: true,
      renewConcurrency: 10,
      pageSize: null,
    });
  });

  it('lists every problem at once', () => {
    const problems = problemsOf({
      client: {},
      applicationName: '',
      layout: 'sideways',
      tableName: 'x',
      billing: { mode: 'PROVISIONED', readCapacityUnits: 0 },
      consistentReads: 'yes',
      renewConcurrency: 0,
      pageSize: 1.5,
      schemaWaitTimeoutMs: -1,
      schemaPollIntervalMs: 0,
      clock: {},
      logger: { warn: () => {} },
    });
    expect(problems).toEqual([
      'client must be a DynamoDBClient (an object with send)',
      'applicationName must be a non-empty string: the application whose leases the store holds, got ""',
      'layout must be one of java, shared, got "sideways"',
      expect.stringContaining('tableName "x" is not a valid DynamoDB table name'),
      'billing.readCapacityUnits must be an integer from 1 to ∞, got 0',
      'billing.writeCapacityUnits is required with PROVISIONED billing',
      'consistentReads must be true or false, got "yes"',
      'clock must be a Clock from @kcl/core (an object with now, monotonicNow, sleep)',
      'renewConcurrency must be an integer from 1 to ∞, got 0',
      'pageSize must be an integer from 1 to ∞, got 1.5',
      'schemaWaitTimeoutMs must be an integer from 1 to ∞, got -1',
      'schemaPollIntervalMs must be an integer from 1 to ∞, got 0',
      'logger must be a Logger from @kcl/core (an object with debug, info, warn, error)',
    ]);
  });

  it('requires a table name in the shared layout', () => {
    expect(problemsOf({ client, applicationName: 'a', layout: 'shared' })).toEqual([
      "tableName is required with layout 'shared' (the table the applications share)",
    ]);
  });

  it('asks for a table name when the application name cannot be one', () => {
    expect(problemsOf({ client, applicationName: 'billing:eu' })[0]).toMatch(
      /tableName defaults to the applicationName "billing:eu", which is not a valid DynamoDB table name/,
    );
  });

  it('keeps the worker registry out of the lease table', () => {
    expect(problemsOf({ client, applicationName: 'orders', workerTableName: 'orders' })).toEqual([
      'workerTableName must differ from tableName: Java KCL workers would read workers as leases',
    ]);
  });

  it('the error message starts with the package name', () => {
    expect(() => resolveDynamoLeaseStoreOptions({ client, applicationName: '' })).toThrow(
      /^@kcl\/store-dynamo createDynamoLeaseStore: invalid configuration \(1 problem\)/,
    );
  });
});
