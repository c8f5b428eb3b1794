import type { LeaseLossReason } from '@kcl/core';
import { describe, expect, it } from 'vitest';
import { type Delivery, MultiStreamFleet, TIMINGS } from './multi-stream-fleet.js';

/**
 * Hand-written schedules of a multi-stream application on simulated time, each meeting the stream list's
 * mechanisms (a stream added, a stream dropped and its leases deleted after `formerStreams.waitMs`) with
 * another at a chosen moment: a batch in flight, a hand-off, a split, a crash. Each checks the promises
 * per stream — every record written before the removal handled, per-key order, one consumer per lease,
 * no two workers inside one lease at once, nothing delivered after a worker noticed its lease was lost,
 * no lease of a dropped stream back after its deletion — and that no worker fails.
 */

/** The `lease-lost` events of every worker for a stream's leases: `worker leaseKey reason`. */
function losses(
  fleet: MultiStreamFleet,
  streamName: string,
): Array<{ workerId: string; reason: LeaseLossReason }> {
  const prefix = `${fleet.scenario.identifier(streamName)}:`;
  return [...fleet.workers.values()].flatMap((worker) =>
    worker.events.flatMap((event) =>
      event.type === 'lease-lost' && event.leaseKey.startsWith(prefix)
        ? [{ workerId: event.workerId, reason: event.reason }]
        : [],
    ),
  );
}

/** Watches for the first deletion of a lease of `streamName` and notes what was going on then. */
function watchDeletion(fleet: MultiStreamFleet, streamName: string) {
  const prefix = `${fleet.scenario.identifier(streamName)}:`;
  const seen: { at: number | null; inFlight: Delivery[]; holders: Map<string, string[]> } = {
    at: null,
    inFlight: [],
    holders: new Map(),
  };
  fleet.scenario.onLeaseChange((before, after) => {
    if (seen.at !== null || after !== undefined || before?.leaseKey.startsWith(prefix) !== true) return;
    seen.at = fleet.now;
    seen.inFlight = fleet.inFlight(streamName).map((delivery) => ({ ...delivery }));
    for (const workerId of fleet.workers.keys()) {
      const held = fleet.held(workerId, streamName);
      if (held.length > 0 && !fleet.crashed(workerId)) seen.holders.set(workerId, held);
    }
  });
  return seen;
}

/**
 * Two workers read orders (1 shard) and payments (2 shards); payments is dropped from the list (while a
 * batch of it is being processed, if its batches are slow) and its leases are deleted 3 s later, under
 * their owners; writing goes on to both. Returns what was going on at the deletion.
 */
async function dropUnderOwners(paymentsBatchMs: number) {
  const fleet = new MultiStreamFleet({
    streams: { orders: 1, payments: 2 },
    listed: ['orders', 'payments'],
    streamSyncIntervalMs: 500,
    waitMs: 3_000,
    batchMs: { orders: 50, payments: paymentsBatchMs },
  });
  let producing = true;
  const produced = fleet.produce(['orders', 'payments'], 4, 100, () => producing);
  fleet.start('W1');
  fleet.start('W2');
  await fleet.scenario.run(4_000);
  expect(await fleet.scenario.runUntil(() => fleet.inFlight('payments').length > 0, 5_000, 10)).toBe(true);
  const removedAt = fleet.now;
  fleet.list = ['orders'];
  const deletion = watchDeletion(fleet, 'payments');
  expect(await fleet.scenario.runUntil(() => fleet.leasesOf('payments').length === 0, 15_000, 10)).toBe(true);
  const deletedAt = deletion.at as number;
  expect(deletedAt - removedAt).toBeGreaterThanOrEqual(3_000);
  expect(deletion.holders.size).toBeGreaterThan(0);

  // Writing goes on: what is written to the dropped stream now is out of scope.
  await fleet.scenario.run(6_000);
  producing = false;
  await fleet.scenario.run(200);
  await produced;
  expect(await fleet.scenario.runUntil(() => fleet.unhandled('orders').length === 0, 20_000)).toBe(true);

  // Every owner noticed and holds nothing of it any more; nothing was delivered after it noticed (the
  // watch's delivered-after-loss) nor later than a lease expiry after the deletion (overlap-window).
  for (const workerId of deletion.holders.keys()) {
    expect(losses(fleet, 'payments').map((loss) => loss.workerId)).toContain(workerId);
    expect(fleet.held(workerId, 'payments')).toEqual([]);
  }
  // Nothing written before the removal was dropped, nor what came during the wait (less two batches).
  expect(fleet.unhandled('payments', deletedAt - 2_000)).toEqual([]);
  // No lease of the dropped stream came back.
  expect(
    fleet.tableChanges('payments').filter((change) => change.kind === 'created' && change.at > deletedAt),
  ).toEqual([]);
  expect(fleet.violations()).toEqual([]);
  expect(fleet.overlaps()).toEqual([]);
  expect(await fleet.stopAll()).toBeLessThanOrEqual(TIMINGS.shutdownTimeoutMs);
  expect(fleet.failures).toEqual([]);
  return { fleet, deletion };
}

