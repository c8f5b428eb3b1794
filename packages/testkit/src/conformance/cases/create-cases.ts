import { ExtendedSequenceNumber, hashKeyRange, MAX_HASH_KEY } from '@kcl/core';
import { LONG_SEQUENCE, sequence, shardId } from '../case-fixtures.js';
import { caseGroup } from '../conformance-case.js';
import { leaseSnapshot } from '../lease-snapshot.js';

/** Creating leases: fields, duplicates, races. */
export const createCases = caseGroup('create', {
  'creates a free lease with counter 0 and empty lineage': async ({ store, assert, check }) => {
    const result = await store.leases.create({
      leaseKey: shardId(1),
      checkpoint: ExtendedSequenceNumber.LATEST,
    });
    const lease = check.ok(result, 'create');
    assert.equal(leaseSnapshot(lease), {
      leaseKey: shardId(1),
      owner: null,
      leaseCounter: 0,
      checkpoint: 'LATEST',
      pendingCheckpoint: null,
      ownerSwitchesSinceCheckpoint: 0,
      parentShardIds: [],
      childShardIds: [],
      hashKeyRange: null,
      streamIdentifier: null,
      handoff: null,
    });
    await check.stored(store, lease);
  },
  'a second create of the same key loses with already-exists and changes nothing': async ({
    store,
    check,
  }) => {
    const first = await check.create(store, { leaseKey: shardId(1), checkpoint: sequence('100') });
    const second = await store.leases.create({
      leaseKey: shardId(1),
      checkpoint: ExtendedSequenceNumber.LATEST,
    });
    check.lost(second, 'already-exists', 'second create');
    await check.stored(store, first);
  },
  'concurrent creates of one key: exactly one wins': async ({ store, assert, check }) => {
    const results = await Promise.all(
      Array.from({ length: 10 }, (_, index) =>
        store.leases.create({ leaseKey: shardId(2), checkpoint: sequence(String(index + 1)) }),
      ),
    );
    const winners = results.filter((result) => result.ok);
    assert.equal(winners.length, 1, 'one winner');
    assert.equal(
      results.filter((result) => !result.ok && result.reason === 'already-exists').length,
      9,
      'nine already-exists',
    );
    const winner = winners[0];
    if (winner?.ok) await check.stored(store, winner.lease);
  },
  'creates a lease with every field set and reads it back exactly': async ({ store, assert, check }) => {
    const lease = await check.create(store, {
      leaseKey: shardId(3),
      checkpoint: sequence(LONG_SEQUENCE, 7),
      pendingCheckpoint: sequence(`${LONG_SEQUENCE.slice(0, -1)}9`, 2),
      parentShardIds: [shardId(1), shardId(0)],
      childShardIds: [shardId(9)],
      hashKeyRange: hashKeyRange(5n, MAX_HASH_KEY),
      owner: 'worker-x',
      leaseCounter: 41,
      ownerSwitchesSinceCheckpoint: 3,
    });
    assert.equal(leaseSnapshot(lease), {
      leaseKey: shardId(3),
      owner: 'worker-x',
      leaseCounter: 41,
      checkpoint: `${LONG_SEQUENCE}/7`,
      pendingCheckpoint: `${LONG_SEQUENCE.slice(0, -1)}9/2`,
      ownerSwitchesSinceCheckpoint: 3,
      parentShardIds: [shardId(0), shardId(1)],
      childShardIds: [shardId(9)],
      hashKeyRange: `5-${MAX_HASH_KEY}`,
      streamIdentifier: null,
      handoff: null,
    });
    await check.stored(store, lease);
  },
});
