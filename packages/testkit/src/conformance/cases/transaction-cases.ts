import type {
  LeaseRepository,
  LeaseStore,
  StoreCallOptions,
  TransactionalCheckpointResult,
  TransactionalCheckpointWork,
} from '@kcl/core';
import { ExtendedSequenceNumber } from '@kcl/core';
import { sequence, shardId } from '../case-fixtures.js';
import type { ConformanceContext, ConformanceTransactionHarness } from '../conformance-case.js';
import { caseGroup } from '../conformance-case.js';
import { leaseSnapshot } from '../lease-snapshot.js';

/** How long a write of another lease may take while a transaction is open: it must not wait for it. */
const UNBLOCKED_LIMIT_MS = 2_000;

type CheckpointInTransaction = <T>(
  leaseKey: string,
  leaseCounter: number,
  work: TransactionalCheckpointWork<T>,
  options?: StoreCallOptions,
) => Promise<TransactionalCheckpointResult<T>>;

/** The store's transactional checkpoint and the harness's table; skips the case without them. */
function transactional(context: ConformanceContext): {
  readonly checkpointInTransaction: CheckpointInTransaction;
  readonly table: ConformanceTransactionHarness;
} {
  const { store, harness, skip } = context;
  if (store.capabilities.transactionalCheckpoint !== true) {
    skip('the store cannot checkpoint in a transaction (capabilities.transactionalCheckpoint is not set)');
  }
  const leases = store.leases as Required<LeaseRepository>;
  if (typeof leases.checkpointInTransaction !== 'function') {
    throw new Error(`${store.description} declares transactionalCheckpoint without checkpointInTransaction`);
  }
  if (harness.transactions === undefined) {
    throw new Error('the harness offers no transactions table for a store with transactionalCheckpoint');
  }
  return {
    checkpointInTransaction: (leaseKey, leaseCounter, work, options) =>
      leases.checkpointInTransaction(leaseKey, leaseCounter, work, options),
    table: harness.transactions,
  };
}

async function within<T>(ms: number, what: string, promise: Promise<T>): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not finish within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

async function steal(store: LeaseStore, leaseKey: string, counter: number): Promise<void> {
  const result = await store.leases.take(leaseKey, counter, 'worker-b');
  if (!result.ok) throw new Error(`the steal lost its race: ${result.reason}`);
}

/**
 * Checkpoints in the application's transaction (`capabilities.transactionalCheckpoint`): the
 * application's writes and the checkpoint commit together, fenced by the lease counter, or not at all.
 */
