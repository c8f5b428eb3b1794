import type { Lease, LeaseStore } from '@kcl/core';
import { interceptLeaseStore } from '@kcl/core';
import type { MemoryLeaseTable } from '@kcl/testkit';
import type { FreezableClock } from './simulation-clock.js';

/** Calls every change of an application's stored leases makes, with the row before and after. */
export function observeLeaseTable(
  table: MemoryLeaseTable,
  applicationName: string,
  onChange: (before: Lease | undefined, after: Lease | undefined) => void,
): void {
  const leases = table.application(applicationName).leases;
  const set = leases.set.bind(leases);
  const remove = leases.delete.bind(leases);
  leases.set = (key: string, lease: Lease) => {
    const before = leases.get(key);
    set(key, lease);
    onChange(before, lease);
    return leases;
  };
  leases.delete = (key: string) => {
    const before = leases.get(key);
    const deleted = remove(key);
    if (before !== undefined) onChange(before, undefined);
    return deleted;
  };
}

/**
 * A store as one simulated process sees it: once the process crashed (its clock frozen), its calls
 * never answer — a call already on its way may still apply, as over a network.
 */
export function processLeaseStore(inner: LeaseStore, clock: FreezableClock): LeaseStore {
  const hang = new Promise<never>(() => {});
  return interceptLeaseStore(inner, async (_operation, options, call) => {
    if (clock.frozen) return hang;
    const result = await call(options);
    if (clock.frozen) return hang;
    return result;
  });
}
