import { KclError } from '@kcl/core';
import { PACKAGE_NAME } from './package-name.js';

/**
 * The codes this package's errors carry (besides core's, e.g. `CONFIGURATION` for invalid options):
 * - `MIGRATION_REFUSED`: the stores are not in a state where the step is safe; nothing unsafe was done.
 * - `MIGRATION_INTERRUPTED`: stopped through the caller's signal; running the same step again continues.
 * - `MIGRATION_TARGET_CHANGING`: a lease kept changing on the target while an offline copy wrote it.
 */
export type StoreMigrateErrorCode =
  | 'MIGRATION_REFUSED'
  | 'MIGRATION_INTERRUPTED'
  | 'MIGRATION_TARGET_CHANGING';

/** A refusal: the stores are not in a state where the step is safe. Names what to do. */
export class LiveMigrationRefusedError extends KclError {
  readonly problems: readonly string[];

  constructor(step: string, problems: readonly string[]) {
    super(
      'MIGRATION_REFUSED',
      `${PACKAGE_NAME}: ${step} refused:\n${problems.map((problem) => `  - ${problem}`).join('\n')}`,
    );
    this.problems = [...problems];
  }

  static override is(value: unknown): value is LiveMigrationRefusedError {
    return KclError.isClass(value, 'LiveMigrationRefusedError');
  }
}

/** A step stopped through the caller's signal. Every step can be run again and continues where it stopped. */
export class MigrationInterruptedError extends KclError {
  constructor() {
    super('MIGRATION_INTERRUPTED', `${PACKAGE_NAME}: interrupted; run the same command again to continue`);
  }

  static override is(value: unknown): value is MigrationInterruptedError {
    return KclError.isClass(value, 'MigrationInterruptedError');
  }
}

/**
 * An offline copy found a target lease changing under it, attempt after attempt: something (a fleet
 * already started on the target?) writes it. Retryable: once that stops, running the copy again works.
 */
export class MigrationTargetChangingError extends KclError {
  readonly leaseKey: string;
  readonly store: string;

  constructor(store: string, leaseKey: string) {
    super(
      'MIGRATION_TARGET_CHANGING',
      `${PACKAGE_NAME}: lease ${JSON.stringify(leaseKey)} kept changing on the target (${store}) while it was copied; is a fleet already running on the target? Stop it and run again`,
      { retryable: true },
    );
    this.leaseKey = leaseKey;
    this.store = store;
  }

  static override is(value: unknown): value is MigrationTargetChangingError {
    return KclError.isClass(value, 'MigrationTargetChangingError');
  }
}
