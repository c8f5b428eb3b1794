import type { Checkpointer, KinesisRecord, PreparedCheckpointer, TransactionCheckpoint } from '@kcl/consumer';
import { ExtendedSequenceNumber, InvalidCheckpointError } from '@kcl/core';

export interface ChildCheckpointerOptions {
  readonly shardId: string;
  /** The last record written to this child, or null when it has been sent none. */
  readonly lastSent: () => ExtendedSequenceNumber | null;
  /**
   * True only for the `shardEnded` action, which is sent after the child was given every record
   * (the replay included): there a checkpoint with no sequence number means SHARD_END.
   */
  readonly shardEnded: boolean;
  /** Called after a checkpoint moved the shard's checkpoint forward. */
  readonly onAdvance?: () => void;
}

/**
 * The checkpointer one child sees: the consumer's, limited to what was actually written to that child.
 *
 * The consumer's checkpointer lets a checkpoint go as far as the last record *delivered to the
 * processor* — for a replacement child that is the end of the batch its predecessor died in (or
 * SHARD_END inside `shardEnded`), records the new child has not been sent yet while it works through
 * the replay. A no-argument checkpoint ("everything delivered so far", as the Java daemon defines it)
 * is therefore turned into an explicit checkpoint at the last record sent to this child, and an
 * explicit one past that record is refused (`IllegalArgumentException`), so a checkpoint never covers
 * records no child has processed.
 */
export class ChildCheckpointer implements Checkpointer {
  readonly #inner: Checkpointer;
  readonly #options: ChildCheckpointerOptions;

  constructor(inner: Checkpointer, options: ChildCheckpointerOptions) {
    this.#inner = inner;
    this.#options = options;
  }

  get lastCheckpoint(): ExtendedSequenceNumber {
    return this.#inner.lastCheckpoint;
  }

  async checkpoint(sequenceNumber?: string, subSequenceNumber?: number): Promise<void> {
    const target = this.#target(sequenceNumber, subSequenceNumber);
    if (target === null) return;
    const before = this.#inner.lastCheckpoint;
    await this.#inner.checkpoint(...target);
    if (this.#inner.lastCheckpoint.isAfter(before)) this.#options.onAdvance?.();
  }

  checkpointRecord(record: Pick<KinesisRecord, 'sequenceNumber' | 'subSequenceNumber'>): Promise<void> {
    return this.checkpoint(record.sequenceNumber, record.subSequenceNumber);
  }

  async prepareCheckpoint(
    sequenceNumber?: string,
    subSequenceNumber?: number,
  ): Promise<PreparedCheckpointer> {
    // The protocol has no prepared checkpoints; this keeps the same limits for library users.
    const current = this.#inner.lastCheckpoint;
    const target = this.#target(sequenceNumber, subSequenceNumber) ?? [
      current.sequenceNumber,
      current.subSequenceNumber,
    ];
    return this.#inner.prepareCheckpoint(...target);
  }

  /** The protocol has no transactions; a library user gets the consumer's, unchanged. */
  transaction<Transaction = unknown, T = void>(
    work: (transaction: Transaction, checkpoint: TransactionCheckpoint) => Promise<T> | T,
  ): Promise<T> {
    return this.#inner.transaction(work);
  }

  /**
   * The arguments for the consumer's checkpointer, or null when there is nothing to write (no record
   * after the last checkpoint was sent to this child).
   */
  #target(
    sequenceNumber: string | undefined,
    subSequenceNumber: number | undefined,
  ): [sequenceNumber: string | undefined, subSequenceNumber: number | undefined] | null {
    // In shardEnded the child has been sent everything: the consumer's own rules are the right ones.
    if (this.#options.shardEnded) return [sequenceNumber, subSequenceNumber];
    const lastSent = this.#options.lastSent();
    if (sequenceNumber === undefined) {
      // A sub-sequence number without a sequence number: let the consumer refuse it.
      if (subSequenceNumber !== undefined) return [sequenceNumber, subSequenceNumber];
      if (lastSent === null || !lastSent.isAfter(this.#inner.lastCheckpoint)) return null;
      return [lastSent.sequenceNumber, lastSent.subSequenceNumber];
    }
    const target = ExtendedSequenceNumber.tryOf(sequenceNumber, subSequenceNumber ?? 0);
    // A malformed value: the consumer refuses it with its own message.
    if (target === null) return [sequenceNumber, subSequenceNumber];
    const limit = lastSent ?? this.#inner.lastCheckpoint;
    if (target.isAfter(limit)) {
      throw new InvalidCheckpointError(
        `@kcl/multilang: shard ${this.#options.shardId}: checkpoint ${target} is past the last record sent to this child (${lastSent ?? 'none yet'}); checkpoint only records the child has received`,
      );
    }
    return [sequenceNumber, subSequenceNumber];
  }
}
