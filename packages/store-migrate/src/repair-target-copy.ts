import type { Clock, Lease, LeaseStore } from '@kcl/core';
import { leaseFromInit, leasesEqual } from '@kcl/core';
import { REPAIR_OWNER } from './migration-phase.js';
import { exactCopyOf } from './plan-lease-copy.js';

/**
 * What bringing a target copy in line with a source row did:
 * - `in-sync`: it already was an exact copy;
 * - `created`, `repaired`: it is one now;
 * - `ahead`: the copy is at a later counter than the given source state (a newer write was mirrored
 *   meanwhile); it is left alone, so a copy never goes backwards;
 * - `locked`: another repair is replacing it right now;
 * - `raced`: something wrote the copy between the read and the replacement; the next write repairs it.
 */
export type CopyRepair = 'in-sync' | 'created' | 'repaired' | 'ahead' | 'locked' | 'raced';

/**
 * Remembers repair locks seen on copies, so a lock left by a repair that died half-way (a worker killed
 * between taking the lock and writing the copy) is broken once the copy has been seen locked for
 * `expiryMs` on this process's monotonic clock. Not by its counter: mirrored writes whose counter
 * matches keep moving a dead lock along, but a live repair replaces its lock within moments.
 */
export interface RepairLockWatch {
  isStale(lease: Lease): boolean;
  forget(leaseKey: string): void;
}

export function createRepairLockWatch(clock: Clock, expiryMs: number): RepairLockWatch {
  const lockedSince = new Map<string, number>();
  return {
    isStale(lease) {
      const now = clock.monotonicNow();
      const since = lockedSince.get(lease.leaseKey);
      if (since === undefined) {
        lockedSince.set(lease.leaseKey, now);
        return false;
      }
      return now - since >= expiryMs;
    },
    forget(leaseKey) {
      lockedSince.delete(leaseKey);
    },
  };
}

export interface RepairTargetCopyOptions {
  /** The target row if the caller has just read it (null: absent); read here otherwise. */
  readonly current?: Lease | null;
  /**
   * Replace a copy whose counter is above the source's. Only for a caller that read the copy *before*
   * the source: a copy on the source's history is then at most the source's counter, so a higher one
   * is left over from something else (an aborted migration, an earlier one in the other direction).
   */
  readonly replaceAhead?: boolean;
  readonly locks?: RepairLockWatch;
}

/**
 * Makes the target row of an unmoved lease an exact copy of `source` (a source row as just read or
 * written), moving it only forwards. Only for the `mirroring` phase, when no target row is
 * authoritative: the cut-over waits until every worker has left that phase before it moves a lease,
 * so a repair never meets a moved lease.
 *
 * A replacement is a delete and a create, which the LeaseStore contract cannot make conditional. So
 * the copy is first taken with the owner `REPAIR_OWNER`, conditional on the counter just read: if
 * anything wrote it since (a mirrored write, another repair), the take fails and this repair gives
 * way. A copy under repair is left to its repairer.
 */
export async function repairTargetCopy(
  to: LeaseStore,
  source: Lease,
  options: RepairTargetCopyOptions = {},
): Promise<CopyRepair> {
  const wanted = exactCopyOf(source);
  const current = options.current === undefined ? await to.leases.get(source.leaseKey) : options.current;
  if (current === null) return (await to.leases.create(wanted)).ok ? 'created' : 'raced';
  if (current.owner !== REPAIR_OWNER) options.locks?.forget(source.leaseKey);
  if (leasesEqual(current, leaseFromInit(wanted))) return 'in-sync';
  if (current.owner === REPAIR_OWNER && options.locks?.isStale(current) !== true) return 'locked';
  if (current.leaseCounter > source.leaseCounter && options.replaceAhead !== true) return 'ahead';
  const lock = await to.leases.take(source.leaseKey, current.leaseCounter, REPAIR_OWNER);
  if (!lock.ok) return 'raced';
  options.locks?.forget(source.leaseKey);
  await to.leases.delete(source.leaseKey);
  return (await to.leases.create(wanted)).ok ? 'repaired' : 'raced';
}
