import type { LeaseHandoff, LeaseStore, LeaseWriteResult } from '@kcl/core';
import { ConfigurationError } from '@kcl/core';
import { sequence, shardId } from '../case-fixtures.js';
import { caseGroup } from '../conformance-case.js';
import { leaseSnapshot } from '../lease-snapshot.js';

const DEADLINE = new Date('2030-01-02T03:04:05.678Z');

/** A hand-off from `from` to `to` with the suite's deadline. */
function handoff(from: string, to: string, deadline: Date | null = DEADLINE): LeaseHandoff {
  return { from, to, deadline };
}

/** What a call that must refuse its input rejected with, or a message saying it did not reject. */
async function rejection(call: () => Promise<unknown>): Promise<unknown> {
  try {
    await call();
  } catch (error) {
    return error;
  }
  return new Error('the call did not reject');
}

/**
 * Cooperative hand-off (contract v2, the Java KCL 3.x graceful lease hand-off): a request that leaves
 * the counter alone, renewals and checkpoints that carry it, the owner's completion, and the fallbacks
 * (take, release) when a side dies or the store fails between the steps.
 */
export const handoffCases = caseGroup('handoff', {
  'requestHandoff records the hand-off and leaves the counter and the owner alone': async ({
    store,
    assert,
    check,
  }) => {
    const held = await check.createTaken(store, shardId(1), 'worker-a');
    const requested = check.ok(
      await store.leases.requestHandoff(shardId(1), held.leaseCounter, handoff('worker-a', 'worker-b')),
      'request',
    );
    assert.equal(leaseSnapshot(requested), {
      ...leaseSnapshot(held),
      handoff: 'worker-a→worker-b@2030-01-02T03:04:05.678Z',
    });
    assert.equal(requested.leaseCounter, held.leaseCounter, 'the counter is unchanged');
    assert.equal(requested.owner, 'worker-a', 'the owner is still the one handing over');
    await check.stored(store, requested);
    assert.equal(
      (await store.leases.get(shardId(1)))?.handoff?.deadline?.getTime(),
      DEADLINE.getTime(),
      'deadline to the millisecond',
    );
    const other = await check.createTaken(store, shardId(2), 'worker-a');
    const withoutDeadline = check.ok(
      await store.leases.requestHandoff(
        shardId(2),
        other.leaseCounter,
        handoff('worker-a', 'worker-c', null),
      ),
      'request without a deadline',
    );
    assert.equal(withoutDeadline.handoff, { from: 'worker-a', to: 'worker-c', deadline: null });
    await check.stored(store, withoutDeadline);
  },
  'renew, renewMany and checkpoint keep a requested hand-off and return it': async ({
    store,
    assert,
    check,
  }) => {
    const held = await check.createTaken(store, shardId(1), 'worker-a');
    const requested = check.ok(
      await store.leases.requestHandoff(shardId(1), held.leaseCounter, handoff('worker-a', 'worker-b')),
      'request',
    );
    const renewed = check.ok(await store.leases.renew(shardId(1), requested.leaseCounter), 'renew');
    assert.equal(leaseSnapshot(renewed), {
      ...leaseSnapshot(requested),
      leaseCounter: requested.leaseCounter + 1,
    });
    const [batch] = await store.leases.renewMany([
      { leaseKey: shardId(1), leaseCounter: renewed.leaseCounter },
    ]);
    const batchRenewed = check.ok(batch as LeaseWriteResult, 'renewMany');
    assert.equal(leaseSnapshot(batchRenewed), {
      ...leaseSnapshot(requested),
      leaseCounter: requested.leaseCounter + 2,
    });
    const checkpointed = check.ok(
      await store.leases.checkpoint(shardId(1), batchRenewed.leaseCounter, { checkpoint: sequence('42') }),
      'checkpoint',
    );
    assert.equal(checkpointed.handoff, requested.handoff, 'a checkpoint keeps it');
    assert.equal(checkpointed.checkpoint.toString(), sequence('42').toString());
    await check.stored(store, checkpointed);
  },
  'completeHandoff gives the lease to the requester, counts the switch and keeps the checkpoint': async ({
    store,
    assert,
    check,
  }) => {
    const held = await check.createTaken(store, shardId(1), 'worker-a');
    const checkpointed = check.ok(
      await store.leases.checkpoint(shardId(1), held.leaseCounter, { checkpoint: sequence('777', 3) }),
      'checkpoint',
    );
    const requested = check.ok(
      await store.leases.requestHandoff(
        shardId(1),
        checkpointed.leaseCounter,
        handoff('worker-a', 'worker-b'),
      ),
      'request',
    );
    const completed = check.ok(
      await store.leases.completeHandoff(shardId(1), requested.leaseCounter),
      'complete',
    );
    assert.equal(leaseSnapshot(completed), {
      ...leaseSnapshot(checkpointed),
      owner: 'worker-b',
      leaseCounter: checkpointed.leaseCounter + 1,
      ownerSwitchesSinceCheckpoint: checkpointed.ownerSwitchesSinceCheckpoint + 1,
      handoff: null,
    });
    await check.stored(store, completed);
    const renewedByB = check.ok(await store.leases.renew(shardId(1), completed.leaseCounter), 'b renews');
    assert.equal(renewedByB.owner, 'worker-b');
  },
  'a take while a hand-off is pending (it timed out) succeeds with the last counter and ends it': async ({
    store,
    assert,
    check,
  }) => {
    for (const [n, taker] of [
      [1, 'worker-b'],
      [2, 'worker-c'],
    ] as const) {
      const held = await check.createTaken(store, shardId(n), 'worker-a');
      const requested = check.ok(
        await store.leases.requestHandoff(shardId(n), held.leaseCounter, handoff('worker-a', 'worker-b')),
        `request ${n}`,
      );
      const taken = check.ok(
        await store.leases.take(shardId(n), requested.leaseCounter, taker),
        `${taker} takes ${n}`,
      );
      assert.equal(leaseSnapshot(taken), {
        ...leaseSnapshot(held),
        owner: taker,
        leaseCounter: held.leaseCounter + 1,
        ownerSwitchesSinceCheckpoint: held.ownerSwitchesSinceCheckpoint + 1,
        handoff: null,
      });
      await check.stored(store, taken);
      // The old owner learns it at its next renewal, as after any steal.
      check.lost(
        await store.leases.renew(shardId(n), requested.leaseCounter),
        'counter-mismatch',
        `a renews ${n}`,
      );
      check.lost(
        await store.leases.completeHandoff(shardId(n), requested.leaseCounter),
        'counter-mismatch',
        `a completes ${n}`,
      );
      await check.stored(store, taken);
    }
  },
  'the old owner dies mid-hand-off: the requester takes the lease with the last counter it saw': async ({
    store,
    assert,
    check,
  }) => {
    const held = await check.createTaken(store, shardId(1), 'worker-a');
    check.ok(
      await store.leases.requestHandoff(shardId(1), held.leaseCounter, handoff('worker-a', 'worker-b')),
      'request',
    );
    // Nobody renews; worker b sees the counter stand still for the expiry time and takes the lease.
    const seen = await store.leases.get(shardId(1));
    assert.equal(seen?.leaseCounter, held.leaseCounter, 'no renewal moved the counter');
    const taken = check.ok(
      await store.leases.take(shardId(1), seen?.leaseCounter ?? -1, 'worker-b'),
      'b takes',
    );
    assert.equal([taken.owner, taken.handoff, taken.leaseCounter], ['worker-b', null, held.leaseCounter + 1]);
    await check.stored(store, taken);
  },
  'the new owner dies after the hand-off: another worker takes the lease with its counter': async ({
    store,
    assert,
    check,
  }) => {
    const held = await check.createTaken(store, shardId(1), 'worker-a');
    const requested = check.ok(
      await store.leases.requestHandoff(shardId(1), held.leaseCounter, handoff('worker-a', 'worker-b')),
      'request',
    );
    const completed = check.ok(
      await store.leases.completeHandoff(shardId(1), requested.leaseCounter),
      'complete',
    );
    assert.equal(completed.owner, 'worker-b');
    // Worker b never renews; worker c takes the expired lease.
    const taken = check.ok(
      await store.leases.take(shardId(1), completed.leaseCounter, 'worker-c'),
      'c takes',
    );
    assert.equal(leaseSnapshot(taken), {
      ...leaseSnapshot(completed),
      owner: 'worker-c',
      leaseCounter: completed.leaseCounter + 1,
      ownerSwitchesSinceCheckpoint: completed.ownerSwitchesSinceCheckpoint + 1,
    });
    await check.stored(store, taken);
  },
  'a completion with a stale counter loses and a retry with the fresh one works; a second completion moves nothing':
    async ({ store, assert, check }) => {
      const held = await check.createTaken(store, shardId(1), 'worker-a');
      const requested = check.ok(
        await store.leases.requestHandoff(shardId(1), held.leaseCounter, handoff('worker-a', 'worker-b')),
        'request',
      );
      // The owner renewed meanwhile (the store failed between the steps, the owner saw the old counter).
      const renewed = check.ok(await store.leases.renew(shardId(1), requested.leaseCounter), 'renew');
      check.lost(
        await store.leases.completeHandoff(shardId(1), requested.leaseCounter),
        'counter-mismatch',
        'complete with the counter before the renewal',
      );
      await check.stored(store, renewed);
      const completed = check.ok(
        await store.leases.completeHandoff(shardId(1), renewed.leaseCounter),
        'retry',
      );
      assert.equal([completed.owner, completed.handoff], ['worker-b', null]);
      check.lost(
        await store.leases.completeHandoff(shardId(1), completed.leaseCounter),
        'handoff-mismatch',
        'complete again with the fresh counter',
      );
      check.lost(
        await store.leases.completeHandoff(shardId(1), renewed.leaseCounter),
        'counter-mismatch',
        'complete again with the same counter',
      );
      await check.stored(store, completed);
      assert.equal(
        completed.ownerSwitchesSinceCheckpoint,
        held.ownerSwitchesSinceCheckpoint + 1,
        'one switch',
      );
    },
  'completeHandoff without a hand-off in progress loses with handoff-mismatch': async ({ store, check }) => {
    const held = await check.createTaken(store, shardId(1), 'worker-a');
    check.lost(
      await store.leases.completeHandoff(shardId(1), held.leaseCounter),
      'handoff-mismatch',
      'complete with no request',
    );
    await check.stored(store, held);
  },
  'two hand-off requests on one counter race: exactly one wins, the other loses with handoff-mismatch':
    async ({ store, assert, check }) => {
      const held = await check.createTaken(store, shardId(1), 'worker-a');
      const results = await Promise.all([
        store.leases.requestHandoff(shardId(1), held.leaseCounter, handoff('worker-a', 'worker-b')),
        store.leases.requestHandoff(shardId(1), held.leaseCounter, handoff('worker-a', 'worker-c')),
      ]);
      const winners = results.flatMap((result) => (result.ok ? [result.lease] : []));
      assert.equal(winners.length, 1, 'one winner');
      assert.equal(
        results.map((result) => (result.ok ? 'ok' : result.reason)).sort(),
        ['handoff-mismatch', 'ok'],
        'the loser: handoff-mismatch',
      );
      const winner = winners[0];
      if (winner === undefined) return;
      assert.equal(winner.leaseCounter, held.leaseCounter);
      await check.stored(store, winner);
      check.lost(
        await store.leases.requestHandoff(shardId(1), held.leaseCounter, handoff('worker-a', 'worker-d')),
        'handoff-mismatch',
        'a third request while one is in progress',
      );
    },
  'requestHandoff of a free lease, naming another owner or with a stale counter loses': async ({
    store,
    check,
  }) => {
    const free = await check.create(store, { leaseKey: shardId(1) });
    check.lost(
      await store.leases.requestHandoff(shardId(1), free.leaseCounter, handoff('worker-a', 'worker-b')),
      'handoff-mismatch',
      'request on a free lease',
    );
    await check.stored(store, free);
    const held = await check.createTaken(store, shardId(2), 'worker-a');
    check.lost(
      await store.leases.requestHandoff(shardId(2), held.leaseCounter, handoff('worker-x', 'worker-b')),
      'handoff-mismatch',
      'request naming another owner',
    );
    check.lost(
      await store.leases.requestHandoff(shardId(2), held.leaseCounter - 1, handoff('worker-a', 'worker-b')),
      'counter-mismatch',
      'request with a stale counter',
    );
    await check.stored(store, held);
  },
  'requestHandoff rejects a hand-off to its own owner and empty names with a ConfigurationError': async ({
    store,
    assert,
    check,
  }) => {
    const held = await check.createTaken(store, shardId(1), 'worker-a');
    const request = (leases: LeaseStore['leases'], given: LeaseHandoff) => () =>
      leases.requestHandoff(shardId(1), held.leaseCounter, given);
    for (const [what, given] of [
      ['from === to', handoff('worker-a', 'worker-a')],
      ['empty from', handoff('', 'worker-b')],
      ['empty to', handoff('worker-a', '')],
    ] as const) {
      const error = await rejection(request(store.leases, given));
      assert.ok(ConfigurationError.is(error), `${what}: a ConfigurationError, got ${String(error)}`);
    }
    await check.stored(store, held);
  },
  'hand-off calls on an absent lease lose with not-found': async ({ store, assert, check }) => {
    check.lost(
      await store.leases.requestHandoff(shardId(404), 0, handoff('worker-a', 'worker-b')),
      'not-found',
      'request absent',
    );
    check.lost(await store.leases.completeHandoff(shardId(404), 0), 'not-found', 'complete absent');
    assert.equal(await store.leases.get(shardId(404)), null, 'neither creates it');
  },
  'release ends a hand-off in progress': async ({ store, assert, check }) => {
    const held = await check.createTaken(store, shardId(1), 'worker-a');
    const requested = check.ok(
      await store.leases.requestHandoff(shardId(1), held.leaseCounter, handoff('worker-a', 'worker-b')),
      'request',
    );
    const released = check.ok(await store.leases.release(shardId(1), requested.leaseCounter), 'release');
    assert.equal(leaseSnapshot(released), {
      ...leaseSnapshot(held),
      owner: null,
      leaseCounter: held.leaseCounter + 1,
    });
    await check.stored(store, released);
    check.lost(
      await store.leases.completeHandoff(shardId(1), released.leaseCounter),
      'handoff-mismatch',
      'complete after the release',
    );
    const taken = check.ok(await store.leases.take(shardId(1), released.leaseCounter, 'worker-b'), 'b takes');
    assert.equal([taken.owner, taken.handoff], ['worker-b', null]);
  },
});
