import type { KclEvent } from '@kcl/core';
import {
  ExtendedSequenceNumber,
  guardLeaseStore,
  InvalidCheckpointError,
  interceptLeaseStore,
  LeaseLostError,
  noopLogger,
} from '@kcl/core';
import type { MemoryTransaction } from '@kcl/testkit';
import { createFaultyLeaseStore, createMemoryLeaseStore, ManualClock } from '@kcl/testkit';
import { describe, expect, it } from 'vitest';
import { LeaseKeeper } from '../leases/lease-keeper.js';
import { ShardCheckpointer } from './checkpointer.js';

const esn = ExtendedSequenceNumber.of;

async function setup(checkpoint = ExtendedSequenceNumber.TRIM_HORIZON) {
  const clock = new ManualClock();
  const store = createMemoryLeaseStore({ applicationName: 'checkpoints' });
  const events: KclEvent[] = [];
  const keeper = new LeaseKeeper({
    store,
    workerId: 'me',
    leaseExpiryMs: 10_000,
    clock,
    logger: noopLogger,
    emit: (event) => events.push(event),
    onLost: () => {},
  });
  await store.leases.create({ leaseKey: 'shard-1', checkpoint });
  const taken = await store.leases.take('shard-1', 0, 'me');
  if (!taken.ok) throw new Error('take');
  const held = keeper.adopt(taken.lease, clock.monotonicNow());
  const checkpointer = new ShardCheckpointer({
    held,
    keeper,
    store,
    workerId: 'me',
    emit: (event) => events.push(event),
  });
  return { clock, store, keeper, held, checkpointer, events };
}

