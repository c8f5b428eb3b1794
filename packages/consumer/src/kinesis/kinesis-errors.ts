import { isNetworkError, KclError } from '@kcl/core';

/** A Kinesis call that did not answer within the consumer's `kinesisCallTimeoutMs`. */
export class KinesisCallTimeoutError extends KclError {
  constructor(operation: string, timeoutMs: number) {
    super(
      'KINESIS_CALL_TIMEOUT',
      `@kcl/consumer: Kinesis ${operation} did not answer within ${timeoutMs} ms (kinesisCallTimeoutMs); retrying`,
      { retryable: true },
    );
  }
}
/** How the runtime reacts to a failed Kinesis call. */
export type KinesisErrorKind =
  /** Throughput exceeded: back off exponentially, then retry. */
  | 'throttled'
  /** The shard iterator is too old: get a new one after the last record read. */
  | 'expired-iterator'
  /** The stream or shard does not exist (deleted, or trimmed away): the shard is gone. */
  | 'not-found'
  /** A network failure, a timeout or a 5xx: back off, then retry. */
  | 'transient'
  /** Kinesis rejected the iterator or an argument: get a new iterator and retry. */
  | 'invalid-argument'
  /** Permissions, encryption keys or a malformed request: retrying will not help. */
  | 'fatal';

const THROTTLED = new Set([
  'ProvisionedThroughputExceededException',
  'LimitExceededException',
  'ThrottlingException',
  'KMSThrottlingException',
  'RequestLimitExceeded',
  'TooManyRequestsException',
]);

interface SdkLikeError {
  readonly name?: string;
  readonly $metadata?: { readonly httpStatusCode?: number };
  readonly $retryable?: unknown;
}

/** Classifies an error thrown by the Kinesis client. */
export function classifyKinesisError(error: unknown): KinesisErrorKind {
  if (typeof error !== 'object' || error === null) return 'transient';
  const sdk = error as SdkLikeError;
  const name = sdk.name ?? '';
  if (KclError.is(error) && error.code === 'KINESIS_CALL_TIMEOUT') return 'transient';
  if (THROTTLED.has(name)) return 'throttled';
  if (name === 'ExpiredIteratorException') return 'expired-iterator';
  if (name === 'ResourceNotFoundException') return 'not-found';
  if (name === 'InvalidArgumentException') return 'invalid-argument';
  if (
    name === 'InternalFailureException' ||
    name === 'ServiceUnavailable' ||
    name === 'ServiceUnavailableException'
  ) {
    return 'transient';
  }
  if (name === 'TimeoutError' || name === 'RequestTimeout' || name === 'AbortError') return 'transient';
  // A connection that could not be made or broke off (core's one list of codes, wrapped errors included).
  if (isNetworkError(error)) return 'transient';
  const status = sdk.$metadata?.httpStatusCode;
  if (status !== undefined && status >= 500) return 'transient';
  if (status === 429) return 'throttled';
  if (sdk.$retryable !== undefined) return 'transient';
  if (status === undefined && !name.endsWith('Exception')) return 'transient';
  return 'fatal';
}

/** A failed Kinesis call worth trying again after a backoff: throttled, or failed transiently. */
export function isRetryableKinesisError(error: unknown): boolean {
  const kind = classifyKinesisError(error);
  return kind === 'throttled' || kind === 'transient';
}
