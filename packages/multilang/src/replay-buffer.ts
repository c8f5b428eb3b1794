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
 * Record bytes kept for replay by all the shards of a daemon together (`kcl.replayBufferTotalMaxBytes`),
 * so the daemon's memory does not grow with the number of shards it holds.
 */
export class ReplayMemoryBudget {
  readonly maxBytes: number;
  #usedBytes = 0;

  constructor(maxBytes: number) {
    this.maxBytes = maxBytes;
  }

  get usedBytes(): number {
    return this.#usedBytes;
  }

  /** Takes `bytes` if they fit; false (and nothing taken) when they do not. */
  tryReserve(bytes: number): boolean {
    if (this.#usedBytes + bytes > this.maxBytes) return false;
    this.#usedBytes += bytes;
    return true;
  }

  release(bytes: number): void {
    this.#usedBytes = Math.max(0, this.#usedBytes - bytes);
  }
}

/** Which bound made a replay buffer leave records out. */
export type ReplayLimit = 'shard' | 'daemon';

/**
 * The records a child acknowledged (status received) but has not checkpointed yet. When the child
 * dies, its replacement gets them again before anything new, so no record is skipped even when the
 * child checkpoints only every few batches. Bounded by bytes, per shard and (with a budget) across
 * the daemon; past either bound it stops keeping records and says so (`complete` becomes false), and a
 * replacement can no longer be given everything. Records are never held back from the child for
 * lack of room: a child that checkpoints only after more records would otherwise wait forever.
 */
export class ReplayBuffer {
  readonly #maxBytes: number;
  readonly #budget: ReplayMemoryBudget | null;
  #batches: ReplayBatch[] = [];
  #bytes = 0;
  /** Set while records were left out: the last one left out. */
  #droppedUpTo: ExtendedSequenceNumber | null = null;
  #limitReached: ReplayLimit | null = null;

  constructor(maxBytes: number, budget: ReplayMemoryBudget | null = null) {
    this.#maxBytes = maxBytes;
    this.#budget = budget;
  }

  /** True while every acknowledged, not yet checkpointed record is kept. */
  get complete(): boolean {
    return this.#droppedUpTo === null;
  }

  /** While records are left out: the bound that was reached first. */
  get limitReached(): ReplayLimit | null {
    return this.#droppedUpTo === null ? null : this.#limitReached;
  }

  get bytes(): number {
    return this.#bytes;
  }

  get recordCount(): number {
    let count = 0;
    for (const batch of this.#batches) count += batch.records.length;
    return count;
  }

  /** Keeps a batch the child acknowledged, if it fits. */
  add(batch: ReplayBatch): void {
    if (batch.records.length === 0) return;
    const size = batchBytes(batch.records);
    let limit: ReplayLimit | null = null;
    if (this.#droppedUpTo !== null) limit = this.#limitReached;
    else if (this.#bytes + size > this.#maxBytes) limit = 'shard';
    else if (this.#budget !== null && !this.#budget.tryReserve(size)) limit = 'daemon';
    if (limit !== null) {
      // Once one batch is left out, later ones are too: a replay with a hole in it would skip records.
      this.#droppedUpTo = positionOf(batch.records.at(-1) as KinesisRecord);
      this.#limitReached = limit;
      return;
    }
    this.#batches.push(batch);
    this.#bytes += size;
  }

  /** Drops what the checkpoint covers. A checkpoint past every record left out makes the buffer complete again. */
  prune(checkpoint: ExtendedSequenceNumber): void {
    if (this.#droppedUpTo !== null && covers(checkpoint, this.#droppedUpTo)) {
      this.#droppedUpTo = null;
      this.#limitReached = null;
    }
    const kept: ReplayBatch[] = [];
    let bytes = 0;
    for (const batch of this.#batches) {
      const records = recordsAfter(batch.records, checkpoint);
      if (records.length === 0) continue;
      kept.push(records.length === batch.records.length ? batch : { ...batch, records });
      bytes += batchBytes(records);
    }
    this.#batches = kept;
    this.#budget?.release(this.#bytes - bytes);
    this.#bytes = bytes;
  }

  /** The batches to replay to a new child, each already trimmed to what follows `checkpoint`. */
  batchesAfter(checkpoint: ExtendedSequenceNumber): ReplayBatch[] {
    this.prune(checkpoint);
    return [...this.#batches];
  }

  /** Forgets everything (the lease ended) and gives the bytes back to the budget. */
  clear(): void {
    this.#budget?.release(this.#bytes);
    this.#batches = [];
    this.#bytes = 0;
    this.#droppedUpTo = null;
    this.#limitReached = null;
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
