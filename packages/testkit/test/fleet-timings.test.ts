import { describe, expect, it } from 'vitest';
import { FLEET_TIMINGS } from '../src/index.js';

describe('FLEET_TIMINGS', () => {
  it.each(Object.entries(FLEET_TIMINGS))(
    '%s lets a worker miss a renewal without losing its lease, and retries below the expiry',
    (_name, timing) => {
      expect(2 * timing.leaseRenewIntervalMs).toBeLessThan(timing.leaseExpiryMs);
      expect(timing.processingRetry.initialMs).toBeLessThanOrEqual(timing.processingRetry.maxMs);
      expect(timing.kinesisRetry.initialMs).toBeLessThanOrEqual(timing.kinesisRetry.maxMs);
      expect(timing.kinesisRetry.maxMs).toBeLessThanOrEqual(timing.leaseExpiryMs);
    },
  );
});