describe('multi-stream schedule (a): a stream dropped during a batch, its leases deleted under their owners', () => {
  it('lets the owners finish the batch in flight, refuses its checkpoint, delivers nothing more and keeps reading the other stream', async () => {
    const { fleet, deletion } = await dropUnderOwners(800);
    // The meeting: owners were inside a batch when their leases went; that batch could not checkpoint.
    expect(deletion.inFlight.length).toBeGreaterThan(0);
    for (const delivery of deletion.inFlight) {
      expect(fleet.refusedCheckpoints).toContainEqual(
        expect.objectContaining({ workerId: delivery.workerId, leaseKey: delivery.leaseKey }),
      );
    }
  });

  it('delivers nothing more when the leases go while their owners wait for records', async () => {
    const { deletion } = await dropUnderOwners(20);
    expect(deletion.inFlight).toEqual([]);
  });
});

describe('multi-stream schedule (b): a stream added while a lease is being handed over', () => {
  it('creates the new stream’s leases once and balances all of them, with no record twice and no two workers on a lease', async () => {
    const fleet = new MultiStreamFleet({
      streams: { orders: 4, payments: 2 },
      listed: ['orders'],
      streamSyncIntervalMs: 200,
      waitMs: 60_000,
      batchMs: { orders: 400, payments: 100 },
    });
    let producing = true;
    // Written to payments before it is listed: read from TRIM_HORIZON once it is.
    const produced = fleet.produce(['orders', 'payments'], 6, 100, () => producing);
    fleet.start('W1');
    await fleet.scenario.run(3_000);
    fleet.start('W2');
    const handoffs = (step: string) =>
      fleet.events.flatMap(({ at, event }) =>
        event.type === 'lease-handoff' && event.step === step ? [{ at, leaseKey: event.leaseKey }] : [],
      );
    expect(await fleet.scenario.runUntil(() => handoffs('requested').length > 0, 10_000, 10)).toBe(true);
    const [request] = handoffs('requested');
    fleet.list = ['orders', { streamName: 'payments', initialPosition: 'TRIM_HORIZON' }];

    const balanced = (): boolean => fleet.held('W1').length === 3 && fleet.held('W2').length === 3;
    expect(await fleet.scenario.runUntil(balanced, 20_000, 10)).toBe(true);
    // The meeting: the new stream's leases were created while that hand-off was pending.
    const createdAt = fleet.tableChanges('payments').find((change) => change.kind === 'created')?.at;
    const receivedAt = handoffs('received').find((handoff) => handoff.leaseKey === request?.leaseKey)?.at;
    expect(createdAt).toBeGreaterThan(request?.at ?? 0);
    expect(receivedAt).toBeGreaterThan(createdAt ?? 0);

    await fleet.scenario.run(3_000);
    producing = false;
    await fleet.scenario.run(200);
    await produced;
    expect(
      await fleet.scenario.runUntil(
        () => fleet.unhandled('orders').length === 0 && fleet.unhandled('payments').length === 0,
        20_000,
      ),
    ).toBe(true);
    // Created once each, never deleted; balanced by count across both streams.
    expect(fleet.tableChanges('payments').filter((change) => change.kind !== 'updated')).toHaveLength(2);
    expect(fleet.held('W1')).toHaveLength(3);
    expect(fleet.held('W2')).toHaveLength(3);
    expect(fleet.ledger.duplicates()).toBe(0);
    expect(fleet.violations()).toEqual([]);
    expect(fleet.overlaps()).toEqual([]);
    expect(await fleet.stopAll()).toBeLessThanOrEqual(TIMINGS.shutdownTimeoutMs);
    expect(fleet.failures).toEqual([]);
  });
});