export const transactionCases = caseGroup('transactional checkpoint', {
  'the writes and the checkpoint (with a sub-sequence number) commit together': async (context) => {
    const { store, applicationName, assert, check } = context;
    const { checkpointInTransaction, table } = transactional(context);
    const taken = check.ok(
      await store.leases.take(
        shardId(1),
        (await check.create(store, { leaseKey: shardId(1) })).leaseCounter,
        'worker-a',
      ),
      'take',
    );
    const stolenBack = check.ok(await store.leases.take(shardId(1), taken.leaseCounter, 'worker-b'), 'steal');
    const held = check.ok(
      await store.leases.take(shardId(1), stolenBack.leaseCounter, 'worker-a'),
      'take back',
    );
    assert.equal(held.ownerSwitchesSinceCheckpoint, 2);
    const result = await checkpointInTransaction(shardId(1), held.leaseCounter, async (transaction) => {
      await table.write(transaction, applicationName, 'record-1');
      await table.write(transaction, applicationName, 'record-2');
      return { update: { checkpoint: sequence('700', 3) }, value: 'done' };
    });
    if (!result.ok) throw new Error(`the transaction lost its race: ${result.reason}`);
    assert.equal(result.value, 'done', 'the value work returned');
    assert.equal(leaseSnapshot(result.lease), {
      ...leaseSnapshot(held),
      checkpoint: sequence('700', 3).toString(),
      ownerSwitchesSinceCheckpoint: 0,
      leaseCounter: held.leaseCounter + 1,
    });
    await check.stored(store, result.lease);
    assert.equal(await table.read(applicationName), ['record-1', 'record-2'], 'committed rows');
  },
  'a counter that moved rolls the writes back and reports the lost race': async (context) => {
    const { store, applicationName, assert, check } = context;
    const { checkpointInTransaction, table } = transactional(context);
    const held = await check.createTaken(store, shardId(1));
    const stolen = check.ok(await store.leases.take(shardId(1), held.leaseCounter, 'worker-b'), 'steal');
    const result = await checkpointInTransaction(shardId(1), held.leaseCounter, async (transaction) => {
      await table.write(transaction, applicationName, 'record-1');
      return { update: { checkpoint: sequence('700') }, value: null };
    });
    check.lost(result, 'counter-mismatch', 'the stale transaction');
    await check.stored(store, stolen);
    assert.equal(await table.read(applicationName), [], 'nothing committed');
  },
  'a deleted lease rolls the writes back (not-found)': async (context) => {
    const { store, applicationName, assert, check } = context;
    const { checkpointInTransaction, table } = transactional(context);
    const held = await check.createTaken(store, shardId(1));
    await store.leases.delete(shardId(1));
    const result = await checkpointInTransaction(shardId(1), held.leaseCounter, async (transaction) => {
      await table.write(transaction, applicationName, 'record-1');
      return { update: { checkpoint: sequence('700') }, value: null };
    });
    check.lost(result, 'not-found', 'the transaction of a deleted lease');
    assert.equal(await table.read(applicationName), [], 'nothing committed');
  },
  'an error thrown by the work rolls everything back and rejects with it': async (context) => {
    const { store, applicationName, assert, check } = context;
    const { checkpointInTransaction, table } = transactional(context);
    const held = await check.createTaken(store, shardId(1));
    const failure = new Error('the application failed');
    let rejected: unknown;
    try {
      await checkpointInTransaction(shardId(1), held.leaseCounter, async (transaction) => {
        await table.write(transaction, applicationName, 'record-1');
        throw failure;
      });
    } catch (error) {
      rejected = error;
    }
    assert.ok(
      rejected === failure || (rejected as { cause?: unknown } | undefined)?.cause === failure,
      `rejects with the work's error (got ${String(rejected)})`,
    );
    await check.stored(store, held);
    assert.equal(await table.read(applicationName), [], 'nothing committed');
  },
  'a signal aborted by the time the work resolves rolls everything back': async (context) => {
    const { store, applicationName, assert, check } = context;
    const { checkpointInTransaction, table } = transactional(context);
    const held = await check.createTaken(store, shardId(1));
    const controller = new AbortController();
    let rejected = false;
    try {
      await checkpointInTransaction(
        shardId(1),
        held.leaseCounter,
        async (transaction) => {
          await table.write(transaction, applicationName, 'record-1');
          controller.abort(new Error('the lease was lost'));
          return { update: { checkpoint: sequence('700') }, value: null };
        },
        { signal: controller.signal },
      );
    } catch {
      rejected = true;
    }
    assert.ok(rejected, 'the aborted transaction rejects');
    await check.stored(store, held);
    assert.equal(await table.read(applicationName), [], 'nothing committed');
  },
  'a steal while the transaction is open makes its commit fail with nothing written': async (context) => {
    const { store, applicationName, assert, check, skip } = context;
    const { checkpointInTransaction, table } = transactional(context);
    if (!table.concurrentWriters) skip('the database has one writer at a time: a steal waits for the commit');
    const held = await check.createTaken(store, shardId(1));
    const result = await checkpointInTransaction(shardId(1), held.leaseCounter, async (transaction) => {
      await table.write(transaction, applicationName, 'record-1');
      await within(UNBLOCKED_LIMIT_MS, 'a steal', steal(store, shardId(1), held.leaseCounter));
      return { update: { checkpoint: ExtendedSequenceNumber.of('700') }, value: null };
    });
    check.lost(result, 'counter-mismatch', 'the transaction of a stolen lease');
    assert.equal((await store.leases.get(shardId(1)))?.owner, 'worker-b', 'the thief holds the lease');
    assert.equal(await table.read(applicationName), [], 'nothing committed');
  },
  "an open transaction blocks no other worker's writes of its own leases": async (context) => {
    const { store, applicationName, assert, check, skip, note } = context;
    const { checkpointInTransaction, table } = transactional(context);
    if (!table.concurrentWriters) {
      skip('the database has one writer at a time: other writes wait for the commit (its busy timeout)');
    }
    const held = await check.createTaken(store, shardId(1));
    const others = [await check.createTaken(store, shardId(2), 'worker-b')];
    others.push(await check.createTaken(store, shardId(3), 'worker-b'));
    let waitedMs = 0;
    const result = await checkpointInTransaction(shardId(1), held.leaseCounter, async (transaction) => {
      await table.write(transaction, applicationName, 'record-1');
      const started = performance.now();
      const renewed = await within(
        UNBLOCKED_LIMIT_MS,
        "another worker's renewals",
        store.leases.renewMany(others.map(({ leaseKey, leaseCounter }) => ({ leaseKey, leaseCounter }))),
      );
      const single = await within(
        UNBLOCKED_LIMIT_MS,
        "another worker's checkpoint",
        store.leases.checkpoint(shardId(2), (others[0]?.leaseCounter ?? 0) + 1, {
          checkpoint: sequence('5'),
        }),
      );
      waitedMs = performance.now() - started;
      assert.equal(
        renewed.map((entry) => entry.ok),
        [true, true],
        'the renewals applied',
      );
      check.ok(single, "another worker's checkpoint");
      return { update: { checkpoint: sequence('700') }, value: null };
    });
    check.ok(result, 'the transaction');
    note(`another worker's renewal and checkpoint during an open transaction took ${waitedMs.toFixed(1)} ms`);
    assert.equal(await table.read(applicationName), ['record-1'], 'committed rows');
  },
});
