// The lease machinery of the consumer runtime, exactly as the worker uses it, for a fleet without
// Kinesis. @kcl/consumer exports only its public API, so these come from its build output (the bench
// depends on the package, and turbo builds it before the bench is type-checked); nothing here changes
// how they behave.

export { linkSignals } from '../../packages/consumer/dist/abort-link.js';
export type { HandoffOutcome } from '../../packages/consumer/dist/leases/handoff-requests.js';
export { HandoffRequests } from '../../packages/consumer/dist/leases/handoff-requests.js';
export type { HeldLease } from '../../packages/consumer/dist/leases/held-lease.js';
export { cleanUpLeases } from '../../packages/consumer/dist/leases/lease-cleanup.js';
export type { RenewalRound } from '../../packages/consumer/dist/leases/lease-keeper.js';
export { LeaseKeeper } from '../../packages/consumer/dist/leases/lease-keeper.js';
export type { LeasePlanner } from '../../packages/consumer/dist/leases/lease-planner.js';
export { createLeasePlanner } from '../../packages/consumer/dist/leases/lease-planner.js';
export { runRenewalLoop } from '../../packages/consumer/dist/leases/renewal-loop.js';
export { SessionLiveness } from '../../packages/consumer/dist/leases/session-liveness.js';
export { ShardSync } from '../../packages/consumer/dist/leases/shard-sync.js';
export { withStoreDeadlines } from '../../packages/consumer/dist/leases/store-deadlines.js';
