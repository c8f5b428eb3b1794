import {
  ExpiredIteratorException,
  InvalidArgumentException,
  KMSAccessDeniedException,
  LimitExceededException,
  ProvisionedThroughputExceededException,
  ResourceNotFoundException,
} from '@aws-sdk/client-kinesis';
import { describe, expect, it } from 'vitest';
import { classifyKinesisError } from './kinesis-errors.js';

const meta = { $metadata: {} };

describe('classifyKinesisError', () => {
  it.each([
    [new ProvisionedThroughputExceededException({ message: 'x', ...meta }), 'throttled'],
    [new LimitExceededException({ message: 'x', ...meta }), 'throttled'],
    [new ExpiredIteratorException({ message: 'x', ...meta }), 'expired-iterator'],
    [new ResourceNotFoundException({ message: 'x', ...meta }), 'not-found'],
    [new InvalidArgumentException({ message: 'x', ...meta }), 'invalid-argument'],
    [new KMSAccessDeniedException({ message: 'x', ...meta }), 'fatal'],
    [Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' }), 'transient'],
    // Any of core's network error codes, also when the SDK wraps the socket error.
    [Object.assign(new Error('connect timeout'), { code: 'UND_ERR_CONNECT_TIMEOUT' }), 'transient'],
    [
      Object.assign(
        new Error('request failed', { cause: Object.assign(new Error('down'), { code: 'ENETDOWN' }) }),
        { name: 'NetworkingException' },
      ),
      'transient',
    ],
    [
      Object.assign(new Error('boom'), { name: 'SomethingException', $metadata: { httpStatusCode: 503 } }),
      'transient',
    ],
    [
      Object.assign(new Error('slow down'), {
        name: 'SomethingException',
        $metadata: { httpStatusCode: 429 },
      }),
      'throttled',
    ],
    [
      Object.assign(new Error('denied'), {
        name: 'AccessDeniedException',
        $metadata: { httpStatusCode: 400 },
      }),
      'fatal',
    ],
  ])('classifies %s', (error, kind) => {
    expect(classifyKinesisError(error)).toBe(kind);
  });
});
