import type { Clock, RandomSource } from '@kcl/core';
import type { FaultController } from '@kcl/testkit';
import { type KinesisFaults, NO_KINESIS_FAULTS } from './simulated-kinesis.js';
import { SIMULATION_TIMINGS } from './simulation-timings.js';

/** What a fault needs from the run: its random source (draws stay in schedule order) and story. */
export interface FaultContext {
  readonly random: RandomSource;
  readonly clock: Clock;
  /** The run's store call deadline: slow faults are sized around it. */
  readonly storeCallTimeoutMs: number;
  readonly tell: (line: string) => void;
}

/**
 * Draws one lease-store fault and applies it to `faults` (one worker's store, or every worker's)
 * for `durationMs`: slow renewals that answer after the local expiry, a degraded store, slow calls,
 * an outage, writes that apply but lose their response, hanging calls, failing calls or releases.
 */
export function injectStoreFault(
  faults: FaultController,
  where: string,
  durationMs: number,
  context: FaultContext,
): void {
  const kind = context.random();
  if (kind < 0.1) {
    // Slow renewals, answering just within the call deadline: a renewal sent a renew interval after
    // the last one then answers after the lease has expired locally (renew 1 s, expiry 3 s).
    const { leaseExpiryMs, leaseRenewIntervalMs } = SIMULATION_TIMINGS;
    const latencyMs = Math.min(
      context.storeCallTimeoutMs - 10,
      leaseExpiryMs - leaseRenewIntervalMs + Math.floor(context.random() * leaseRenewIntervalMs),
    );
    faults.setLatency((operation) =>
      operation === 'leases.renewMany' || operation === 'leases.renew' ? latencyMs : 0,
    );
    context.tell(`store: renewals of ${where} take ${latencyMs} ms for ${durationMs} ms`);
    void context.clock.sleep(durationMs).then(() => faults.setLatency(0));
  } else if (kind < 0.2) {
    // A degraded store: slow (some calls past the deadline) and failing now and then.
    const probability = 0.2 + context.random() * 0.4;
    const latencyMs = Math.floor(context.storeCallTimeoutMs * (0.8 + context.random() * 0.6));
    faults.setFailureProbability(probability, context.random);
    faults.setLatency(() => Math.floor(context.random() * latencyMs));
    context.tell(
      `store: degraded for ${where} for ${durationMs} ms (calls up to ${latencyMs} ms, ${Math.round(probability * 100)}% fail)`,
    );
    void context.clock.sleep(durationMs).then(() => faults.restore().setLatency(0));
  } else if (kind < 0.3) {
    const latencyMs = 100 + Math.floor(context.random() * 4_000);
    faults.setLatency(() => Math.floor(context.random() * latencyMs));
    context.tell(`store: calls of ${where} take up to ${latencyMs} ms for ${durationMs} ms`);
    void context.clock.sleep(durationMs).then(() => faults.setLatency(0));
  } else if (kind < 0.45) {
    faults.setUnavailable();
    context.tell(`store: unavailable to ${where} for ${durationMs} ms`);
    void context.clock.sleep(durationMs).then(() => faults.restore());
  } else if (kind < 0.65) {
    const count = 1 + Math.floor(context.random() * 3);
    faults.loseResponseNext(count, [
      'leases.renewMany',
      'leases.renew',
      'leases.checkpoint',
      'leases.checkpointInTransaction',
      'leases.take',
      'leases.release',
    ]);
    context.tell(`store: the next ${count} write(s) of ${where} apply but lose their response`);
  } else if (kind < 0.85) {
    const count = 1 + Math.floor(context.random() * 2);
    const hangMs =
      context.random() < 0.3 ? Number.POSITIVE_INFINITY : 2_000 + Math.floor(context.random() * 6_000);
    faults.hangNext(count, hangMs);
    context.tell(`store: the next ${count} call(s) of ${where} hang for ${hangMs} ms`);
  } else if (kind < 0.92) {
    const count = 1 + Math.floor(context.random() * 4);
    faults.failNext(count);
    context.tell(`store: the next ${count} call(s) of ${where} fail`);
  } else {
    const count = 1 + Math.floor(context.random() * 3);
    faults.failNext(count, { operations: ['leases.release'] });
    context.tell(`store: the next ${count} release(s) of ${where} fail`);
  }
}

/** Draws a set of Kinesis faults (throttling, transient errors, expired iterators, hangs, …). */
export function drawKinesisFaults(random: RandomSource): KinesisFaults {
  return {
    ...NO_KINESIS_FAULTS,
    ...(random() < 0.4 ? { throttle: 0.5 } : {}),
    ...(random() < 0.3 ? { transient: 0.3 } : {}),
    ...(random() < 0.3 ? { expireIterator: 0.3 } : {}),
    ...(random() < 0.2 ? { hang: 0.2 } : {}),
    ...(random() < 0.3 ? { slow: 0.5, slowMs: 500 + Math.floor(random() * 3_000) } : {}),
    ...(random() < 0.4 ? { dropChildShards: 0.7 } : {}),
  };
}
