import type { LeaseStore, OptionProblems } from '@kcl/core';
import { ConfigurationError, guardLeaseStore } from '@kcl/core';

/**
 * One side of a migration (`from` or `to`) behind core's guard, the one wrapper every caller of a
 * store uses: it checks the contract version and turns any failure into a kcl error naming the store.
 * Null, with the problems recorded under the side's name, when `value` is no v2 store.
 */
export function guardedStore(check: OptionProblems, side: 'from' | 'to', value: unknown): LeaseStore | null {
  if (typeof value !== 'object' || value === null) {
    check.add(`${side} must be a LeaseStore (specificationVersion v2)`);
    return null;
  }
  try {
    return guardLeaseStore(value as LeaseStore, check.component);
  } catch (error) {
    if (!ConfigurationError.is(error)) throw error;
    for (const problem of error.problems) check.add(problem.replace(/^leaseStore\b/, side));
    return null;
  }
}
