import type { KinesisRecord } from '@kcl/consumer';
import { ExtendedSequenceNumber } from '@kcl/core';

export interface ReplayBatch {
  readonly records: readonly KinesisRecord[];
  readonly millisBehindLatest: number;
}

/** The position of a record, for comparing with checkpoints. */
export function positionOf(
  record: Pick<KinesisRecord, 'sequenceNumber' | 'subSequenceNumber'>,
): ExtendedSequenceNumber {
  return ExtendedSequenceNumber.of(record.sequenceNumber, record.subSequenceNumber);
}

/** The records after `checkpoint`: the ones a child has not made durable yet. */
export function recordsAfter(
  records: readonly KinesisRecord[],
  checkpoint: ExtendedSequenceNumber,
): KinesisRecord[] {
  if (checkpoint.isSentinel) return checkpoint.isShardEnd ? [] : [...records];
  return records.filter((record) => positionOf(record).isAfter(checkpoint));
}

/**
 * The records a child acknowledged (status received) but has not checkpointed yet. When the child
 * dies, its replacement gets them again before anything new, so no record is skipped even when the
 * child checkpoints only every few batches. Bounded by bytes; past the bound it stops keeping records
 * and says so (`complete` becomes false), and a replacement can no longer be given everything.
 */
export class ReplayBuffer {
  readonly #maxBytes: number;
  #batches: ReplayBatch[] = [];
  #bytes = 0;
  /** Set while records were left out: the last one left out. */
  #droppedUpTo: ExtendedSequenceNumber | null = null;

  constructor(maxBytes: number) {
    this.#maxBytes = maxBytes;
  }

  /** True while every acknowledged, not yet checkpointed record is kept. */
  get complete(): boolean {
    return this.#droppedUpTo === null;
  }

  get bytes(): number {
    return this.#bytes;
  }

  get recordCount(): number {
    let count = 0;
    for (const batch of this.#batches) count += batch.records.length;
    return count;
  }

  /** Keeps a batch the child acknowledged. */
  add(batch: ReplayBatch): void {
    if (batch.records.length === 0) return;
    const size = batchBytes(batch.records);
    if (this.#droppedUpTo !== null || this.#bytes + size > this.#maxBytes) {
      // Once one batch is left out, later ones are too: a replay with a hole in it would skip records.
      this.#droppedUpTo = positionOf(batch.records.at(-1) as KinesisRecord);
      return;
    }
    this.#batches.push(batch);
    this.#bytes += size;
  }

  /** Drops what the checkpoint covers. A checkpoint past every record left out makes the buffer complete again. */
  prune(checkpoint: ExtendedSequenceNumber): void {
    if (this.#droppedUpTo !== null && covers(checkpoint, this.#droppedUpTo)) this.#droppedUpTo = null;
    const kept: ReplayBatch[] = [];
    let bytes = 0;
    for (const batch of this.#batches) {
      const records = recordsAfter(batch.records, checkpoint);
      if (records.length === 0) continue;
      kept.push(records.length === batch.records.length ? batch : { ...batch, records });
      bytes += batchBytes(records);
    }
    this.#batches = kept;
    this.#bytes = bytes;
  }

  /** The batches to replay to a new child, each already trimmed to what follows `checkpoint`. */
  batchesAfter(checkpoint: ExtendedSequenceNumber): ReplayBatch[] {
    this.prune(checkpoint);
    return [...this.#batches];
  }

  clear(): void {
    this.#batches = [];
    this.#bytes = 0;
    this.#droppedUpTo = null;
  }
}

function covers(checkpoint: ExtendedSequenceNumber, position: ExtendedSequenceNumber): boolean {
  if (checkpoint.isShardEnd) return true;
  return !checkpoint.isSentinel && !checkpoint.isBefore(position);
}

function batchBytes(records: readonly KinesisRecord[]): number {
  let bytes = 0;
  for (const record of records)
    bytes += record.data.byteLength + record.partitionKey.length + record.sequenceNumber.length;
  return bytes;
}
