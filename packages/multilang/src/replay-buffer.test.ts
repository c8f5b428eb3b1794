import type { KinesisRecord } from '@kcl/consumer';
import { ExtendedSequenceNumber } from '@kcl/core';
import { describe, expect, it } from 'vitest';
import { ReplayBuffer, ReplayMemoryBudget, recordsAfter } from './replay-buffer.js';

const record = (sequenceNumber: string, subSequenceNumber = 0, bytes = 10): KinesisRecord => ({
  sequenceNumber,
  subSequenceNumber,
  partitionKey: 'k',
  explicitHashKey: null,
  data: new Uint8Array(bytes),
  approximateArrivalTimestamp: new Date(0),
  encryptionType: null,
  aggregated: subSequenceNumber > 0,
});
const batch = (...records: KinesisRecord[]) => ({ records, millisBehindLatest: 0 });
const sequences = (buffer: ReplayBuffer, checkpoint: ExtendedSequenceNumber) =>
  buffer
    .batchesAfter(checkpoint)
    .map((kept) => kept.records.map((kept) => `${kept.sequenceNumber}/${kept.subSequenceNumber}`));

describe('recordsAfter', () => {
  it('keeps what follows a checkpoint, sub-sequence numbers included', () => {
    const records = [record('1'), record('2', 0), record('2', 1), record('3')];
    expect(
      recordsAfter(records, ExtendedSequenceNumber.of('2', 0)).map(
        (kept) => `${kept.sequenceNumber}/${kept.subSequenceNumber}`,
      ),
    ).toEqual(['2/1', '3/0']);
    expect(recordsAfter(records, ExtendedSequenceNumber.TRIM_HORIZON)).toHaveLength(4);
    expect(recordsAfter(records, ExtendedSequenceNumber.SHARD_END)).toEqual([]);
  });
});

describe('ReplayBuffer', () => {
  it('keeps acknowledged batches until a checkpoint covers them', () => {
    const buffer = new ReplayBuffer(1_000);
    buffer.add(batch(record('1'), record('2')));
    buffer.add(batch(record('3')));
    buffer.add(batch());
    expect(sequences(buffer, ExtendedSequenceNumber.TRIM_HORIZON)).toEqual([['1/0', '2/0'], ['3/0']]);
    expect(sequences(buffer, ExtendedSequenceNumber.of('1'))).toEqual([['2/0'], ['3/0']]);
    buffer.prune(ExtendedSequenceNumber.of('3'));
    expect(buffer.recordCount).toBe(0);
    expect(buffer.bytes).toBe(0);
    expect(buffer.complete).toBe(true);
  });

  it('stops keeping records past its size, and is complete again once a checkpoint passes the gap', () => {
    const buffer = new ReplayBuffer(60);
    buffer.add(batch(record('1', 0, 40)));
    buffer.add(batch(record('2', 0, 40)));
    expect(buffer.complete).toBe(false);
    // A later batch that would fit is left out too: a replay must not skip the missing one.
    buffer.add(batch(record('3', 0, 1)));
    expect(buffer.recordCount).toBe(1);
    buffer.prune(ExtendedSequenceNumber.of('2'));
    expect(buffer.complete).toBe(false);
    buffer.prune(ExtendedSequenceNumber.of('3'));
    expect(buffer.complete).toBe(true);
    expect(buffer.recordCount).toBe(0);
    buffer.add(batch(record('4', 0, 40)));
    expect(sequences(buffer, ExtendedSequenceNumber.of('3'))).toEqual([['4/0']]);
  });

  it('is complete again at SHARD_END, and after clear', () => {
    const buffer = new ReplayBuffer(10);
    buffer.add(batch(record('1', 0, 40)));
    expect(buffer.complete).toBe(false);
    buffer.prune(ExtendedSequenceNumber.SHARD_END);
    expect(buffer.complete).toBe(true);
    buffer.add(batch(record('2', 0, 40)));
    buffer.clear();
    expect(buffer.complete).toBe(true);
  });
});

describe('ReplayMemoryBudget', () => {
  it('bounds every shard together: a shard stops keeping records once the daemon-wide total is spent', () => {
    const budget = new ReplayMemoryBudget(100);
    const first = new ReplayBuffer(1_000, budget);
    const second = new ReplayBuffer(1_000, budget);
    first.add(batch(record('1', 0, 60)));
    expect(budget.usedBytes).toBeGreaterThanOrEqual(60);
    // Within its own limit, but past what is left of the total: left out, and said so.
    second.add(batch(record('1', 0, 60)));
    expect(second.complete).toBe(false);
    expect(second.recordCount).toBe(0);
    expect(second.limitReached).toBe('daemon');
    expect(first.complete).toBe(true);

    // A checkpoint on the first shard gives its bytes back; the second keeps new batches again once
    // a checkpoint of its own covers what it left out.
    first.prune(ExtendedSequenceNumber.of('1'));
    expect(budget.usedBytes).toBe(0);
    second.prune(ExtendedSequenceNumber.of('1'));
    expect(second.complete).toBe(true);
    second.add(batch(record('2', 0, 60)));
    expect(second.recordCount).toBe(1);
    expect(budget.usedBytes).toBe(second.bytes);
    second.clear();
    expect(budget.usedBytes).toBe(0);
  });

  it('names the per-shard limit when that is the one reached', () => {
    const budget = new ReplayMemoryBudget(1_000);
    const buffer = new ReplayBuffer(50, budget);
    buffer.add(batch(record('1', 0, 60)));
    expect(buffer.limitReached).toBe('shard');
    expect(budget.usedBytes).toBe(0);
  });
});