describe('ShardCheckpointer', () => {
  it('checkpoints the last delivered record by default and writes it', async () => {
    const { checkpointer, store, events } = await setup();
    checkpointer.allowUpTo(esn('300', 2));
    await checkpointer.checkpoint();
    expect((await store.leases.get('shard-1'))?.checkpoint.toString()).toBe('300/2');
    expect(checkpointer.lastCheckpoint.toString()).toBe('300/2');
    expect(events.filter((event) => event.type === 'checkpoint-written')).toHaveLength(1);
  });

  it('refuses a checkpoint past the last delivered record', async () => {
    const { checkpointer } = await setup();
    checkpointer.allowUpTo(esn('300'));
    await expect(checkpointer.checkpoint('301')).rejects.toThrow(InvalidCheckpointError);
    await expect(checkpointer.checkpoint('300', 1)).rejects.toThrow(/past the last record delivered/);
  });

  it('refuses a checkpoint that goes backwards', async () => {
    const { checkpointer } = await setup();
    checkpointer.allowUpTo(esn('500'));
    await checkpointer.checkpoint('400');
    await expect(checkpointer.checkpoint('399')).rejects.toThrow(/never go backwards/);
    await expect(checkpointer.checkpoint('TRIM_HORIZON')).rejects.toThrow(InvalidCheckpointError);
  });

  it('writes nothing when the checkpoint is unchanged', async () => {
    const { checkpointer, store } = await setup();
    checkpointer.allowUpTo(esn('10'));
    await checkpointer.checkpoint('10');
    const counter = (await store.leases.get('shard-1'))?.leaseCounter;
    await checkpointer.checkpoint('10');
    await checkpointer.checkpoint();
    expect((await store.leases.get('shard-1'))?.leaseCounter).toBe(counter);
  });

  it('allows SHARD_END only at the end of the shard, where the last record also means SHARD_END', async () => {
    const { checkpointer, store } = await setup();
    checkpointer.allowUpTo(esn('900'));
    await expect(checkpointer.checkpoint('SHARD_END')).rejects.toThrow(
      /only be checkpointed inside shardEnded/,
    );
    checkpointer.allowShardEnd();
    await checkpointer.checkpoint('900');
    expect((await store.leases.get('shard-1'))?.checkpoint.isShardEnd).toBe(true);
  });

  it('takes a checkpoint from the last record up to where the read got to after it for SHARD_END at the shard end', async () => {
    const { checkpointer, store } = await setup();
    checkpointer.beginDelivery(esn('900'));
    checkpointer.endDelivery(true);
    await checkpointer.checkpoint();
    // Idle: an empty event says the read got to 950; the processor checkpoints it.
    checkpointer.allowPosition(esn('950'));
    await checkpointer.checkpoint();
    expect((await store.leases.get('shard-1'))?.checkpoint.toString()).toBe('950');
    checkpointer.allowShardEnd();
    // shardEnded naming the shard's last record still finishes the shard.
    await checkpointer.checkpoint('900');
    expect((await store.leases.get('shard-1'))?.checkpoint.isShardEnd).toBe(true);
  });

  it('rejects malformed sequence numbers with the lease named', async () => {
    const { checkpointer } = await setup();
    checkpointer.allowUpTo(esn('900'));
    await expect(checkpointer.checkpoint('12x')).rejects.toThrow(/shard-1.*not a sequence number/);
    await expect(checkpointer.checkpoint(undefined, 3)).rejects.toThrow(/needs a sequence number/);
  });

  it('prepares a checkpoint, keeps the committed one, and commits it later', async () => {
    const { checkpointer, store } = await setup();
    checkpointer.allowUpTo(esn('700'));
    await checkpointer.checkpoint('100');
    const prepared = await checkpointer.prepareCheckpoint('700');
    let stored = await store.leases.get('shard-1');
    expect([stored?.checkpoint.toString(), stored?.pendingCheckpoint?.toString()]).toEqual(['100', '700']);
    await prepared.checkpoint();
    stored = await store.leases.get('shard-1');
    expect([stored?.checkpoint.toString(), stored?.pendingCheckpoint]).toEqual(['700', null]);
  });

  it('refuses to checkpoint once the lease is lost', async () => {
    const { checkpointer, store, held } = await setup();
    checkpointer.allowUpTo(esn('50'));
    await store.leases.take('shard-1', held.lease.leaseCounter, 'thief');
    await expect(checkpointer.checkpoint()).rejects.toThrow(LeaseLostError);
    expect(held.isHeld()).toBe(false);
    await expect(checkpointer.checkpoint()).rejects.toThrow(/no longer held/);
    expect((await store.leases.get('shard-1'))?.checkpoint.toString()).toBe('TRIM_HORIZON');
  });

  it('refuses to checkpoint after the lease expired locally, even though the store would accept it', async () => {
    const { checkpointer, clock, store } = await setup();
    checkpointer.allowUpTo(esn('50'));
    await clock.advance(10_001);
    await expect(checkpointer.checkpoint()).rejects.toThrow(LeaseLostError);
    expect((await store.leases.get('shard-1'))?.checkpoint.toString()).toBe('TRIM_HORIZON');
  });

  it('after a delivery cut short, a checkpoint without arguments names the last completed batch, not the cut one', async () => {
    const { checkpointer, store } = await setup();
    checkpointer.beginDelivery(esn('100'));
    checkpointer.endDelivery(true);
    checkpointer.beginDelivery(esn('200'));
    // Inside processRecords, "everything delivered" is this batch.
    expect(checkpointer.delivered.toString()).toBe('200');
    checkpointer.endDelivery(false);
    // The worker stopped (or processRecords threw) in the middle of it: shutdownRequested's checkpoint
    // must not cover records the processor may never have handled.
    await checkpointer.checkpoint();
    expect((await store.leases.get('shard-1'))?.checkpoint.toString()).toBe('100');
    // Explicit positions inside the cut batch stay allowed: the processor knows what it handled.
    await checkpointer.checkpoint('150');
    expect((await store.leases.get('shard-1'))?.checkpoint.toString()).toBe('150');
    // And a checkpoint without arguments never goes backwards from there.
    await checkpointer.checkpoint();
    expect((await store.leases.get('shard-1'))?.checkpoint.toString()).toBe('150');
  });

  it('never writes a checkpoint backwards after a checkpoint whose answer was lost had applied', async () => {
    const clock = new ManualClock();
    const memory = createMemoryLeaseStore({ applicationName: 'lost-answer' });
    const store = createFaultyLeaseStore(memory, { clock });
    const keeper = new LeaseKeeper({
      store,
      workerId: 'me',
      leaseExpiryMs: 10_000,
      clock,
      logger: noopLogger,
      emit: () => {},
      onLost: () => {},
    });
    await store.leases.create({ leaseKey: 'shard-1', checkpoint: ExtendedSequenceNumber.TRIM_HORIZON });
    const taken = await store.leases.take('shard-1', 0, 'me');
    if (!taken.ok) throw new Error('take');
    const held = keeper.adopt(taken.lease, clock.monotonicNow());
    const checkpointer = new ShardCheckpointer({ held, keeper, store, workerId: 'me', emit: () => {} });
    checkpointer.allowUpTo(esn('1000'));
    // Checkpoint 900 applies, but its answer is lost: the processor hears an error.
    store.faults.loseResponseNext(1, ['leases.checkpoint']);
    await expect(checkpointer.checkpoint('900')).rejects.toThrow(/lost response/);
    expect((await memory.leases.get('shard-1'))?.checkpoint.toString()).toBe('900');
    // A later, lower checkpoint (a replacement child that was sent less, say) must not move it back.
    await checkpointer.checkpoint('700');
    expect((await memory.leases.get('shard-1'))?.checkpoint.toString()).toBe('900');
    await checkpointer.checkpoint('800');
    expect((await memory.leases.get('shard-1'))?.checkpoint.toString()).toBe('900');
    await checkpointer.checkpoint('1000');
    expect((await memory.leases.get('shard-1'))?.checkpoint.toString()).toBe('1000');
  });

  it('never writes a prepared checkpoint below one whose answer was lost but which applied', async () => {
    const clock = new ManualClock();
    const memory = createMemoryLeaseStore({ applicationName: 'prepare' });
    const store = createFaultyLeaseStore(memory, { clock });
    const keeper = new LeaseKeeper({
      store,
      workerId: 'me',
      leaseExpiryMs: 10_000,
      clock,
      logger: noopLogger,
      emit: () => {},
      onLost: () => {},
    });
    await store.leases.create({ leaseKey: 'shard-1', checkpoint: ExtendedSequenceNumber.TRIM_HORIZON });
    const taken = await store.leases.take('shard-1', 0, 'me');
    if (!taken.ok) throw new Error('take');
    const held = keeper.adopt(taken.lease, clock.monotonicNow());
    const checkpointer = new ShardCheckpointer({ held, keeper, store, workerId: 'me', emit: () => {} });
    checkpointer.allowUpTo(esn('1000'));
    await checkpointer.checkpoint('100');
    store.faults.loseResponseNext(1, ['leases.checkpoint']);
    await expect(checkpointer.checkpoint('900')).rejects.toThrow(/lost response/);
    await keeper.renewAll();
    await checkpointer.prepareCheckpoint('950');
    const stored = await memory.leases.get('shard-1');
    expect(stored?.checkpoint.toString()).toBe('900');
    expect(stored?.pendingCheckpoint?.toString()).toBe('950');
  });
});

