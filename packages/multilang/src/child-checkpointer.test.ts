import type { Checkpointer, PreparedCheckpointer } from '@kcl/consumer';
import { ExtendedSequenceNumber, InvalidCheckpointError } from '@kcl/core';
import { describe, expect, it } from 'vitest';
import { ChildCheckpointer } from './child-checkpointer.js';

/** The consumer's rules in memory: no argument means the largest permitted position. */
class RulesCheckpointer implements Checkpointer {
  lastCheckpoint = ExtendedSequenceNumber.TRIM_HORIZON;
  largestPermitted = ExtendedSequenceNumber.of('10');
  readonly calls: string[] = [];
  async checkpoint(sequenceNumber?: string, subSequenceNumber?: number): Promise<void> {
    this.calls.push(
      `checkpoint(${[sequenceNumber, subSequenceNumber].filter((x) => x !== undefined).join(', ')})`,
    );
    const target =
      sequenceNumber === undefined
        ? this.largestPermitted
        : ExtendedSequenceNumber.of(sequenceNumber, subSequenceNumber ?? 0);
    if (target.isAfter(this.largestPermitted)) throw new InvalidCheckpointError('past the last delivered');
    this.lastCheckpoint = target;
  }
  async checkpointRecord(): Promise<void> {}
  async transaction(): Promise<never> {
    throw new Error('not used');
  }

  async prepareCheckpoint(
    sequenceNumber?: string,
    subSequenceNumber?: number,
  ): Promise<PreparedCheckpointer> {
    this.calls.push(
      `prepare(${[sequenceNumber, subSequenceNumber].filter((x) => x !== undefined).join(', ')})`,
    );
    return { pendingCheckpoint: this.lastCheckpoint, checkpoint: async () => {} };
  }
}

function view(lastSent: ExtendedSequenceNumber | null, shardEnded = false) {
  const inner = new RulesCheckpointer();
  let advanced = 0;
  const checkpointer = new ChildCheckpointer(inner, {
    shardId: 'shardId-000000000001',
    lastSent: () => lastSent,
    shardEnded,
    onAdvance: () => {
      advanced += 1;
    },
  });
  return { inner, checkpointer, advanced: () => advanced };
}

describe('ChildCheckpointer', () => {
  it('turns "everything so far" into the last record sent to the child, sub-sequence number included', async () => {
    const { inner, checkpointer, advanced } = view(ExtendedSequenceNumber.of('7', 2));
    await checkpointer.checkpoint();
    expect(inner.calls).toEqual(['checkpoint(7, 2)']);
    expect(checkpointer.lastCheckpoint.toString()).toBe('7/2');
    expect(advanced()).toBe(1);
  });

  it('writes nothing for "everything so far" when the child was sent nothing after the checkpoint', async () => {
    const { inner, checkpointer, advanced } = view(null);
    await checkpointer.checkpoint();
    expect(inner.calls).toEqual([]);
    inner.lastCheckpoint = ExtendedSequenceNumber.of('7');
    const again = new ChildCheckpointer(inner, {
      shardId: 'shardId-000000000001',
      lastSent: () => ExtendedSequenceNumber.of('7'),
      shardEnded: false,
    });
    await again.checkpoint();
    expect(inner.calls).toEqual([]);
    expect(advanced()).toBe(0);
  });

  it('refuses an explicit checkpoint past the last record sent, and passes the rest to the consumer', async () => {
    const { inner, checkpointer } = view(ExtendedSequenceNumber.of('7'));
    await expect(checkpointer.checkpoint('8')).rejects.toBeInstanceOf(InvalidCheckpointError);
    await expect(checkpointer.checkpoint('7', 1)).rejects.toThrow(
      /past the last record sent to this child \(7\)/,
    );
    await expect(checkpointer.checkpoint('SHARD_END')).rejects.toBeInstanceOf(InvalidCheckpointError);
    await checkpointer.checkpoint('7');
    // Malformed values are the consumer's to refuse, with its own message.
    await checkpointer.checkpoint('not-a-number').catch(() => undefined);
    expect(inner.calls).toEqual(['checkpoint(7)', 'checkpoint(not-a-number)']);
  });

  it('refuses any explicit checkpoint when nothing was sent', async () => {
    const { inner, checkpointer } = view(null);
    await expect(checkpointer.checkpoint('1')).rejects.toBeInstanceOf(InvalidCheckpointError);
    expect(inner.calls).toEqual([]);
  });

  it('leaves shardEnded to the consumer: no argument there means SHARD_END', async () => {
    const { inner, checkpointer } = view(ExtendedSequenceNumber.of('7'), true);
    await checkpointer.checkpoint();
    expect(inner.calls).toEqual(['checkpoint()']);
  });

  it('applies the same limit to prepared checkpoints', async () => {
    const { inner, checkpointer } = view(ExtendedSequenceNumber.of('7'));
    await checkpointer.prepareCheckpoint();
    await expect(checkpointer.prepareCheckpoint('9')).rejects.toBeInstanceOf(InvalidCheckpointError);
    expect(inner.calls).toEqual(['prepare(7, 0)']);
  });
});
