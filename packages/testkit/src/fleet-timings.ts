/** The consumer timings a fleet under test runs with: the fields of `createConsumer`'s options they set. */
export interface FleetTiming {
  readonly leaseRenewIntervalMs: number;
  readonly leaseExpiryMs: number;
  readonly rebalanceIntervalMs: number;
  readonly pollIntervalMs: number;
  readonly parentPollIntervalMs: number;
  readonly shardSyncIntervalMs: number;
  readonly leaseCleanupIntervalMs: number;
  readonly processingRetry: { readonly initialMs: number; readonly maxMs: number };
  readonly kinesisRetry: { readonly initialMs: number; readonly maxMs: number };
}

/**
 * Named consumer timings for fleets in tests, benchmarks and the demo, so that "fast" means the same
 * everywhere: spread one into `createConsumer({ ...FLEET_TIMINGS.fast, … })`. The consumer's own
 * defaults (renew 30 s, expiry 45 s) are the Java KCL's, far too slow to watch a hand-over in a test.
 */
export const FLEET_TIMINGS = {
  /**
   * Workers in one process (the consumer's and store-migrate's fleet tests): expiries and hand-overs
   * within a second.
   */
  fast: {
    leaseRenewIntervalMs: 200,
    leaseExpiryMs: 700,
    rebalanceIntervalMs: 150,
    pollIntervalMs: 50,
    parentPollIntervalMs: 100,
    shardSyncIntervalMs: 1_000,
    leaseCleanupIntervalMs: 500,
    processingRetry: { initialMs: 20, maxMs: 200 },
    kinesisRetry: { initialMs: 20, maxMs: 200 },
  },
  /**
   * Workers as operating-system processes on a shared machine (apps/e2e): a little slower than `fast`,
   * so that a busy machine does not expire a lease its living worker holds.
   */
  processes: {
    leaseRenewIntervalMs: 300,
    leaseExpiryMs: 1_000,
    rebalanceIntervalMs: 400,
    pollIntervalMs: 100,
    parentPollIntervalMs: 200,
    shardSyncIntervalMs: 2_000,
    leaseCleanupIntervalMs: 1_000,
    processingRetry: { initialMs: 50, maxMs: 500 },
    kinesisRetry: { initialMs: 50, maxMs: 1_000 },
  },
  /**
   * On a human scale (the demo, and bench/failover's `fast` profile): a failover shows within
   * seconds, slowly enough to watch it.
   */
  demo: {
    leaseRenewIntervalMs: 1_000,
    leaseExpiryMs: 3_000,
    rebalanceIntervalMs: 1_000,
    pollIntervalMs: 200,
    parentPollIntervalMs: 500,
    shardSyncIntervalMs: 10_000,
    leaseCleanupIntervalMs: 2_000,
    processingRetry: { initialMs: 50, maxMs: 500 },
    kinesisRetry: { initialMs: 50, maxMs: 1_000 },
  },
} as const satisfies Readonly<Record<string, FleetTiming>>;
