import type { KclEvent, Lease, LeaseStore } from '@kcl/core';
import { ExtendedSequenceNumber, noopLogger } from '@kcl/core';
import { createFaultyLeaseStore, createMemoryLeaseStore, ManualClock } from '@kcl/testkit';
import { describe, expect, it } from 'vitest';
import { LeaseKeeper } from './lease-keeper.js';

async function setup(options: { store?: LeaseStore; expiry?: number; clock?: ManualClock } = {}) {
  const clock = options.clock ?? new ManualClock({ monotonic: 1_000 });
  const store = options.store ?? createMemoryLeaseStore({ applicationName: 'keeper' });
  const events: KclEvent[] = [];
  const lost: string[] = [];
  const asked: string[] = [];
  const keeper = new LeaseKeeper({
    store,
    workerId: 'me',
    leaseExpiryMs: options.expiry ?? 10_000,
    clock,
    logger: noopLogger,
    emit: (event) => events.push(event),
    onLost: (held, reason) => lost.push(`${held.leaseKey}:${reason}`),
    onHandoffRequested: (held, handoff) => asked.push(`${held.leaseKey}:${handoff.to}`),
  });
  const take = async (leaseKey: string): Promise<Lease> => {
    const created = await store.leases.create({
      leaseKey,
      checkpoint: ExtendedSequenceNumber.TRIM_HORIZON,
    });
    if (!created.ok) throw new Error('create');
    const taken = await store.leases.take(leaseKey, created.lease.leaseCounter, 'me');
    if (!taken.ok) throw new Error('take');
    return taken.lease;
  };
  return { clock, store, keeper, events, lost, asked, take };
}

