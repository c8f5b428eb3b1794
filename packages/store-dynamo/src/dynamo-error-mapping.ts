import type { KclErrorCode } from '@kcl/core';
import {
  isNetworkError,
  KclError,
  LeaseStoreError,
  LeaseStoreSchemaMissingError,
  NETWORK_ERROR_CODES,
  StoreCallAbortedError,
} from '@kcl/core';
import type { DynamoItem } from './dynamo-item-codec.js';
import type { DynamoTableBilling } from './dynamo-lease-store-options.js';
import { PACKAGE_NAME } from './dynamo-lease-store-options.js';
import type { DynamoTableDefinition } from './dynamo-table-schema.js';
import { createTableCommandLine, describeKeySchema } from './dynamo-table-schema.js';

/** What a failed call was doing, for the message of the error it becomes. */
export interface DynamoCallContext {
  /** E.g. `UpdateItem (renew lease "shardId-000000000001")`. */
  readonly operation: string;
  readonly table: DynamoTableDefinition;
  readonly billing: DynamoTableBilling;
  /** The caller's signal: a call that failed because it was aborted reports the abort, not a fault. */
  readonly signal?: AbortSignal | undefined;
}

/**
 * What every `client.send` gets as its second argument: the caller's signal, so the AWS SDK cancels
 * the request when the call is aborted.
 */
export function sendOptions(signal: AbortSignal | undefined): { abortSignal?: AbortSignal } {
  return signal === undefined ? {} : { abortSignal: signal };
}

/** DynamoDB refused the call because of request rates; the same call later will succeed. */
const THROTTLING = new Set([
  'ProvisionedThroughputExceededException',
  'ThrottlingException',
  'RequestLimitExceeded',
  'Throttling',
  'ThrottledException',
  'TooManyRequestsException',
  // Too many concurrent control-plane operations (CreateTable and friends).
  'LimitExceededException',
]);

/** DynamoDB or the network failed in a way that usually passes. */
const TRANSIENT = new Set([
  'InternalServerError',
  'InternalFailure',
  'ServiceUnavailable',
  'ServiceUnavailableException',
  'TransactionConflictException',
  'ReplicatedWriteConflictException',
  'RequestTimeout',
  'RequestTimeoutException',
  'TimeoutError',
]);

const PERMISSION = new Set([
  'AccessDeniedException',
  'UnrecognizedClientException',
  'InvalidSignatureException',
  'MissingAuthenticationToken',
  'ExpiredTokenException',
  'CredentialsProviderError',
]);

interface ErrorShape {
  readonly name?: unknown;
  readonly message?: unknown;
  readonly code?: unknown;
  readonly errors?: unknown;
  readonly $fault?: unknown;
  readonly $retryable?: unknown;
  readonly $metadata?: { readonly httpStatusCode?: unknown };
  readonly Item?: unknown;
}

function shape(error: unknown): ErrorShape {
  return error !== null && typeof error === 'object' ? (error as ErrorShape) : {};
}

function nameOf(error: unknown): string {
  const name = shape(error).name;
  return typeof name === 'string' ? name : '';
}

/** A conditional write whose condition did not hold: a lost race, never an error. */
export function isConditionalCheckFailed(error: unknown): boolean {
  return nameOf(error) === 'ConditionalCheckFailedException';
}

/**
 * The item as it was when a condition failed, when DynamoDB returned it
 * (`ReturnValuesOnConditionCheckFailure: ALL_OLD`); undefined when it did not (an emulator that
 * ignores the parameter, or an item that does not exist).
 */
export function itemOfConditionFailure(error: unknown): DynamoItem | undefined {
  const item = shape(error).Item;
  return item !== null && typeof item === 'object' ? (item as DynamoItem) : undefined;
}

/** The table does not exist (or is still being created). */
export function isTableMissing(error: unknown): boolean {
  return nameOf(error) === 'ResourceNotFoundException';
}

/** CreateTable found the table already there or being created by someone else. */
export function isTableInUse(error: unknown): boolean {
  return nameOf(error) === 'ResourceInUseException';
}

/**
 * The network code that makes `error` a network error (see core's `isNetworkError`), for the message:
 * the error's own, or that of the error it wraps (its `cause`, or a member of an `AggregateError`,
 * which Node throws when every address of a host refused the connection). Null for other errors.
 */
