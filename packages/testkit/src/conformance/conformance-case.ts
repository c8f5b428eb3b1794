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