describe('multi-stream schedule (c): a split on one stream while another is dropped', () => {
  it('follows the split into the children and deletes only the dropped stream’s leases, children of a split during its wait included', async () => {
    const fleet = new MultiStreamFleet({
      streams: { orders: 2, payments: 2 },
      listed: ['orders', 'payments'],
      streamSyncIntervalMs: 500,
      waitMs: 4_000,
      batchMs: { orders: 100, payments: 100 },
    });
    let producing = true;
    const produced = fleet.produce(['orders', 'payments'], 8, 100, () => producing);
    fleet.start('W1');
    fleet.start('W2');
    await fleet.scenario.run(4_000);

    const orders = fleet.scenario.streams.get('orders');
    const payments = fleet.scenario.streams.get('payments');
    const [ordersLow, ordersHigh] = orders?.split('shardId-000000000000') ?? [];
    fleet.list = ['orders'];
    const removedAt = fleet.now;
    const deletion = watchDeletion(fleet, 'payments');
    // The dropped stream splits too, during its wait: its children are read until the leases go.
    await fleet.scenario.run(1_000);
    const [paymentsLow] = payments?.split('shardId-000000000001') ?? [];
    const childKey = fleet.leaseKey('payments', paymentsLow?.shardId ?? '');
    expect(await fleet.scenario.runUntil(() => fleet.leasesOf('payments').length === 0, 15_000, 10)).toBe(
      true,
    );
    const deletedAt = deletion.at as number;
    expect(deletedAt - removedAt).toBeGreaterThanOrEqual(4_000);
    // The child of the split during the wait had a lease and was read before the deletion.
    expect(fleet.tableChanges('payments').some((change) => change.leaseKey === childKey)).toBe(true);

    await fleet.scenario.run(3_000);
    producing = false;
    await fleet.scenario.run(200);
    await produced;
    expect(await fleet.scenario.runUntil(() => fleet.unhandled('orders').length === 0, 20_000)).toBe(true);

    // orders: the parent finished, both children have leases that were never deleted.
    const parent = fleet.leasesOf('orders').find((lease) => lease.leaseKey.endsWith('shardId-000000000000'));
    expect(parent === undefined || parent.checkpoint.isShardEnd).toBe(true);
    const ordersKeys = fleet.leasesOf('orders').map((lease) => lease.leaseKey);
    expect(ordersKeys).toEqual(
      expect.arrayContaining([
        fleet.leaseKey('orders', ordersLow?.shardId ?? ''),
        fleet.leaseKey('orders', ordersHigh?.shardId ?? ''),
        fleet.leaseKey('orders', 'shardId-000000000001'),
      ]),
    );
    const deletedOrders = fleet.tableChanges('orders').filter((change) => change.kind === 'deleted');
    expect(deletedOrders.map((change) => change.leaseKey)).toEqual(
      deletedOrders.length === 0 ? [] : [fleet.leaseKey('orders', 'shardId-000000000000')],
    );
    // payments: everything written before the removal handled, and nothing back after the deletion.
    expect(fleet.unhandled('payments', removedAt)).toEqual([]);
    expect(
      fleet.tableChanges('payments').filter((change) => change.kind === 'created' && change.at > deletedAt),
    ).toEqual([]);
    expect(fleet.violations()).toEqual([]);
    expect(fleet.overlaps()).toEqual([]);
    expect(await fleet.stopAll()).toBeLessThanOrEqual(TIMINGS.shutdownTimeoutMs);
    expect(fleet.failures).toEqual([]);
  });
});

