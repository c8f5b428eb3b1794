/**
 * The codes `@kcl/core`'s own errors carry. Codes are open: every package names its own
 * (`'MULTILANG_CHILD_FAILED'`, `'KINESIS_CALL_TIMEOUT'`, …) and documents them; callers branch on
 * `code` (or use `isKclError(error, code)`) without parsing messages.
 */
export type CoreErrorCode =
  | 'CONFIGURATION'
  | 'INVALID_SEQUENCE_NUMBER'
  | 'INVALID_HASH_KEY'
  | 'LEASE_STORE_UNAVAILABLE'
  | 'LEASE_STORE_THROTTLED'
  | 'LEASE_STORE_SCHEMA_MISSING'
  | 'LEASE_STORE_FAILURE'
  | 'LEASE_STORE_VERSION'
  | 'LEASE_DATA_INVALID'
  | 'WORKER_SESSION_HELD'
  | 'APPLICATION_MIGRATED'
  | 'CHECKPOINT_INVALID'
  | 'CHECKPOINT_LEASE_LOST';

/** A core code, or any package's own (written in SCREAMING_SNAKE_CASE, prefixed by the package's area). */
export type KclErrorCode = CoreErrorCode | (string & {});

export interface KclErrorOptions {
  readonly retryable?: boolean;
  readonly cause?: unknown;
}

const ROOT_MARKER = '@kcl/error';

/** True when `value` carries the marker `name` (a `Symbol.for`, so two copies of a package agree). */
function hasMarker(value: unknown, name: string): boolean {
  const marker = Symbol.for(name);
  return (
    typeof value === 'object' &&
    value !== null &&
    marker in value &&
    (value as Record<symbol, unknown>)[marker] === true
  );
}

/** Marks an error object with `name`; each kcl error class marks its instances with its own name. */
function mark(target: object, name: string): void {
  Object.defineProperty(target, Symbol.for(name), { value: true, enumerable: false });
}

/**
 * The root of kcl's errors. `retryable` says whether the same call may succeed if repeated later (a
 * throttled or unreachable store), as opposed to a condition that needs a change first.
 *
 * Identity is checked with `KclError.is(value)` / `isKclError(value, code?)` and each class's own
 * `is()`: they work across two copies of a package in one process, where `instanceof` does not.
 */
export class KclError extends Error {
  readonly code: KclErrorCode;
  readonly retryable: boolean;

  constructor(code: KclErrorCode, message: string, options: KclErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.code = code;
    this.retryable = options.retryable ?? false;
    mark(this, ROOT_MARKER);
    mark(this, `${ROOT_MARKER}/${new.target.name}`);
  }

  static is(value: unknown): value is KclError {
    return hasMarker(value, ROOT_MARKER);
  }

  /** True for an instance of `cls` (or a subclass), by its marker. */
  protected static isClass(value: unknown, className: string): boolean {
    if (!hasMarker(value, ROOT_MARKER)) return false;
    let prototype: unknown = value;
    // A subclass instance carries its own class marker; walk the chain of names it was built with.
    while (prototype !== null && typeof prototype === 'object') {
      const maker = (prototype as { constructor?: { name?: string } }).constructor;
      if (maker?.name === className) return true;
      prototype = Object.getPrototypeOf(prototype);
    }
    return hasMarker(value, `${ROOT_MARKER}/${className}`);
  }
}

/** True when `value` is a kcl error — and, with `code`, carries that code. */
export function isKclError(value: unknown, code?: KclErrorCode): value is KclError {
  return KclError.is(value) && (code === undefined || value.code === code);
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

  static override is(value: unknown): value is ConfigurationError {
    return KclError.isClass(value, 'ConfigurationError');
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

  static override is(value: unknown): value is InvalidSequenceNumberError {
    return KclError.isClass(value, 'InvalidSequenceNumberError');
  }
}

/** A hash key outside 0 … 2^128 − 1, or a range whose start exceeds its end. */
export class InvalidHashKeyError extends KclError {
  constructor(message: string) {
    super('INVALID_HASH_KEY', `@kcl/core: ${message}`);
  }

  static override is(value: unknown): value is InvalidHashKeyError {
    return KclError.isClass(value, 'InvalidHashKeyError');
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

  static override is(value: unknown): value is LeaseStoreError {
    return KclError.isClass(value, 'LeaseStoreError');
  }
}

/** The store's tables do not exist. The message says how to create them. */
export class LeaseStoreSchemaMissingError extends LeaseStoreError {
  constructor(store: string, message: string, options: KclErrorOptions = {}) {
    super(store, message, { ...options, code: 'LEASE_STORE_SCHEMA_MISSING', retryable: false });
  }

  static override is(value: unknown): value is LeaseStoreSchemaMissingError {
    return KclError.isClass(value, 'LeaseStoreSchemaMissingError');
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

  static override is(value: unknown): value is LeaseDataError {
    return KclError.isClass(value, 'LeaseDataError');
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

  static override is(value: unknown): value is ApplicationMigratedError {
    return KclError.isClass(value, 'ApplicationMigratedError');
  }
}

/** A checkpoint that would go backwards, past the last delivered record, or is otherwise not allowed. */
export class InvalidCheckpointError extends KclError {
  constructor(message: string) {
    super('CHECKPOINT_INVALID', message);
  }

  static override is(value: unknown): value is InvalidCheckpointError {
    return KclError.isClass(value, 'InvalidCheckpointError');
  }
}

/** A checkpoint refused because this worker no longer holds the lease (it expired, was stolen or released). */
export class LeaseLostError extends KclError {
  readonly leaseKey: string;

  constructor(leaseKey: string, detail: string) {
    super('CHECKPOINT_LEASE_LOST', `kcl: lease ${JSON.stringify(leaseKey)} is no longer held: ${detail}`);
    this.leaseKey = leaseKey;
  }

  static override is(value: unknown): value is LeaseLostError {
    return KclError.isClass(value, 'LeaseLostError');
  }
}

/** True when `error` is a kcl error that says the same call may succeed later. */
export function isRetryableError(error: unknown): boolean {
  return KclError.is(error) && error.retryable;
}
