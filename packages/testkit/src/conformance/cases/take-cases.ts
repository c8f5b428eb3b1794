import type { LeaseWriteResult } from '@kcl/core';
import { sequence, shardId } from '../case-fixtures.js';
import { caseGroup } from '../conformance-case.js';
import { leaseSnapshot } from '../lease-snapshot.js';

/** Taking and stealing leases: counters, owner switches, races, stale writers. */
export const takeCases = caseGroup('take', {
  'take of a free lease sets the owner and increments the counter': async ({ store, assert, check }) => {
    const lease = await check.create(store, { leaseKey: shardId(1), checkpoint: sequence('5') });
    const taken = check.ok(await store.leases.take(shardId(1), lease.leaseCounter, 'worker-a'), 'take');
    assert.equal(leaseSnapshot(taken), {
      ...leaseSnapshot(lease),
      owner: 'worker-a',
      leaseCounter: 1,
    });
    await check.stored(store, taken);
  },
  // As the Java KCL's taker: only a change from another owner is a switch (a new or released lease has
  // no owner to switch from), so a lease that merely changed hands through release reads as settled.
  'taking a free lease does not count an owner switch': async ({ store, assert, check }) => {
    const lease = await check.create(store, { leaseKey: shardId(1) });
    const taken = check.ok(await store.leases.take(shardId(1), lease.leaseCounter, 'worker-a'), 'take new');
    assert.equal(taken.ownerSwitchesSinceCheckpoint, 0, 'a new lease taken: no switch');
    const stolen = check.ok(await store.leases.take(shardId(1), taken.leaseCounter, 'worker-b'), 'steal');
    assert.equal(stolen.ownerSwitchesSinceCheckpoint, 1, 'from another owner: a switch');
    const released = check.ok(await store.leases.release(shardId(1), stolen.leaseCounter), 'release');
    const retaken = check.ok(
      await store.leases.take(shardId(1), released.leaseCounter, 'worker-c'),
      'take released',
    );
    assert.equal(
      retaken.ownerSwitchesSinceCheckpoint,
      1,
      'a released lease taken: the count is kept, not raised',
    );
    await check.stored(store, retaken);
    const withSwitches = await check.create(store, { leaseKey: shardId(2), ownerSwitchesSinceCheckpoint: 4 });
    const takenFree = check.ok(
      await store.leases.take(shardId(2), withSwitches.leaseCounter, 'worker-a'),
      'take free with switches',
    );
    assert.equal(takenFree.ownerSwitchesSinceCheckpoint, 4, 'a free lease with switches keeps its count');
    await check.stored(store, takenFree);
  },
  'take by the current owner does not count an owner switch': async ({ store, assert, check }) => {
    const held = await check.createTaken(store, shardId(1), 'worker-a');
    const again = check.ok(await store.leases.take(shardId(1), held.leaseCounter, 'worker-a'), 'retake');
    assert.equal(again.ownerSwitchesSinceCheckpoint, held.ownerSwitchesSinceCheckpoint);
    assert.equal(again.leaseCounter, held.leaseCounter + 1);
  },
  'take from another owner (a steal) switches the owner': async ({ store, assert, check }) => {
    const held = await check.createTaken(store, shardId(1), 'worker-a');
    const stolen = check.ok(await store.leases.take(shardId(1), held.leaseCounter, 'worker-b'), 'steal');
    assert.equal(stolen.owner, 'worker-b');
    assert.equal(stolen.ownerSwitchesSinceCheckpoint, held.ownerSwitchesSinceCheckpoint + 1);
    await check.stored(store, stolen);
  },
  'take with a stale counter loses with counter-mismatch': async ({ store, check }) => {
    const held = await check.createTaken(store, shardId(1), 'worker-a');
    check.lost(
      await store.leases.take(shardId(1), held.leaseCounter - 1, 'worker-b'),
      'counter-mismatch',
      'stale take',
    );
    await check.stored(store, held);
  },
  'take of an absent lease loses with not-found': async ({ store, assert, check }) => {
    check.lost(await store.leases.take(shardId(404), 0, 'worker-a'), 'not-found', 'take absent');
    assert.equal(await store.leases.get(shardId(404)), null, 'take does not create');
  },
  '20 concurrent takes of one lease: exactly one wins': async ({ store, assert, check }) => {
    const lease = await check.create(store, { leaseKey: shardId(1) });
    const results = await Promise.all(
      Array.from({ length: 20 }, (_, index) =>
        store.leases.take(shardId(1), lease.leaseCounter, `worker-${index}`),
      ),
    );
    const winners = results.flatMap((result, index) => (result.ok ? [index] : []));
    assert.equal(winners.length, 1, 'one winner');
    assert.equal(
      results.filter((result) => !result.ok && result.reason === 'counter-mismatch').length,
      19,
      'nineteen counter-mismatch',
    );
    const stored = await store.leases.get(shardId(1));
    assert.equal(stored?.owner, `worker-${winners[0]}`, 'the winner owns it');
    assert.equal(stored?.leaseCounter, 1, 'counter moved once');
  },
  'a writer holding a stale counter loses every conditional write': async ({ store, check }) => {
    const seenByA = await check.createTaken(store, shardId(1), 'worker-a');
    // Worker b writes in between (takes the lease after it expired, say).
    const byB = check.ok(await store.leases.take(shardId(1), seenByA.leaseCounter, 'worker-b'), 'b takes');
    check.lost(await store.leases.renew(shardId(1), seenByA.leaseCounter), 'counter-mismatch', 'a renews');
    check.lost(
      await store.leases.checkpoint(shardId(1), seenByA.leaseCounter, { checkpoint: sequence('99') }),
      'counter-mismatch',
      'a checkpoints',
    );
    check.lost(
      await store.leases.release(shardId(1), seenByA.leaseCounter),
      'counter-mismatch',
      'a releases',
    );
    check.lost(
      await store.leases.take(shardId(1), seenByA.leaseCounter, 'worker-a'),
      'counter-mismatch',
      'a retakes',
    );
    const [renewA] = await store.leases.renewMany([
      { leaseKey: shardId(1), leaseCounter: seenByA.leaseCounter },
    ]);
    check.lost(renewA as LeaseWriteResult, 'counter-mismatch', 'a batch-renews');
    await check.stored(store, byB);
  },
});
