import type { ApplicationStatus } from '../status/application-status.js';

/** The workers that look live: a recent heartbeat in the registry. */
export function liveWorkers(status: ApplicationStatus): string[] {
  return status.workers.filter((worker) => worker.alive).map((worker) => worker.workerId);
}
