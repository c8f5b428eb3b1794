export type { CliIo } from './cli/cli-io.js';
export type { ExitCode } from './cli/exit-codes.js';
export { EXIT_CODES } from './cli/exit-codes.js';
export { OperationRefusedError } from './cli/operation-refused-error.js';
export type {
  DashboardOptions,
  DashboardSample,
  DashboardState,
  RetiredShard,
  RunningDashboard,
} from './dashboard/dashboard-server.js';
export { startDashboard } from './dashboard/dashboard-server.js';
export type { LeaseEvent, LeaseEventKind, WorkerLiveness } from './dashboard/lease-events.js';
export { diffLeaseEvents } from './dashboard/lease-events.js';
export { runKcl } from './kcl.js';
export type { ReleaseOutcome, ResetOutcome } from './operations/reset-leases.js';
export { RESET_OWNER, releaseLeaseOf, resetLease } from './operations/reset-leases.js';
export type { PlannedReset, ResetPlan, ResetTarget } from './operations/reset-plan.js';
export { checkpointOfTarget, parseResetTarget, planReset } from './operations/reset-plan.js';
export type {
  ApplicationStatus,
  ProblemKind,
  ShardState,
  ShardStatus,
  StatusInput,
  StatusProblem,
  WorkerStatus,
} from './status/application-status.js';
export { applicationStatus, CLOCK_SKEW_ALLOWANCE_MS } from './status/application-status.js';
export type { ReadStatusOptions } from './status/read-application-status.js';
export { DEFAULT_WORKER_EXPIRY_MS, readApplicationStatus } from './status/read-application-status.js';
export type { StreamPresence } from './status/stream-presence.js';
export {
  checkStreamPresence,
  STREAM_PRESENCE_MAX_AGE_MS,
  StreamPresenceCache,
} from './status/stream-presence.js';
