import type { LeaseStore } from '@kcl/core';
import type { LeaseChecks } from './lease-checks.js';

/** What an adapter gives the suite: stores on one shared physical table, and optionally a raw view. */
export interface ConformanceHarness {
  /** A store for `applicationName` on this harness's table. Stores of different names share the table. */
  createStore(applicationName: string): Promise<LeaseStore> | LeaseStore;
  /**
   * The stored row of a lease exactly as persisted (column or attribute names as keys), or null when
   * absent. Adapters that can read their own tables offer it, so the suite checks what was written.
   */
  readRawLease?(applicationName: string, leaseKey: string): Promise<Record<string, unknown> | null>;
  /** What the session liveness cases need beyond the store (stores with `capabilities.sessionLiveness`). */
  readonly sessions?: ConformanceSessionHarness;
  /**
   * What the transactional checkpoint cases need beyond the store (stores with
   * `capabilities.transactionalCheckpoint`): an application table to write through the transaction.
   */
  readonly transactions?: ConformanceTransactionHarness;
}

/** An application's own table, written through a store's transactions and read back committed. */
export interface ConformanceTransactionHarness {
  /** Inserts the row (`applicationName`, `key`) through `transaction`, the handle the store gave `work`. */
  write(transaction: unknown, applicationName: string, key: string): Promise<void>;
  /** The keys of `applicationName`'s committed rows, sorted. */
  read(applicationName: string): Promise<string[]>;
  /**
   * Whether another worker's lease writes go on while a transaction holds uncommitted writes
   * (PostgreSQL, MySQL/MariaDB); false where the database has one writer at a time (SQLite).
   */
  readonly concurrentWriters: boolean;
}

/** How the suite ends worker sessions from outside the store, as a dying process or a database would. */
export interface ConformanceSessionHarness {
  /**
   * Ends, from another connection, the database session that holds `workerId`'s session lock in
   * `applicationName` — what an administrator (PostgreSQL `pg_terminate_backend`, MySQL `KILL`) or a
   * failing server does. Resolves once the database was told; the session may take a moment to end.
   */
  killSession(applicationName: string, workerId: string): Promise<void>;
  /**
   * How to start a separate Node process that attaches `workerId`'s session in `applicationName` on
   * this harness's database, writes the line `attached` to its standard output and then waits until it
   * is killed. Absent where sessions live inside the test's own process (the memory store).
   */
  holderProcess?(applicationName: string, workerId: string): ConformanceHolderCommand;
}

export interface ConformanceHolderCommand {
  readonly command: string;
  readonly args: readonly string[];
  readonly cwd?: string;
}

/** Assertions the cases need; the vitest binding passes ones built on the running test's `expect`. */
export interface ConformanceAssert {
  equal(actual: unknown, expected: unknown, message?: string): void;
  ok(value: unknown, message?: string): void;
}

/** Everything one case works with: it holds no state of its own between cases. */
export interface ConformanceContext {
  /** A store on a fresh application name, schema ensured. */
  readonly store: LeaseStore;
  readonly applicationName: string;
  readonly harness: ConformanceHarness;
  /** The running test's assertions. */
  readonly assert: ConformanceAssert;
  /** Lease writes that must win or lose, and reads that must match, on top of `assert`. */
  readonly check: LeaseChecks;
  /** Another fresh application on the same table (schema ensured). */
  otherStore(applicationName?: string): Promise<LeaseStore>;
  /** A fresh, unique application name. */
  freshApplicationName(prefix?: string): string;
  /** Ends the case as skipped, visibly, with the reason (a capability the store does not have). */
  skip(reason: string): never;
  /** Reports a measurement or an observation in the test output. */
  note(message: string): void;
}

export interface ConformanceCase {
  readonly group: string;
  readonly name: string;
  readonly run: (context: ConformanceContext) => Promise<void>;
}

/** The cases of one group, in the order written: case name → what it does. */
export function caseGroup(
  group: string,
  cases: Readonly<Record<string, ConformanceCase['run']>>,
): readonly ConformanceCase[] {
  return Object.entries(cases).map(([name, run]) => ({ group, name, run }));
}
