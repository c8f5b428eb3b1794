import { randomBytes } from 'node:crypto';
import type { LeaseStore } from '@kcl/core';
import { afterAll, beforeAll, describe, type ExpectStatic, it } from 'vitest';
import type {
  ConformanceAssert,
  ConformanceCase,
  ConformanceContext,
  ConformanceHarness,
} from './conformance-case.js';
import { conformanceCases } from './conformance-cases.js';
import { createLeaseChecks } from './lease-checks.js';

export type {
  ConformanceAssert,
  ConformanceCase,
  ConformanceContext,
  ConformanceHarness,
  ConformanceHolderCommand,
  ConformanceSessionHarness,
  ConformanceTransactionHarness,
} from './conformance-case.js';
export { conformanceCases } from './conformance-cases.js';
export type { LeaseChecks } from './lease-checks.js';
export { leaseSnapshot } from './lease-snapshot.js';

export interface LeaseStoreConformanceOptions {
  /** Shown in the test names, e.g. `postgres`. */
  readonly name: string;
  /** Builds the harness once for the file (start a server, create a database). */
  readonly setup: () => Promise<ConformanceHarness>;
  /** Releases what `setup` built. */
  readonly teardown?: (harness: ConformanceHarness) => Promise<void>;
  /**
   * A reason to skip every case (a service that is not available locally). The skip is visible in
   * the test report. Use `checkService` so CI fails instead.
   */
  readonly skip?: string | null;
  /** Run only the cases whose names match (for debugging an adapter). */
  readonly only?: RegExp;
  /**
   * Told what a case measured (how soon a store saw a session end, say), besides the test's own
   * annotation; e.g. `console.info` to see it in any reporter.
   */
  readonly onNote?: (message: string) => void;
}

let counter = 0;

/** A unique application name, so each case works on a fresh namespace of a shared table. */
export function uniqueApplicationName(prefix = 'conformance'): string {
  counter += 1;
  return `${prefix}-${randomBytes(4).toString('hex')}-${counter}`;
}

/**
 * Registers the LeaseStore conformance suite with vitest: every case on a fresh application name,
 * with the running test's own assertions, so cases never depend on each other or on order.
 */
export function describeLeaseStoreConformance(options: LeaseStoreConformanceOptions): void {
  const selected = conformanceCases.filter((testCase) => options.only?.test(testCase.name) ?? true);
  const skip = options.skip ?? null;

  describe(`LeaseStore conformance: ${options.name}`, () => {
    let harness: ConformanceHarness | undefined;

    if (skip === null) {
      beforeAll(async () => {
        harness = await options.setup();
      });
      afterAll(async () => {
        if (harness !== undefined) await options.teardown?.(harness);
      });
    }

    const groups = new Map<string, ConformanceCase[]>();
    for (const testCase of selected) {
      groups.set(testCase.group, [...(groups.get(testCase.group) ?? []), testCase]);
    }
    for (const [group, groupCases] of groups) {
      describe(group, () => {
        for (const testCase of groupCases) {
          const register = skip === null ? it : it.skip;
          register(
            skip === null ? testCase.name : `${testCase.name} (skipped: ${skip})`,
            async ({ expect, skip, annotate }) => {
              if (harness === undefined) throw new Error('conformance harness was not set up');
              const note = (message: string): void => {
                void annotate(message);
                options.onNote?.(`${options.name} / ${group} / ${testCase.name}: ${message}`);
              };
              await testCase.run(await contextFor(harness, assertWith(expect), skip, note));
            },
          );
        }
      });
    }
  });
}

/** The suite's assertions on a test's `expect`. */
function assertWith(expect: ExpectStatic): ConformanceAssert {
  return {
    equal: (actual, expected, message) => expect(actual, message).toEqual(expected),
    ok: (value, message) => expect(value, message).toBeTruthy(),
  };
}

async function contextFor(
  harness: ConformanceHarness,
  assert: ConformanceAssert,
  skip: (reason: string) => never,
  note: (message: string) => void,
): Promise<ConformanceContext> {
  const open = async (applicationName: string): Promise<LeaseStore> => {
    const store = await harness.createStore(applicationName);
    await store.admin.ensureSchema();
    return store;
  };
  const applicationName = uniqueApplicationName();
  const store = await open(applicationName);
  return {
    store,
    applicationName,
    harness,
    assert,
    check: createLeaseChecks(assert),
    otherStore: (name) => open(name ?? uniqueApplicationName('other')),
    freshApplicationName: (prefix) => uniqueApplicationName(prefix),
    skip,
    note,
  };
}