describe('multi-stream schedule (d): a worker killed during a dropped stream’s wait', () => {
  it('has the dropped stream read on by the others from the checkpoint, and its leases deleted once the wait is over', async () => {
    const fleet = new MultiStreamFleet({
      streams: { orders: 1, payments: 3 },
      listed: ['orders', 'payments'],
      streamSyncIntervalMs: 500,
      waitMs: 12_000,
      batchMs: { orders: 50, payments: 300 },
    });
    let producing = true;
    const produced = fleet.produce(['orders', 'payments'], 6, 100, () => producing);
    for (const workerId of ['W1', 'W2', 'W3']) fleet.start(workerId);
    await fleet.scenario.run(4_000);

    fleet.list = ['orders'];
    const removedAt = fleet.now;
    const deletion = watchDeletion(fleet, 'payments');
    await fleet.scenario.run(1_000);
    // Killed in the middle of a batch of the dropped stream.
    expect(await fleet.scenario.runUntil(() => fleet.inFlight('payments').length > 0, 5_000, 10)).toBe(true);
    const victim = fleet.inFlight('payments')[0]?.workerId as string;
    const victimLeases = fleet.held(victim, 'payments');
    fleet.crash(victim);
    const killedAt = fleet.now;
    // Its leases expire and the others take them up, from the checkpoint.
    const others = ['W1', 'W2', 'W3'].filter((workerId) => workerId !== victim);
    const takenUp = (): boolean =>
      victimLeases.every((leaseKey) => others.some((workerId) => fleet.held(workerId).includes(leaseKey)));
    expect(await fleet.scenario.runUntil(takenUp, 10_000, 10)).toBe(true);
    // Restarted under its id before the wait is over: it finds leases of a stream it is not told about.
    fleet.start(victim);
    expect(await fleet.scenario.runUntil(() => fleet.leasesOf('payments').length === 0, 30_000, 10)).toBe(
      true,
    );
    const deletedAt = deletion.at as number;
    expect(deletedAt - removedAt).toBeGreaterThanOrEqual(12_000);
    // Deleted by a worker that saw the removal, before the restarted one's own wait was over.
    const deleters = fleet.events.flatMap(({ event }) =>
      event.type === 'lease-deleted' ? [event.workerId] : [],
    );
    expect(deleters.length).toBeGreaterThan(0);
    expect(deleters.every((workerId) => others.includes(workerId))).toBe(true);
    for (const leaseKey of victimLeases) {
      const readOn = fleet.deliveries.some(
        (delivery) =>
          delivery.leaseKey === leaseKey && delivery.start > killedAt && delivery.start < deletedAt,
      );
      expect(readOn).toBe(true);
    }

    await fleet.scenario.run(2_000);
    producing = false;
    await fleet.scenario.run(200);
    await produced;
    expect(await fleet.scenario.runUntil(() => fleet.unhandled('orders').length === 0, 20_000)).toBe(true);
    // Nothing written before the removal was dropped, nor during the wait but its last two seconds.
    expect(fleet.unhandled('payments', deletedAt - 2_000)).toEqual([]);
    expect(
      fleet.tableChanges('payments').filter((change) => change.kind === 'created' && change.at > deletedAt),
    ).toEqual([]);
    expect(fleet.violations()).toEqual([]);
    expect(fleet.overlaps()).toEqual([]);
    expect(await fleet.stopAll()).toBeLessThanOrEqual(TIMINGS.shutdownTimeoutMs);
    expect(fleet.failures).toEqual([]);
  });

  it('starts the wait again in a worker that finds the leases after every worker that saw the removal was killed', async () => {
    const fleet = new MultiStreamFleet({
      streams: { orders: 1, payments: 2 },
      listed: ['orders', 'payments'],
      streamSyncIntervalMs: 500,
      waitMs: 6_000,
      batchMs: { orders: 50, payments: 200 },
    });
    let producing = true;
    const produced = fleet.produce(['orders', 'payments'], 4, 100, () => producing);
    fleet.start('W1');
    fleet.start('W2');
    await fleet.scenario.run(4_000);
    fleet.list = ['orders'];
    const removedAt = fleet.now;
    const deletion = watchDeletion(fleet, 'payments');
    await fleet.scenario.run(4_000);
    // Both are killed two seconds before they would delete; a new worker starts.
    fleet.crash('W1');
    fleet.crash('W2');
    const newcomerAt = fleet.now;
    fleet.start('W3');
    expect(await fleet.scenario.runUntil(() => fleet.leasesOf('payments').length === 0, 30_000, 10)).toBe(
      true,
    );
    const deletedAt = deletion.at as number;
    // Its wait counts from when it found the leases (not from the removal), and it read them until then.
    expect(deletedAt - removedAt).toBeGreaterThanOrEqual(6_000 + (newcomerAt - removedAt));
    expect(
      fleet.deliveries.some((delivery) => delivery.workerId === 'W3' && delivery.stream === 'payments'),
    ).toBe(true);

    await fleet.scenario.run(2_000);
    producing = false;
    await fleet.scenario.run(200);
    await produced;
    expect(await fleet.scenario.runUntil(() => fleet.unhandled('orders').length === 0, 20_000)).toBe(true);
    expect(fleet.held('W3', 'payments')).toEqual([]);
    expect(fleet.unhandled('payments', deletedAt - 2_000)).toEqual([]);
    expect(fleet.violations()).toEqual([]);
    expect(fleet.overlaps()).toEqual([]);
    expect(await fleet.stopAll()).toBeLessThanOrEqual(TIMINGS.shutdownTimeoutMs);
    expect(fleet.failures).toEqual([]);
  });
});
