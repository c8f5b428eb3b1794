import type { Clock, ExtendedSequenceNumber, Logger } from '@kcl/core';
import { KclError } from '@kcl/core';
import { invalidArgument, isWriteConflict, toLeaseStoreError } from './sql-errors.js';
import type { SqlFlavor } from './sql-flavor.js';
import { codePointLength } from './sql-lease-store-options.js';
import { MAX_SEQUENCE_NUMBER_LENGTH } from './sql-schema.js';
import type { SqlLeaseTableNames } from './sql-table-names.js';
import type { AnyKysely } from './sql-types.js';

/** What every role of one store shares: where its rows are and how to report on them. */
export interface SqlStoreContext {
  /** The caller's Kysely instance without its plugins. */
  readonly db: AnyKysely;
  /**
   * The caller's Kysely instance as given, plugins included: the transactions handed to the
   * application (`checkpointInTransaction`) are opened on it, so its plugins apply to its own writes.
   */
  readonly userDb: AnyKysely;
  readonly flavor: SqlFlavor;
  readonly tables: SqlLeaseTableNames;
  readonly applicationName: string;
  /** Names the store in messages: `@kcl/store-sql (PostgreSQL table "kcl_leases" (application "x"))`. */
  readonly store: string;
  readonly clock: Clock;
  readonly logger: Logger;
  /** PostgreSQL: the server-side bound of an application transaction (0: none). */
  readonly transactionTimeoutMs: number;
}

/** A deadlock or serialization failure rolls the statement back whole; run it again this many times. */
const CONFLICT_ATTEMPTS = 3;

/**
 * Runs `body`, running it again after a deadlock or serialization failure, and turns any native
 * error into a kcl error that names `operation`.
 */
export async function runSql<T>(
  context: SqlStoreContext,
  operation: string,
  body: () => Promise<T>,
  attempts: number = CONFLICT_ATTEMPTS,
): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await body();
    } catch (error) {
      if (KclError.is(error)) throw error;
      if (attempt < attempts && isWriteConflict(error)) continue;
      throw toLeaseStoreError(error, { store: context.store, operation, tables: context.tables });
    }
  }
}

/** Refuses a key the column cannot hold, before sending it. */
export function checkKey(context: SqlStoreContext, what: string, value: unknown, maxLength: number): void {
  if (typeof value !== 'string') throw invalidArgument(context.store, `${what} must be a string`);
  if (codePointLength(value) > maxLength) {
    throw invalidArgument(
      context.store,
      `${what} ${JSON.stringify(value.slice(0, 40))}… is longer than ${maxLength} characters, the length of its column`,
    );
  }
  if (value.includes('\u0000')) {
    throw invalidArgument(context.store, `${what} must not contain the NUL character`);
  }
}

export function checkPosition(
  context: SqlStoreContext,
  what: string,
  position: ExtendedSequenceNumber | null | undefined,
): void {
  if (
    position !== null &&
    position !== undefined &&
    position.sequenceNumber.length > MAX_SEQUENCE_NUMBER_LENGTH
  ) {
    throw invalidArgument(
      context.store,
      `the ${what} sequence number is longer than ${MAX_SEQUENCE_NUMBER_LENGTH} digits`,
    );
  }
}

export function checkCount(context: SqlStoreContext, what: string, value: number): void {
  if (!Number.isSafeInteger(value) || value < 0) {
    throw invalidArgument(context.store, `${what} must be a non-negative integer, got ${String(value)}`);
  }
}
