import {
  ConditionalCheckFailedException,
  InternalServerError,
  ProvisionedThroughputExceededException,
  RequestLimitExceeded,
  ResourceNotFoundException,
  ThrottlingException,
} from '@aws-sdk/client-dynamodb';
import { KclError, LeaseStoreError, LeaseStoreSchemaMissingError } from '@kcl/core';
import { describe, expect, it } from 'vitest';
import type { DynamoCallContext } from './dynamo-error-mapping.js';
import { isConditionalCheckFailed, itemOfConditionFailure, mapDynamoError } from './dynamo-error-mapping.js';
import { leaseTableDefinition, workerTableDefinition } from './dynamo-table-schema.js';

const metadata = { $metadata: { httpStatusCode: 400 } };
const context: DynamoCallContext = {
  operation: 'UpdateItem (renew lease "shardId-1")',
  table: leaseTableDefinition('orders-app', 'java'),
  billing: { mode: 'PAY_PER_REQUEST' },
};

describe('mapDynamoError', () => {
  it.each([
    [
      'ProvisionedThroughputExceededException',
      new ProvisionedThroughputExceededException({ message: 'slow down', ...metadata }),
    ],
    ['ThrottlingException', new ThrottlingException({ message: 'rate exceeded', ...metadata })],
    ['RequestLimitExceeded', new RequestLimitExceeded({ message: 'account limit', ...metadata })],
  ])('maps %s to a retryable throttling error', (name, error) => {
    const mapped = mapDynamoError(error, context);
    expect(mapped).toBeInstanceOf(LeaseStoreError);
    expect(mapped.retryable).toBe(true);
    expect(mapped.code).toBe('LEASE_STORE_THROTTLED');
    expect(mapped.cause).toBe(error);
    expect(mapped.message).toMatch(
      /^@kcl\/store-dynamo: UpdateItem \(renew lease "shardId-1"\) on table "orders-app"/,
    );
    expect(mapped.message).toContain(name);
  });

  it('maps server faults and 5xx answers to retryable unavailability', () => {
    const internal = new InternalServerError({ message: 'oops', $metadata: { httpStatusCode: 500 } });
    const unknown5xx = Object.assign(new Error('bad gateway'), {
      name: 'UnknownError',
      $metadata: { httpStatusCode: 502 },
    });
    for (const error of [internal, unknown5xx]) {
      const mapped = mapDynamoError(error, context);
      expect([mapped.code, mapped.retryable]).toEqual(['LEASE_STORE_UNAVAILABLE', true]);
    }
  });

  it('maps refused connections, DNS failures and timeouts to retryable unavailability', () => {
    const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:1'), { code: 'ECONNREFUSED' });
    const aggregate = new AggregateError(
      [Object.assign(new Error('connect ECONNREFUSED ::1:1'), { code: 'ECONNREFUSED' })],
      'all addresses failed',
    );
    const timeout = Object.assign(new Error('socket timed out'), { name: 'TimeoutError' });
    const wrapped = new Error('request failed', {
      cause: Object.assign(new Error('reset'), { code: 'ECONNRESET' }),
    });
    for (const error of [refused, aggregate, timeout, wrapped]) {
      const mapped = mapDynamoError(error, context);
      expect([mapped.code, mapped.retryable], String(error)).toEqual(['LEASE_STORE_UNAVAILABLE', true]);
    }
    // The message names the network code, also when the error only wraps it.
    expect(mapDynamoError(aggregate, context).message).toContain('all addresses failed (ECONNREFUSED)');
    expect(mapDynamoError(wrapped, context).message).toContain('request failed (ECONNRESET)');
  });

  it('maps a missing lease table to a schema error that says how to create it', () => {
    const mapped = mapDynamoError(
      new ResourceNotFoundException({ message: 'Requested resource not found', ...metadata }),
      context,
    );
    expect(mapped).toBeInstanceOf(LeaseStoreSchemaMissingError);
    expect(mapped.retryable).toBe(false);
    expect(mapped.message).toContain('the lease table "orders-app" does not exist');
    expect(mapped.message).toContain('await store.admin.ensureSchema()');
    expect(mapped.message).toContain(
      'aws dynamodb create-table --table-name orders-app --attribute-definitions AttributeName=leaseKey,AttributeType=S --key-schema AttributeName=leaseKey,KeyType=HASH --billing-mode PAY_PER_REQUEST',
    );
  });

  it('names the worker registry table and its keys when that one is missing', () => {
    const mapped = mapDynamoError(new ResourceNotFoundException({ message: 'not found', ...metadata }), {
      operation: 'Query (list workers)',
      table: workerTableDefinition('orders-app-kcl-workers'),
      billing: { mode: 'PROVISIONED', readCapacityUnits: 5, writeCapacityUnits: 7 },
    });
    expect(mapped.message).toContain('the worker registry table "orders-app-kcl-workers"');
    expect(mapped.message).toContain(
      '--key-schema AttributeName=applicationName,KeyType=HASH AttributeName=entryKey,KeyType=RANGE --billing-mode PROVISIONED --provisioned-throughput ReadCapacityUnits=5,WriteCapacityUnits=7',
    );
  });

  it('maps validation and permission errors to non-retryable failures', () => {
    const validation = Object.assign(new Error('One or more parameter values were invalid'), {
      name: 'ValidationException',
      $fault: 'client',
      $metadata: { httpStatusCode: 400 },
    });
    const denied = Object.assign(new Error('not authorized'), {
      name: 'AccessDeniedException',
      $metadata: { httpStatusCode: 400 },
    });
    expect([mapDynamoError(validation, context).retryable, mapDynamoError(validation, context).code]).toEqual(
      [false, 'LEASE_STORE_FAILURE'],
    );
    expect(mapDynamoError(denied, context).message).toContain('IAM permissions');
    expect(mapDynamoError('a string', context).retryable).toBe(false);
  });

  it('passes kcl errors through unchanged', () => {
    const error = new KclError('SHUTDOWN', 'stopping');
    expect(mapDynamoError(error, context)).toBe(error);
  });
});

describe('conditional check failures', () => {
  it('are recognised and give the old item when DynamoDB returned it', () => {
    const withItem = new ConditionalCheckFailedException({
      message: 'The conditional request failed',
      ...metadata,
      Item: { leaseKey: { S: 'k' }, leaseCounter: { N: '3' } },
    });
    const without = new ConditionalCheckFailedException({
      message: 'The conditional request failed',
      ...metadata,
    });
    expect(isConditionalCheckFailed(withItem)).toBe(true);
    expect(itemOfConditionFailure(withItem)).toEqual({ leaseKey: { S: 'k' }, leaseCounter: { N: '3' } });
    expect(itemOfConditionFailure(without)).toBeUndefined();
    expect(isConditionalCheckFailed(new Error('other'))).toBe(false);
  });
});
