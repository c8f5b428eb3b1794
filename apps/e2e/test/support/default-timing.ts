import { CONSUMER_DEFAULTS } from '@kcl/consumer';
import type { FleetTiming } from '@kcl/testkit';

/**
 * The consumer's default timings (renew 30 s, expiry 45 s, rebalance 6 s, poll 500 ms), written out as
 * a fleet's timing: the harness passes every timing to its workers.
 */
export const DEFAULT_TIMING: FleetTiming = {
  leaseRenewIntervalMs: CONSUMER_DEFAULTS.leaseRenewIntervalMs,
  leaseExpiryMs: CONSUMER_DEFAULTS.leaseExpiryMs,
  rebalanceIntervalMs: CONSUMER_DEFAULTS.rebalanceIntervalMs,
  pollIntervalMs: CONSUMER_DEFAULTS.pollIntervalMs,
  parentPollIntervalMs: CONSUMER_DEFAULTS.parentPollIntervalMs,
  shardSyncIntervalMs: CONSUMER_DEFAULTS.shardSyncIntervalMs,
  leaseCleanupIntervalMs: CONSUMER_DEFAULTS.leaseCleanupIntervalMs,
  processingRetry: { initialMs: 500, maxMs: 30_000 },
  kinesisRetry: { initialMs: 200, maxMs: 10_000 },
};

/** The consumer's default `livenessCheckIntervalMs`. */
export const DEFAULT_LIVENESS_CHECK_MS = 1_000;

/**
 * When every worker of a fleet has seen a worker that became ready at `readyAt` holding its session:
 * the others learn of it at their next rebalance listing (one rebalance interval, ±25 %) and check it
 * at the liveness check after that. Only a worker seen holding its session is judged by it.
 */
export const seenHoldingSessionBy = (
  readyAt: number,
  timing: Pick<FleetTiming, 'rebalanceIntervalMs'>,
  livenessCheckMs = DEFAULT_LIVENESS_CHECK_MS,
): number => readyAt + timing.rebalanceIntervalMs * 1.25 + 2 * livenessCheckMs;
