export type { LeaseExpiryTrackerOptions, TrackedLease } from './lease-expiry-tracker.js';
export { LeaseExpiryTracker } from './lease-expiry-tracker.js';
export type {
  PlannedLease,
  PlannedTake,
  RebalanceDiagnostics,
  RebalanceInput,
  RebalancePlan,
  TakeReason,
} from './plan-rebalance.js';
export { fairShare, planRebalance } from './plan-rebalance.js';
export { nextRebalanceDelay, REBALANCE_JITTER_FRACTION } from './rebalance-delay.js';
export type { Rebalancer, RebalancerOptions, RebalanceSnapshot } from './rebalancer.js';
export { createRebalancer } from './rebalancer.js';
export type { WorkerLivenessTrackerOptions } from './worker-liveness-tracker.js';
export { WorkerLivenessTracker } from './worker-liveness-tracker.js';
