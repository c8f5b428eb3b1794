import type { ApplicationStatus } from '../status/application-status.js';

/**
 * The workers taken as live: a recent heartbeat in the registry, and the owners of leases that are not
 * in the registry at all (a Java KCL worker does not register: nothing says it is gone).
 */
export function liveWorkers(status: ApplicationStatus): string[] {
  return [
    ...status.workers.filter((worker) => worker.alive).map((worker) => worker.workerId),
    ...status.unregisteredOwners,
  ];
}
