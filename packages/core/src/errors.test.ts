import { describe, expect, it } from 'vitest';
import {
  ConfigurationError,
  isRetryableError,
  KclError,
  LeaseDataError,
  LeaseStoreError,
  LeaseStoreSchemaMissingError,
} from './errors.js';

describe('errors', () => {
  it('lists every configuration problem in one message', () => {
    const error = new ConfigurationError('@kcl/consumer', [
      'streamName is required',
      'maxRecords must be ≤ 10000',
    ]);
    expect(error).toBeInstanceOf(KclError);
    expect(error.code).toBe('CONFIGURATION');
    expect(error.problems).toHaveLength(2);
    expect(error.message).toContain('2 problems');
    expect(error.message).toContain('  - streamName is required');
    expect(error.message).toContain('  - maxRecords must be ≤ 10000');
    expect(error.name).toBe('ConfigurationError');
  });

  it('keeps the cause and the retryable flag of store errors', () => {
    const cause = new Error('ECONNREFUSED');
    const error = new LeaseStoreError('@kcl/store-sql', 'unreachable', {
      retryable: true,
      cause,
      code: 'LEASE_STORE_UNAVAILABLE',
    });
    expect(error.cause).toBe(cause);
    expect(isRetryableError(error)).toBe(true);
    expect(error.code).toBe('LEASE_STORE_UNAVAILABLE');
    expect(isRetryableError(new Error('plain'))).toBe(false);
  });

  it('marks schema and data errors as not retryable and names the lease', () => {
    expect(new LeaseStoreSchemaMissingError('x', 'run ensureSchema').retryable).toBe(false);
    const data = new LeaseDataError('@kcl/store-dynamo', 'shardId-1', 'checkpoint "x1" is not a number');
    expect(data.retryable).toBe(false);
    expect(data.leaseKey).toBe('shardId-1');
    expect(data.message).toContain('"shardId-1"');
  });
});
