import type { LeaseStore } from '@kcl/core';
import type { LeaseStoreOperation } from '@kcl/testkit';

const ROLES = ['leases', 'workers', 'admin'] as const;

/**
 * The store with every call of its three roles passed through `intercept`, named `role.method` (as
 * the testkit's faulty store names them): the test decides whether and when `call` runs, and what
 * the caller gets.
 */
export function intercepted(
  store: LeaseStore,
  intercept: (operation: LeaseStoreOperation, call: () => Promise<unknown>) => Promise<unknown>,
): LeaseStore {
  const wrapped: Record<string, unknown> = { ...store };
  for (const role of ROLES) {
    wrapped[role] = new Proxy(store[role], {
      get(target, property, receiver) {
        const value = Reflect.get(target, property, receiver);
        if (typeof value !== 'function' || typeof property !== 'string') return value;
        return (...args: unknown[]) =>
          intercept(`${role}.${property}` as LeaseStoreOperation, () =>
            Promise.resolve((value as (...values: unknown[]) => unknown).apply(target, args)),
          );
      },
    });
  }
  return wrapped as unknown as LeaseStore;
}
