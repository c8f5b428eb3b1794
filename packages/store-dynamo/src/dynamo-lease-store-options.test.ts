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
      'client must be a DynamoDBClient (an object with a send method)',
      'applicationName must be a non-empty string',
      "layout must be 'java' or 'shared', got \"sideways\"",
      expect.stringContaining('tableName "x" is not a valid DynamoDB table name'),
      'billing.readCapacityUnits must be a positive integer with PROVISIONED billing',
      'billing.writeCapacityUnits must be a positive integer with PROVISIONED billing',
      'consistentReads must be a boolean',
      'clock must implement now, monotonicNow and sleep (a Clock from @kcl/core)',
      'renewConcurrency must be a positive integer',
      'pageSize must be a positive integer',
      'schemaWaitTimeoutMs must be a positive integer',
      'schemaPollIntervalMs must be a positive integer',
      'logger must implement debug, info, warn and error (a Logger from @kcl/core)',
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
      /^@kcl\/store-dynamo: invalid configuration \(1 problem\)/,
    );
  });
});