describe('LeaseKeeper', () => {
  it('treats a lease as lost the moment its expiry passes without a renewal', async () => {
    const { clock, keeper, take, lost, events } = await setup({ expiry: 10_000 });
    const held = keeper.adopt(await take('a'), clock.monotonicNow());
    await clock.advance(10_000);
    expect(held.isHeld()).toBe(true);
    keeper.expireOverdue();
    expect(lost).toEqual([]);
    await clock.advance(1);
    expect(held.isHeld()).toBe(false);
    keeper.expireOverdue();
    expect(lost).toEqual(['a:expired']);
    expect(held.signal.aborted).toBe(true);
    expect(events).toContainEqual({ type: 'lease-lost', workerId: 'me', leaseKey: 'a', reason: 'expired' });
  });

  it('measures expiry from when the renewal was sent, not when it returned', async () => {
    const clock = new ManualClock({ monotonic: 0 });
    const faulty = createFaultyLeaseStore(createMemoryLeaseStore({ applicationName: 'slow' }), { clock });
    const { keeper, take } = await setup({ store: faulty, expiry: 10_000, clock });
    const held = keeper.adopt(await take('a'), 0);
    faulty.faults.setLatency(4_000);
    await clock.advance(5_000);
    const renewing = keeper.renewAll();
    await clock.advance(4_000);
    expect(await renewing).toEqual({ renewed: 1, lost: 0, failed: 0 });
    // Sent at 5 000: expires after 15 000 even though it returned at 9 000.
    await clock.advance(6_000);
    expect(held.isHeld()).toBe(true);
    await clock.advance(1);
    expect(held.isHeld()).toBe(false);
  });

  it('renews all held leases in one batched call and moves their counters', async () => {
    const { clock, keeper, take, store } = await setup();
    const a = keeper.adopt(await take('a'), clock.monotonicNow());
    const b = keeper.adopt(await take('b'), clock.monotonicNow());
    await clock.advance(5_000);
    expect(await keeper.renewAll()).toEqual({ renewed: 2, lost: 0, failed: 0 });
    expect(a.lease.leaseCounter).toBe(2);
    expect(b.lease.leaseCounter).toBe(2);
    expect((await store.leases.get('a'))?.leaseCounter).toBe(2);
    await clock.advance(9_000);
    expect(a.isHeld()).toBe(true);
  });

  it('declares a lease lost when another worker took it, and refuses its writes', async () => {
    const { clock, keeper, take, store, lost } = await setup();
    const held = keeper.adopt(await take('a'), clock.monotonicNow());
    const stolen = await store.leases.take('a', held.lease.leaseCounter, 'thief');
    expect(stolen.ok).toBe(true);
    expect(await keeper.renewAll()).toEqual({ renewed: 0, lost: 1, failed: 0 });
    expect(lost).toEqual(['a:taken-by-other']);
    const write = await keeper.write(held, 'checkpoint', (lease) =>
      store.leases.checkpoint(lease.leaseKey, lease.leaseCounter, {
        checkpoint: ExtendedSequenceNumber.of('1'),
      }),
    );
    expect(write).toBeNull();
    expect((await store.leases.get('a'))?.owner).toBe('thief');
  });

  it('serialises a checkpoint with a renewal so neither sees the other as a lost race', async () => {
    const { clock, keeper, take, store, lost } = await setup();
    const held = keeper.adopt(await take('a'), clock.monotonicNow());
    const checkpoint = keeper.write(held, 'checkpoint', (lease) =>
      store.leases.checkpoint(lease.leaseKey, lease.leaseCounter, {
        checkpoint: ExtendedSequenceNumber.of('7'),
      }),
    );
    const renewal = keeper.renewAll();
    const [written] = await Promise.all([checkpoint, renewal]);
    expect(written?.ok).toBe(true);
    expect(lost).toEqual([]);
    expect(held.isHeld()).toBe(true);
    const again = await keeper.renewAll();
    expect(again).toEqual({ renewed: 1, lost: 0, failed: 0 });
    expect((await store.leases.get('a'))?.checkpoint.toString()).toBe('7');
  });

  it('recovers a renewal whose first attempt applied although the reply said it lost', async () => {
    const { clock, keeper, take, store } = await setup();
    const held = keeper.adopt(await take('a'), clock.monotonicNow());
    // Simulate a request that applied, then was retried and failed its condition.
    await store.leases.renew('a', held.lease.leaseCounter);
    const result = await keeper.write(held, 'renew', () =>
      Promise.resolve({ ok: false, reason: 'counter-mismatch' }),
    );
    expect(result?.ok).toBe(true);
    expect(held.lease.leaseCounter).toBe(2);
    expect(held.isHeld()).toBe(true);
  });

  it('reconciles with a listing: a lease now owned by someone else is lost at once', async () => {
    const { clock, keeper, take, store, lost } = await setup();
    keeper.adopt(await take('a'), clock.monotonicNow());
    keeper.adopt(await take('b'), clock.monotonicNow());
    const current = await store.leases.get('a');
    await store.leases.take('a', current?.leaseCounter ?? 0, 'other');
    await store.leases.delete('b');
    keeper.reconcile(await store.leases.list());
    expect(lost.sort()).toEqual(['a:taken-by-other', 'b:deleted']);
  });

  it('releases a lease (owner cleared) without reporting it lost', async () => {
    const { clock, keeper, take, store, lost, events } = await setup();
    const held = keeper.adopt(await take('a'), clock.monotonicNow());
    expect(await keeper.release(held)).toBe(true);
    expect((await store.leases.get('a'))?.owner).toBeNull();
    expect(lost).toEqual([]);
    expect(held.signal.aborted).toBe(true);
    expect(events.at(-1)).toEqual({ type: 'lease-released', workerId: 'me', leaseKey: 'a' });
    expect(keeper.held()).toEqual([]);
  });

  it('keeps leases through a store outage shorter than the expiry, and loses them after', async () => {
    const clock = new ManualClock({ monotonic: 0 });
    const faulty = createFaultyLeaseStore(createMemoryLeaseStore({ applicationName: 'outage' }));
    const lost: string[] = [];
    const keeper = new LeaseKeeper({
      store: faulty,
      workerId: 'me',
      leaseExpiryMs: 3_000,
      clock,
      logger: noopLogger,
      emit: () => {},
      onLost: (held, reason) => lost.push(`${held.leaseKey}:${reason}`),
    });
    const created = await faulty.leases.create({
      leaseKey: 'a',
      checkpoint: ExtendedSequenceNumber.LATEST,
    });
    if (!created.ok) throw new Error('create');
    const taken = await faulty.leases.take('a', 0, 'me');
    if (!taken.ok) throw new Error('take');
    const held = keeper.adopt(taken.lease, 0);
    faulty.faults.setUnavailable();
    await clock.advance(1_000);
    await expect(keeper.renewAll()).rejects.toThrow(/unavailable/);
    await clock.advance(1_000);
    await expect(keeper.renewAll()).rejects.toThrow(/unavailable/);
    expect(held.isHeld()).toBe(true);
    await clock.advance(1_001);
    await expect(keeper.renewAll()).resolves.toEqual({ renewed: 0, lost: 0, failed: 0 });
    expect(lost).toEqual(['a:expired']);
  });

  it('declares a lease lost the moment it is found expired, so a renewal that returns late cannot revive it', async () => {
    const clock = new ManualClock({ monotonic: 0 });
    const faulty = createFaultyLeaseStore(createMemoryLeaseStore({ applicationName: 'late' }), { clock });
    const { keeper, take, lost } = await setup({ store: faulty, expiry: 10_000, clock });
    const held = keeper.adopt(await take('a'), 0);
    await clock.advance(5_000);
    faulty.faults.setLatency((operation) => (operation === 'leases.renewMany' ? 7_000 : 0));
    const renewing = keeper.renewAll();
    // The shard consumer checks its lease after the expiry, while the renewal is still on its way.
    await clock.advance(5_001);
    expect(held.isHeld()).toBe(false);
    expect(lost).toEqual(['a:expired']);
    await clock.advance(2_000);
    await renewing;
    // The renewal applied (sent at 5 000, it would have kept the lease until 15 000), but the lease was
    // given up: it stays given up (the worker's rebalance takes it back once its consumer has ended).
    expect(held.isHeld()).toBe(false);
    expect(keeper.held()).toEqual([]);
    expect(keeper.get('a')).toBeUndefined();
  });

  it('declares leases lost at their expiry while a renewal hangs (the expiry watch)', async () => {
    const clock = new ManualClock({ monotonic: 0 });
    const faulty = createFaultyLeaseStore(createMemoryLeaseStore({ applicationName: 'hung' }), { clock });
    const { keeper, take, lost } = await setup({ store: faulty, expiry: 10_000, clock });
    const held = keeper.adopt(await take('a'), 0);
    const stop = new AbortController();
    const watching = keeper.watchExpiry(stop.signal);
    faulty.faults.hangNext(1, Number.POSITIVE_INFINITY, ['leases.renewMany']);
    void keeper.renewAll().catch(() => undefined);
    await clock.advance(10_000);
    expect(lost).toEqual([]);
    await clock.advance(2);
    // Nobody asked: the watch declared it lost on time.
    expect(lost).toEqual(['a:expired']);
    expect(held.signal.aborted).toBe(true);
    stop.abort();
    await watching;
  });

  it('after a renewal whose reply was lost, writes a checkpoint again on the stored counter instead of claiming it', async () => {
    const clock = new ManualClock({ monotonic: 0 });
    const faulty = createFaultyLeaseStore(createMemoryLeaseStore({ applicationName: 'lost-reply' }), {
      clock,
    });
    const { keeper, take, lost } = await setup({ store: faulty, expiry: 10_000, clock });
    const held = keeper.adopt(await take('a'), 0);
    // The renewal applies (the counter moves) but its reply is lost.
    faulty.faults.loseResponseNext(1, ['leases.renewMany']);
    await expect(keeper.renewAll()).rejects.toThrow(/lost response/);
    expect(held.lease.leaseCounter).toBe(1);
    expect((await faulty.leases.get('a'))?.leaseCounter).toBe(2);
    const written = await keeper.write(
      held,
      'checkpoint',
      (lease) =>
        faulty.leases.checkpoint(lease.leaseKey, lease.leaseCounter, {
          checkpoint: ExtendedSequenceNumber.of('42'),
        }),
      {
        reflects: (stored) =>
          stored.owner === 'me' && stored.checkpoint.equals(ExtendedSequenceNumber.of('42')),
      },
    );
    expect(written?.ok).toBe(true);
    // Written for real — not reported as written on the strength of the renewal's counter.
    expect((await faulty.leases.get('a'))?.checkpoint.toString()).toBe('42');
    expect(held.lease.leaseCounter).toBe(3);
    expect(lost).toEqual([]);
    expect(held.isHeld()).toBe(true);
  });

  it('keeps a lease whose own renewal failed in a batch, and counts it as failed, not lost', async () => {
    const store = createMemoryLeaseStore({ applicationName: 'partial' });
    const partial: LeaseStore = {
      ...store,
      leases: {
        ...store.leases,
        renewMany: async (renewals) => {
          const results = await store.leases.renewMany(renewals.slice(1));
          return [{ ok: false, reason: 'failed', error: new Error('throttled') }, ...results];
        },
      },
    };
    const { clock, keeper, take, lost } = await setup({ store: partial });
    const a = keeper.adopt(await take('a'), clock.monotonicNow());
    const b = keeper.adopt(await take('b'), clock.monotonicNow());
    expect(await keeper.renewAll()).toEqual({ renewed: 1, lost: 0, failed: 1 });
    expect(a.isHeld()).toBe(true);
    expect(b.lease.leaseCounter).toBe(2);
    expect(lost).toEqual([]);
  });

  describe('hand-offs', () => {
    const handoff = { from: 'me', to: 'other', deadline: null };

    it('announces a hand-off a renewal brings back, once, and completes it to the requester', async () => {
      const { clock, keeper, take, store, asked, events, lost } = await setup();
      const held = keeper.adopt(await take('a'), clock.monotonicNow());
      expect((await store.leases.requestHandoff('a', held.lease.leaseCounter, handoff)).ok).toBe(true);
      expect(keeper.handoffOf(held)).toBeNull();
      await keeper.renewAll();
      await keeper.renewAll();
      expect(asked).toEqual(['a:other']);
      expect(keeper.handoffOf(held)).toMatchObject({ from: 'me', to: 'other' });
      // The renewals moved the counter: the completion goes on the keeper's own, current one.
      expect(await keeper.completeHandoff(held, clock.monotonicNow() + 1_000)).toBe(true);
      expect(await store.leases.get('a')).toMatchObject({ owner: 'other', handoff: null, leaseCounter: 4 });
      expect(held.isHeld()).toBe(false);
      expect(held.signal.aborted).toBe(true);
      expect(lost).toEqual([]);
      expect(events).toContainEqual({
        type: 'lease-handoff',
        workerId: 'me',
        leaseKey: 'a',
        from: 'me',
        to: 'other',
        step: 'completed',
      });
    });

    it('sees a hand-off in a listing, but not one a listing from before this incarnation shows', async () => {
      const { clock, keeper, take, store, asked } = await setup();
      const first = await take('a');
      await store.leases.requestHandoff('a', first.leaseCounter, handoff);
      const before = await store.leases.list();
      // Taken again (which clears the request): the old listing belongs to the earlier incarnation.
      const retaken = await store.leases.take('a', first.leaseCounter, 'me');
      if (!retaken.ok) throw new Error('take');
      const held = keeper.adopt(retaken.lease, clock.monotonicNow());
      keeper.reconcile(before);
      expect(asked).toEqual([]);
      await store.leases.requestHandoff('a', held.lease.leaseCounter, handoff);
      keeper.reconcile(await store.leases.list());
      expect(asked).toEqual(['a:other']);
      expect(held.isHeld()).toBe(true);
    });

    // (A steal by the requester itself at the same counter leaves the lease exactly as the completion
    // would — its owner, no hand-off, the counter one on — and counts as handed over.)
    it('ends as lost when another worker took the lease before the hand-off completed', async () => {
      const { clock, keeper, take, store, lost, events } = await setup();
      const held = keeper.adopt(await take('a'), clock.monotonicNow());
      await store.leases.requestHandoff('a', held.lease.leaseCounter, handoff);
      await keeper.renewAll();
      const current = await store.leases.get('a');
      await store.leases.take('a', current?.leaseCounter ?? 0, 'third');
      expect(await keeper.completeHandoff(held, clock.monotonicNow() + 1_000)).toBe(false);
      expect(lost).toEqual(['a:taken-by-other']);
      expect(events.some((event) => event.type === 'lease-handoff')).toBe(false);
    });

    it('retries a completion that failed without an answer, on the stored counter', async () => {
      const clock = new ManualClock({ monotonic: 0 });
      const faulty = createFaultyLeaseStore(createMemoryLeaseStore({ applicationName: 'handoff' }), {
        clock,
      });
      const { keeper, take, asked } = await setup({ store: faulty, clock });
      const held = keeper.adopt(await take('a'), 0);
      await faulty.leases.requestHandoff('a', held.lease.leaseCounter, handoff);
      await keeper.renewAll();
      expect(asked).toEqual(['a:other']);
      // The first attempt applies but its answer is lost; the retry finds it applied.
      faulty.faults.loseResponseNext(1, ['leases.completeHandoff']);
      const completing = keeper.completeHandoff(held, 5_000);
      await clock.advance(100);
      expect(await completing).toBe(true);
      expect(await faulty.leases.get('a')).toMatchObject({ owner: 'other', handoff: null });
    });

    it('gives a completion that keeps failing up at the deadline, without writing', async () => {
      const clock = new ManualClock({ monotonic: 0 });
      const faulty = createFaultyLeaseStore(createMemoryLeaseStore({ applicationName: 'handoff' }), {
        clock,
      });
      const { keeper, take, lost } = await setup({ store: faulty, clock });
      const held = keeper.adopt(await take('a'), 0);
      await faulty.leases.requestHandoff('a', held.lease.leaseCounter, handoff);
      await keeper.renewAll();
      faulty.faults.failNext(100, { operations: ['leases.completeHandoff'] });
      const completing = keeper.completeHandoff(held, 1_000);
      await clock.advance(2_000);
      expect(await completing).toBe(false);
      expect(held.isHeld()).toBe(false);
      expect(lost).toEqual([]);
      // Still the owner's in the store, with the request: the requester's timeout steals it.
      expect(await faulty.leases.get('a')).toMatchObject({ owner: 'me', handoff: { to: 'other' } });
    });
  });
});
