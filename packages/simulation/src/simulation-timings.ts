/** Worker timings: short, so a run covers many renewals, rebalances and expiries. */
export const SIMULATION_TIMINGS = {
  leaseRenewIntervalMs: 1_000,
  leaseExpiryMs: 3_000,
  rebalanceIntervalMs: 1_000,
  pollIntervalMs: 200,
  parentPollIntervalMs: 500,
  shardSyncIntervalMs: 3_000,
  leaseCleanupIntervalMs: 3_000,
  shutdownTimeoutMs: 4_000,
  storeCallTimeoutMs: 1_000,
  kinesisCallTimeoutMs: 2_000,
  processingRetry: { initialMs: 50, maxMs: 400 },
  kinesisRetry: { initialMs: 50, maxMs: 1_000 },
} as const;