describe('ShardCheckpointer.transaction', () => {
  async function transactional(
    options: {
      readonly loseNextAnswer?: { value: boolean };
      readonly expireOnLoss?: boolean;
      /** Wrapped as the runtime wraps a store: an aborted call rejects with StoreCallAbortedError. */
      readonly guarded?: boolean;
    } = {},
  ) {
    const clock = new ManualClock();
    const created = createMemoryLeaseStore({ applicationName: 'exactly-once', transactions: true });
    const memory = options.guarded === true ? guardLeaseStore(created, 'test') : created;
    const lose = options.loseNextAnswer;
    // Fault injection: the commit applies, its answer is lost.
    const store = interceptLeaseStore(memory, async (operation, callOptions, call) => {
      const result = await call(callOptions);
      if (operation === 'leases.checkpointInTransaction' && lose?.value === true) {
        lose.value = false;
        // The lease is given up locally before the lost answer arrives.
        if (options.expireOnLoss === true) await clock.advance(10_001);
        throw new Error('connection reset after COMMIT');
      }
      return result;
    });
    const events: KclEvent[] = [];
    const keeper = new LeaseKeeper({
      store,
      workerId: 'me',
      leaseExpiryMs: 10_000,
      clock,
      logger: noopLogger,
      emit: (event) => events.push(event),
      onLost: () => {},
    });
    await memory.leases.create({ leaseKey: 'shard-1', checkpoint: ExtendedSequenceNumber.TRIM_HORIZON });
    const taken = await memory.leases.take('shard-1', 0, 'me');
    if (!taken.ok) throw new Error('take');
    const held = keeper.adopt(taken.lease, clock.monotonicNow());
    const checkpointer = new ShardCheckpointer({
      held,
      keeper,
      store,
      workerId: 'me',
      emit: (event) => events.push(event),
    });
    const output: string[] = [];
    const insert = (transaction: MemoryTransaction, row: string) =>
      transaction.onCommit(() => output.push(row));
    return { store: memory, checkpointer, events, output, insert, clock, keeper };
  }

  it('commits the writes with a checkpoint at the end of the batch, and returns what the work returned', async () => {
    const { checkpointer, store, events, output, insert } = await transactional();
    checkpointer.beginDelivery(esn('300', 2));
    const value = await checkpointer.transaction<MemoryTransaction, number>(async (transaction) => {
      insert(transaction, 'a');
      insert(transaction, 'b');
      return 2;
    });
    expect(value).toBe(2);
    expect(output).toEqual(['a', 'b']);
    expect((await store.leases.get('shard-1'))?.checkpoint.toString()).toBe('300/2');
    expect(checkpointer.lastCheckpoint.toString()).toBe('300/2');
    expect(events.filter((event) => event.type === 'checkpoint-written')).toHaveLength(1);
  });

  it('writes the checkpoint where the work put it, sub-sequence numbers included, and checks it as checkpoint() does', async () => {
    const { checkpointer, store } = await transactional();
    checkpointer.beginDelivery(esn('300', 2));
    await checkpointer.transaction<MemoryTransaction>(async (_transaction, checkpoint) => {
      checkpoint.checkpointRecord({ sequenceNumber: '300', subSequenceNumber: 1 });
    });
    expect((await store.leases.get('shard-1'))?.checkpoint.toString()).toBe('300/1');
    await expect(
      checkpointer.transaction(async (_transaction, checkpoint) => checkpoint.checkpoint('301')),
    ).rejects.toThrow(InvalidCheckpointError);
    await expect(
      checkpointer.transaction(async (_transaction, checkpoint) => checkpoint.checkpoint('300', 0)),
    ).rejects.toThrow(/never go backwards/);
    expect((await store.leases.get('shard-1'))?.checkpoint.toString()).toBe('300/1');
  });

  it("rejects with the work's own error and commits nothing", async () => {
    const { checkpointer, store, output, insert } = await transactional();
    checkpointer.beginDelivery(esn('300'));
    const failure = new Error('the application failed');
    await expect(
      checkpointer.transaction<MemoryTransaction>(async (transaction) => {
        insert(transaction, 'a');
        throw failure;
      }),
    ).rejects.toBe(failure);
    expect(output).toEqual([]);
    expect((await store.leases.get('shard-1'))?.checkpoint.sentinel).toBe('TRIM_HORIZON');
    expect(checkpointer.lastCheckpoint.sentinel).toBe('TRIM_HORIZON');
  });

  it('rejects with LeaseLostError and commits nothing when another worker took the lease', async () => {
    const { checkpointer, store, output, insert } = await transactional();
    checkpointer.beginDelivery(esn('300'));
    await expect(
      checkpointer.transaction<MemoryTransaction>(async (transaction) => {
        insert(transaction, 'a');
        const current = await store.leases.get('shard-1');
        await store.leases.take('shard-1', current?.leaseCounter ?? 0, 'thief');
      }),
    ).rejects.toThrow(LeaseLostError);
    expect(output).toEqual([]);
    expect((await store.leases.get('shard-1'))?.owner).toBe('thief');
  });

  it('never runs a transaction again whose commit applied but whose answer was lost: the batch resumes after it', async () => {
    const loseNextAnswer = { value: true };
    const { checkpointer, store, output, insert } = await transactional({ loseNextAnswer });
    checkpointer.beginDelivery(esn('300'));
    await expect(
      checkpointer.transaction<MemoryTransaction>(async (transaction) => insert(transaction, 'first')),
    ).rejects.toThrow(/connection reset/);
    expect(output).toEqual(['first']);
    expect(checkpointer.lastCheckpoint.sentinel).toBe('TRIM_HORIZON');
    // The retry of the batch: the stored checkpoint shows the commit, so nothing is written twice.
    await expect(
      checkpointer.transaction<MemoryTransaction>(async (transaction) => insert(transaction, 'again')),
    ).rejects.toThrow(/earlier transaction whose answer was lost committed/);
    expect(output).toEqual(['first']);
    expect(checkpointer.lastCheckpoint.toString()).toBe('300');
    expect((await store.leases.get('shard-1'))?.owner).toBe('me');
  });

  it('refuses a transaction retried inside the same delivery after a lost answer, so the records are not committed twice', async () => {
    const loseNextAnswer = { value: true };
    const { checkpointer, store, output, insert } = await transactional({ loseNextAnswer });
    checkpointer.beginDelivery(esn('300'));
    const write = () =>
      checkpointer.transaction<MemoryTransaction>(async (transaction) => insert(transaction, 'batch'));
    await expect(write()).rejects.toThrow(/connection reset/);
    const superseded = await write().catch((error: unknown) => error);
    expect(superseded).toMatchObject({ code: 'CHECKPOINT_TRANSACTION_SUPERSEDED', retryable: false });
    // A processor that retries anyway inside processRecords is refused: nothing is written again.
    await expect(write()).rejects.toThrow(InvalidCheckpointError);
    await expect(write()).rejects.toThrow(/committed by an earlier transaction whose answer was lost/);
    expect(output).toEqual(['batch']);
    expect((await store.leases.get('shard-1'))?.checkpoint.toString()).toBe('300');
    // The next delivery commits as usual.
    checkpointer.beginDelivery(esn('400'));
    await write();
    expect(output).toEqual(['batch', 'batch']);
    expect((await store.leases.get('shard-1'))?.checkpoint.toString()).toBe('400');
  });

  it('does not claim that nothing was written when the lease was given up and the answer of a commit that applied was lost', async () => {
    const loseNextAnswer = { value: true };
    const { checkpointer, output, insert, keeper } = await transactional({
      loseNextAnswer,
      expireOnLoss: true,
    });
    const watching = new AbortController();
    void keeper.watchExpiry(watching.signal);
    checkpointer.beginDelivery(esn('300'));
    const error = await checkpointer
      .transaction<MemoryTransaction>(async (transaction) => insert(transaction, 'a'))
      .catch((caught: unknown) => caught);
    watching.abort();
    expect(output).toEqual(['a']);
    expect(error).toBeInstanceOf(LeaseLostError);
    expect(String(error)).not.toMatch(/nothing was written/);
    expect(String(error)).toMatch(/committed together with its checkpoint or not at all/);
  });

  it('refuses a checkpointer call inside the work at once instead of waiting for the transaction', async () => {
    const { checkpointer, store, output, insert } = await transactional();
    checkpointer.beginDelivery(esn('300'));
    await expect(
      checkpointer.transaction<MemoryTransaction>(async (transaction) => {
        insert(transaction, 'a');
        await checkpointer.checkpoint();
      }),
    ).rejects.toThrow(/inside checkpointer.transaction/);
    expect(output).toEqual([]);
    expect((await store.leases.get('shard-1'))?.checkpoint.sentinel).toBe('TRIM_HORIZON');
    // Afterwards the checkpointer works as before.
    await checkpointer.transaction<MemoryTransaction>(async (transaction) => insert(transaction, 'b'));
    expect(output).toEqual(['b']);
  });

  it('rolls back and rejects with LeaseLostError when the lease expires while the work runs', async () => {
    const { checkpointer, store, output, insert, clock, keeper } = await transactional();
    const watching = new AbortController();
    void keeper.watchExpiry(watching.signal);
    checkpointer.beginDelivery(esn('300'));
    await expect(
      checkpointer.transaction<MemoryTransaction>(async (transaction) => {
        insert(transaction, 'a');
        await clock.advance(10_001);
      }),
    ).rejects.toThrow(LeaseLostError);
    watching.abort();
    expect(output).toEqual([]);
    expect((await store.leases.get('shard-1'))?.checkpoint.sentinel).toBe('TRIM_HORIZON');
  });

  it('rejects with LeaseLostError, not an abort error, when the lease is given up while the work runs on a guarded store', async () => {
    const { checkpointer, output, insert, clock, keeper } = await transactional({ guarded: true });
    const watching = new AbortController();
    void keeper.watchExpiry(watching.signal);
    checkpointer.beginDelivery(esn('300'));
    await expect(
      checkpointer.transaction<MemoryTransaction>(async (transaction) => {
        insert(transaction, 'a');
        await clock.advance(10_001);
      }),
    ).rejects.toThrow(LeaseLostError);
    watching.abort();
    expect(output).toEqual([]);
  });

  it('fails with a ConfigurationError on a store without transactional checkpoints', async () => {
    const { checkpointer } = await setup();
    checkpointer.beginDelivery(esn('300'));
    await expect(checkpointer.transaction(async () => {})).rejects.toThrow(
      /cannot checkpoint in a transaction/,
    );
  });
});
