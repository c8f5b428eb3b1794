/**
 * Machine-readable error codes. Every error kcl throws carries one, so callers can branch without
 * parsing messages.
 */
export type KclErrorCode =
  | 'CONFIGURATION'
  | 'INVALID_SEQUENCE_NUMBER'
  | 'INVALID_HASH_KEY'
  | 'LEASE_STORE_UNAVAILABLE'
  | 'LEASE_STORE_THROTTLED'
  | 'LEASE_STORE_SCHEMA_MISSING'
  | 'LEASE_STORE_FAILURE'
  | 'LEASE_DATA_INVALID'
  | 'APPLICATION_MIGRATED'
  | 'CHECKPOINT_INVALID'
  | 'CHECKPOINT_LEASE_LOST'
  | 'KINESIS_FAILURE'
  | 'SHUTDOWN';

export interface KclErrorOptions {
  readonly retryable?: boolean;
  readonly cause?: unknown;
}

/**
 * The root of kcl's error hierarchy. `retryable` says whether the same call may succeed if repeated
 * later (a throttled or unreachable store), as opposed to a condition that needs a change first.
 */
export class KclError extends Error {
  readonly code: KclErrorCode;
  readonly retryable: boolean;

  constructor(code: KclErrorCode, message: string, options: KclErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.code = code;
    this.retryable = options.retryable ?? false;
  }
}

/** Options were invalid. Lists every problem found, not only the first. */
export class ConfigurationError extends KclError {
  readonly problems: readonly string[];

  constructor(component: string, problems: readonly string[]) {
    super(
      'CONFIGURATION',
      `${component}: invalid configuration (${problems.length} problem${problems.length === 1 ? '' : 's'}):\n${problems
        .map((problem) => `  - ${problem}`)
        .join('\n')}`,
    );
    this.problems = [...problems];
  }
}

/** A checkpoint or sequence number string that is neither a decimal number nor a known sentinel. */
export class InvalidSequenceNumberError extends KclError {
  readonly value: unknown;

  constructor(value: unknown, detail?: string) {
    super(
      'INVALID_SEQUENCE_NUMBER',
      `@kcl/core: ${JSON.stringify(value)} is not a sequence number: expected a decimal string of digits or one of TRIM_HORIZON, LATEST, AT_TIMESTAMP, SHARD_END${detail === undefined ? '' : ` (${detail})`}`,
    );
    this.value = value;
  }
}

/** A hash key outside 0 … 2^128 − 1, or a range whose start exceeds its end. */
export class InvalidHashKeyError extends KclError {
  constructor(message: string) {
    super('INVALID_HASH_KEY', `@kcl/core: ${message}`);
  }
}

/**
 * An infrastructure failure of a lease store: the store could not be reached, timed out, throttled the
 * call or failed internally. A lost race is never reported this way (see `LeaseWriteResult`).
 */
export class LeaseStoreError extends KclError {
  readonly store: string;

  constructor(
    store: string,
    message: string,
    options: KclErrorOptions & { readonly code?: KclErrorCode } = {},
  ) {
    super(options.code ?? 'LEASE_STORE_FAILURE', message, options);
    this.store = store;
  }
}

/** The store's tables do not exist. The message says how to create them. */
export class LeaseStoreSchemaMissingError extends LeaseStoreError {
  constructor(store: string, message: string, options: KclErrorOptions = {}) {
    super(store, message, { ...options, code: 'LEASE_STORE_SCHEMA_MISSING', retryable: false });
  }
}

/** A stored lease row could not be read. Names the lease key so an operator can fix or delete it. */
export class LeaseDataError extends LeaseStoreError {
  readonly leaseKey: string;

  constructor(store: string, leaseKey: string, problem: string, options: KclErrorOptions = {}) {
    super(store, `${store}: lease ${JSON.stringify(leaseKey)} cannot be read: ${problem}`, {
      ...options,
      code: 'LEASE_DATA_INVALID',
      retryable: false,
    });
    this.leaseKey = leaseKey;
  }
}

/**
 * The application's leases were moved to another store (by `kcl-migrate`). A worker pointed at the
 * old store must stop instead of processing alone.
 */
export class ApplicationMigratedError extends KclError {
  readonly migratedTo: string;

  constructor(applicationName: string, migratedTo: string) {
    super(
      'APPLICATION_MIGRATED',
      `kcl: the leases of application ${JSON.stringify(applicationName)} were migrated to ${migratedTo}; point this worker at that store (or clear the marker with kcl-migrate --unmark if the migration was undone)`,
    );
    this.migratedTo = migratedTo;
  }
}

/** A checkpoint that would go backwards, past the last delivered record, or is otherwise not allowed. */
export class InvalidCheckpointError extends KclError {
  constructor(message: string) {
    super('CHECKPOINT_INVALID', message);
  }
}

/** A checkpoint refused because this worker no longer holds the lease (it expired, was stolen or released). */
export class LeaseLostError extends KclError {
  readonly leaseKey: string;

  constructor(leaseKey: string, detail: string) {
    super('CHECKPOINT_LEASE_LOST', `kcl: lease ${JSON.stringify(leaseKey)} is no longer held: ${detail}`);
    this.leaseKey = leaseKey;
  }
}

/** True when `error` is a kcl error that says the same call may succeed later. */
export function isRetryableError(error: unknown): boolean {
  return error instanceof KclError && error.retryable;
}
