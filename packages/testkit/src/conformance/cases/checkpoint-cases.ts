import { ExtendedSequenceNumber, hashKeyRange } from '@kcl/core';
import { LONG_SEQUENCE, sequence, shardId } from '../case-fixtures.js';
import { caseGroup } from '../conformance-case.js';
import { leaseSnapshot } from '../lease-snapshot.js';

/** Checkpoints: sentinels, sub-sequence numbers, long sequence numbers, pending checkpoints. */
export const checkpointCases = caseGroup('checkpoint', {
  'a checkpoint is stored, resets owner switches and keeps owner and lineage': async ({
    store,
    assert,
    check,
  }) => {
    const lease = await check.create(store, {
      leaseKey: shardId(4),
      parentShardIds: [shardId(1)],
      hashKeyRange: hashKeyRange(0n, 99n),
    });
    const first = check.ok(await store.leases.take(shardId(4), lease.leaseCounter, 'worker-a'), 'take');
    const held = check.ok(await store.leases.take(shardId(4), first.leaseCounter, 'worker-b'), 'steal');
    assert.equal(held.ownerSwitchesSinceCheckpoint, 1);
    const checkpointed = check.ok(
      await store.leases.checkpoint(shardId(4), held.leaseCounter, { checkpoint: sequence('1234') }),
      'checkpoint',
    );
    assert.equal(leaseSnapshot(checkpointed), {
      ...leaseSnapshot(held),
      checkpoint: '1234',
      ownerSwitchesSinceCheckpoint: 0,
      leaseCounter: held.leaseCounter + 1,
    });
    await check.stored(store, checkpointed);
  },
  'every sentinel round-trips': async ({ store, assert, check }) => {
    let lease = await check.createTaken(store, shardId(1));
    for (const sentinel of ['TRIM_HORIZON', 'LATEST', 'AT_TIMESTAMP', 'SHARD_END'] as const) {
      lease = check.ok(
        await store.leases.checkpoint(shardId(1), lease.leaseCounter, {
          checkpoint: ExtendedSequenceNumber[sentinel],
        }),
        sentinel,
      );
      const stored = await store.leases.get(shardId(1));
      assert.equal(stored?.checkpoint.sentinel, sentinel, `${sentinel} read back`);
      assert.equal(stored?.checkpoint.subSequenceNumber, 0, `${sentinel} sub-sequence`);
    }
    for (const sentinel of ['TRIM_HORIZON', 'LATEST', 'AT_TIMESTAMP', 'SHARD_END'] as const) {
      const leaseKey = `created-${sentinel}`;
      await check.create(store, { leaseKey, checkpoint: ExtendedSequenceNumber[sentinel] });
      assert.equal(
        (await store.leases.get(leaseKey))?.checkpoint.sentinel,
        sentinel,
        `created at ${sentinel}`,
      );
    }
  },
  'sub-sequence numbers round-trip': async ({ store, assert, check }) => {
    let lease = await check.createTaken(store, shardId(1));
    for (const sub of [0, 1, 17, 2_147_483_647, 9_007_199_254_740_991]) {
      lease = check.ok(
        await store.leases.checkpoint(shardId(1), lease.leaseCounter, { checkpoint: sequence('500', sub) }),
        `sub ${sub}`,
      );
      const stored = await store.leases.get(shardId(1));
      assert.equal(stored?.checkpoint.subSequenceNumber, sub, `sub-sequence ${sub}`);
      assert.equal(stored?.checkpoint.sequenceNumber, '500');
    }
  },
  '56-digit and longer sequence numbers are stored exactly': async ({ store, assert, check }) => {
    let lease = await check.createTaken(store, shardId(1));
    const values = [
      LONG_SEQUENCE,
      `${LONG_SEQUENCE.slice(0, -1)}9`,
      '9'.repeat(80),
      '18446744073709551616', // 2^64
      '0',
    ];
    for (const value of values) {
      lease = check.ok(
        await store.leases.checkpoint(shardId(1), lease.leaseCounter, { checkpoint: sequence(value, 1) }),
        value,
      );
      assert.equal((await store.leases.get(shardId(1)))?.checkpoint.sequenceNumber, value, `stored ${value}`);
    }
  },
  'a pending checkpoint is stored beside the checkpoint and cleared': async ({ store, assert, check }) => {
    let lease = await check.createTaken(store, shardId(1));
    lease = check.ok(
      await store.leases.checkpoint(shardId(1), lease.leaseCounter, {
        checkpoint: sequence('100'),
        pendingCheckpoint: sequence(LONG_SEQUENCE, 4),
      }),
      'prepare',
    );
    let stored = await store.leases.get(shardId(1));
    assert.equal(stored?.pendingCheckpoint?.toString(), `${LONG_SEQUENCE}/4`, 'pending stored');
    assert.equal(stored?.checkpoint.toString(), '100', 'checkpoint kept');
    lease = check.ok(
      await store.leases.checkpoint(shardId(1), lease.leaseCounter, {
        checkpoint: sequence(LONG_SEQUENCE, 4),
        pendingCheckpoint: null,
      }),
      'commit',
    );
    stored = await store.leases.get(shardId(1));
    assert.equal(stored?.pendingCheckpoint ?? null, null, 'pending cleared by null');
    lease = check.ok(
      await store.leases.checkpoint(shardId(1), lease.leaseCounter, {
        checkpoint: sequence('1'),
        pendingCheckpoint: sequence('2'),
      }),
      'prepare again',
    );
    check.ok(
      await store.leases.checkpoint(shardId(1), lease.leaseCounter, { checkpoint: sequence('2') }),
      'commit without field',
    );
    assert.equal(
      (await store.leases.get(shardId(1)))?.pendingCheckpoint ?? null,
      null,
      'pending cleared when absent',
    );
  },
  'SHARD_END is stored and read back as complete': async ({ store, assert, check }) => {
    const held = await check.createTaken(store, shardId(1));
    const ended = check.ok(
      await store.leases.checkpoint(shardId(1), held.leaseCounter, {
        checkpoint: ExtendedSequenceNumber.SHARD_END,
        pendingCheckpoint: null,
      }),
      'SHARD_END',
    );
    const stored = await store.leases.get(shardId(1));
    assert.ok(stored?.checkpoint.isShardEnd, 'stored as SHARD_END');
    assert.equal(leaseSnapshot(stored), leaseSnapshot(ended));
  },
  'a checkpoint with a stale counter or of an absent lease loses': async ({ store, check }) => {
    const held = await check.createTaken(store, shardId(1));
    check.lost(
      await store.leases.checkpoint(shardId(1), held.leaseCounter + 1, { checkpoint: sequence('1') }),
      'counter-mismatch',
      'stale checkpoint',
    );
    check.lost(
      await store.leases.checkpoint(shardId(404), 0, { checkpoint: sequence('1') }),
      'not-found',
      'absent',
    );
    await check.stored(store, held);
  },
});