function networkCodeOf(error: unknown): string | null {
  let current: unknown = error;
  // Each step goes one level down to an error that still carries the code, so this ends.
  while (isNetworkError(current)) {
    const { code, errors } = shape(current);
    if (typeof code === 'string' && NETWORK_ERROR_CODES.has(code)) return code;
    const cause = (current as { cause?: unknown }).cause;
    current = (Array.isArray(errors) ? errors.find(isNetworkError) : undefined) ?? cause;
  }
  return null;
}

function describeError(error: unknown): string {
  const name = nameOf(error);
  const message = shape(error).message;
  const text = typeof message === 'string' && message.length > 0 ? message : String(error);
  const code = networkCodeOf(error);
  return [
    name.length > 0 && name !== 'Error' ? `${name}: ` : '',
    text,
    code !== null && !text.includes(code) ? ` (${code})` : '',
  ].join('');
}

/**
 * Turns anything a DynamoDB call threw into a kcl error: throttling, server faults, timeouts and
 * unreachable endpoints are retryable `LeaseStoreError`s; a missing table is a
 * `LeaseStoreSchemaMissingError` that says how to create it; everything else is a non-retryable
 * `LeaseStoreError`. The original error is kept as `cause`.
 */
export function mapDynamoError(error: unknown, context: DynamoCallContext): KclError {
  if (KclError.is(error)) return error;
  const name = nameOf(error);
  const where = `${context.operation} on table ${JSON.stringify(context.table.tableName)}`;
  if (context.signal?.aborted === true) {
    // The SDK rejects an aborted request with its own AbortError; the caller asked for it, so it is
    // reported as the abort (what core's guard reports too), never as a failing DynamoDB.
    const reason: unknown = context.signal.reason;
    return KclError.is(reason)
      ? reason
      : new StoreCallAbortedError(
          context.operation,
          `table ${JSON.stringify(context.table.tableName)}`,
          reason,
        );
  }
  const detail = describeError(error);

  if (isTableMissing(error)) {
    const table = context.table.role === 'lease' ? 'lease table' : 'worker registry table';
    return new LeaseStoreSchemaMissingError(
      PACKAGE_NAME,
      `${PACKAGE_NAME}: the ${table} ${JSON.stringify(context.table.tableName)} does not exist (or is not ACTIVE yet). Create it with \`await store.admin.ensureSchema()\`, or ahead of time with the AWS CLI: ${createTableCommandLine(context.table, context.billing)} (key schema ${describeKeySchema(context.table)})`,
      { cause: error },
    );
  }

  const failure = (code: KclErrorCode, retryable: boolean, advice: string): LeaseStoreError =>
    new LeaseStoreError(PACKAGE_NAME, `${PACKAGE_NAME}: ${where} failed: ${detail}; ${advice}`, {
      code,
      retryable,
      cause: error,
    });

  if (THROTTLING.has(name)) {
    return failure(
      'LEASE_STORE_THROTTLED',
      true,
      'DynamoDB throttled the call; it will succeed when retried later (raise the table capacity or use PAY_PER_REQUEST if this persists)',
    );
  }
  const { $fault, $metadata, $retryable } = shape(error);
  const status = typeof $metadata?.httpStatusCode === 'number' ? $metadata.httpStatusCode : null;
  if (TRANSIENT.has(name) || $fault === 'server' || (status !== null && status >= 500)) {
    return failure('LEASE_STORE_UNAVAILABLE', true, 'DynamoDB failed or timed out; retry later');
  }
  if (isNetworkError(error)) {
    return failure(
      'LEASE_STORE_UNAVAILABLE',
      true,
      'DynamoDB could not be reached; check the endpoint and the network, then retry',
    );
  }
  if (PERMISSION.has(name)) {
    return failure(
      'LEASE_STORE_FAILURE',
      false,
      'check the credentials and the IAM permissions for this table (see the @kcl/store-dynamo README)',
    );
  }
  if ($retryable !== undefined && $retryable !== null && $retryable !== false) {
    return failure('LEASE_STORE_UNAVAILABLE', true, 'the AWS SDK marks this error as retryable; retry later');
  }
  return failure('LEASE_STORE_FAILURE', false, 'this call will not succeed as is');
}
