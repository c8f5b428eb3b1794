import { interceptLeaseStore, LeaseStoreError } from '@kcl/core';
import { createMemoryLeaseStore, MemoryLeaseTable } from '@kcl/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ConsumerOptions } from '../src/index.js';
import { Fleet } from './support/fleet.js';
import {
  createStream,
  indexOf,
  type LocalKinesis,
  putRecords,
  records,
  startLocalKinesis,
  until,
} from './support/kinesis.js';

// Session liveness on the memory store's simulated sessions (the SQL stores' real sessions are covered
// by their conformance suite and by apps/e2e): a worker whose session ends is taken over within a
// liveness check, long before its leases expire.

let kinesis: LocalKinesis;
beforeAll(async () => {
  kinesis = await startLocalKinesis();
});
afterAll(async () => {
  await kinesis?.stop();
});

let streamCounter = 0;
async function newStream(shards: number): Promise<string> {
  streamCounter += 1;
  const name = `liveness-${streamCounter}`;
  await createStream(kinesis.client, name, shards);
  return name;
}

/** Slow expiry, quick liveness checks: a takeover within seconds can only come from the sessions. */
const SLOW_EXPIRY: Partial<ConsumerOptions> = {
  leaseRenewIntervalMs: 2_000,
  leaseExpiryMs: 8_000,
  storeCallTimeoutMs: 1_000,
  rebalanceIntervalMs: 1_000,
  livenessCheckIntervalMs: 100,
};

function sessionFleet(streamName: string, applicationName: string, sessions: boolean) {
  const table = new MemoryLeaseTable();
  const store = createMemoryLeaseStore({ applicationName, table, sessions });
  /** Workers whose attaches fail for now (their database refuses connections, say). */
  const refused = new Set<string>();
  return {
    store,
    refused,
    fleet: new Fleet({
      streamName,
      applicationName,
      newClient: kinesis.newClient,
      store: (workerId) =>
        interceptLeaseStore(
          createMemoryLeaseStore({ applicationName, table, sessions }),
          (operation, options, call) => {
            if (operation === 'workers.attachSession' && refused.has(workerId)) {
              return Promise.reject(
                new LeaseStoreError('memory', 'test: the database refuses connections', { retryable: true }),
              );
            }
            return call(options);
          },
        ),
      overrides: SLOW_EXPIRY,
    }),
  };
}

describe('session liveness (memory store sessions)', () => {
  it('takes a dead worker’s leases within a liveness check, not after their expiry', async () => {
    const streamName = await newStream(2);
    const { fleet } = sessionFleet(streamName, 'dies', true);
    await fleet.add('w1');
    await until(() => fleet.leasesHeldBy('w1').length === 2, 10_000, 'w1 holding both leases');
    await fleet.add('w2');
    await putRecords(kinesis.client, streamName, records('d', 200, 20));
    await until(() => fleet.distinct().size >= 200, 20_000, 'first records');
    // A forced stop drops everything without releasing; its session ends as a dead process's does.
    await fleet.workers.get('w1')?.stop({ graceful: false });
    const killedAt = Date.now();
    await until(() => fleet.leasesHeldBy('w2').length === 2, 10_000, 'w2 holding both leases');
    const takenAfterMs = Date.now() - killedAt;
    // A liveness check (100 ms) and a rebalance woken by it; the expiry is 8 000 ms.
    expect(takenAfterMs).toBeLessThan(2_500);
    await putRecords(kinesis.client, streamName, records('d', 200, 20, 200));
    await until(() => fleet.distinct().size >= 400, 20_000, 'records after the takeover');
    await fleet.stopAll();
    expect(fleet.orderViolations(indexOf)).toBe(0);
  });

  it('waits for the expiry without sessions (the same fleet on a store that has none)', async () => {
    const streamName = await newStream(1);
    const { fleet } = sessionFleet(streamName, 'no-sessions', false);
    await fleet.add('w1');
    await until(() => fleet.leasesHeldBy('w1').length === 1, 10_000, 'w1 holding the lease');
    await fleet.add('w2');
    await fleet.workers.get('w1')?.stop({ graceful: false });
    const killedAt = Date.now();
    await until(() => fleet.leasesHeldBy('w2').length === 1, 20_000, 'w2 holding the lease');
    expect(Date.now() - killedAt).toBeGreaterThanOrEqual(SLOW_EXPIRY.leaseExpiryMs ?? 0);
    await fleet.stopAll();
  });

  it('loses nothing when a live worker’s session is cut: its leases move, it loses them, attaches again and rejoins', async () => {
    const streamName = await newStream(2);
    const { fleet, store, refused } = sessionFleet(streamName, 'blip', true);
    await fleet.add('w1');
    await until(() => fleet.leasesHeldBy('w1').length === 2, 10_000, 'w1 holding both leases');
    await fleet.add('w2');
    await putRecords(kinesis.client, streamName, records('b', 300, 30));
    await until(() => fleet.distinct().size >= 300, 20_000, 'first records');
    // w2 must have seen w1 holding its session before the cut.
    await new Promise((resolve) => setTimeout(resolve, 300));
    const w1Leases = fleet.leasesHeldBy('w1');
    // Cut, and kept from attaching again until w2 has seen it without a session (else w1 may attach
    // again before any check of w2's finds it gone, and nothing moves).
    refused.add('w1');
    expect(store.dropWorkerSession('w1')).toBe(true);
    await until(
      () => w1Leases.every((leaseKey) => fleet.leasesHeldBy('w2').includes(leaseKey)),
      5_000,
      'w2 holding what w1 held',
    );
    refused.delete('w1');
    await putRecords(kinesis.client, streamName, records('b', 300, 30, 300));
    await until(() => fleet.distinct().size >= 600, 20_000, 'records after the cut');
    // w1 attached again and takes its share back (by hand-off) within a few rebalances.
    await until(() => fleet.leasesHeldBy('w1').length === 1, 20_000, 'w1 back in the fleet');
    await putRecords(kinesis.client, streamName, records('b', 100, 30, 600));
    await until(() => fleet.distinct().size >= 700, 20_000, 'records after w1 rejoined');
    await fleet.stopAll();
    expect(fleet.distinct().size).toBe(700);
    expect(fleet.orderViolations(indexOf)).toBe(0);
    // Only what w1 had not checkpointed when its leases moved could be read twice: one batch per lease.
    expect(fleet.duplicates()).toBeLessThanOrEqual(300);
  });
});
