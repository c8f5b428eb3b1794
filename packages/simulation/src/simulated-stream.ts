import { hashKeyOfPartitionKey, MAX_HASH_KEY } from '@kcl/core';

/** One record as the simulated stream keeps it. */
export interface SimulatedRecord {
  readonly sequenceNumber: string;
  readonly position: bigint;
  readonly partitionKey: string;
  readonly data: Uint8Array;
  /** Epoch milliseconds. */
  readonly arrivedAt: number;
}

/** A shard of the simulated stream, with the lineage Kinesis reports. */
export interface SimulatedShard {
  readonly shardId: string;
  readonly parentShardId: string | null;
  readonly adjacentParentShardId: string | null;
  readonly startingHashKey: bigint;
  readonly endingHashKey: bigint;
  readonly startingSequenceNumber: bigint;
  endingSequenceNumber: bigint | null;
  readonly records: SimulatedRecord[];
  readonly childShardIds: string[];
}

const FIRST_SEQUENCE_NUMBER = 49_600_000_000_000_000_000n;
/** The distance between the sequence number spaces of the streams of one simulation. */
const SEQUENCE_SPACE = 1_000_000_000_000_000n;

export interface SimulatedStreamOptions {
  /**
   * Which sequence number space the stream uses (0, 1, …): streams of one simulation given different
   * spaces never share a sequence number, so a record read from the wrong stream is recognised.
   */
  readonly sequenceSpace?: number;
}

/**
 * The data of one simulated Kinesis stream: shards with hash key ranges, records with increasing
 * sequence numbers, and splits and merges that close parents and open children the way Kinesis does.
 */
export class SimulatedStream {
  readonly name: string;
  /** When the stream was created (epoch ms): DescribeStreamSummary's StreamCreationTimestamp. */
  readonly createdAt: number;
  readonly #shards = new Map<string, SimulatedShard>();
  readonly #now: () => number;
  #nextShard = 0;
  #deleted = false;
  #nextSequence: bigint;

  constructor(name: string, shardCount: number, now: () => number, options: SimulatedStreamOptions = {}) {
    this.name = name;
    this.#now = now;
    this.createdAt = now();
    this.#nextSequence = FIRST_SEQUENCE_NUMBER + BigInt(options.sequenceSpace ?? 0) * SEQUENCE_SPACE;
    const width = (MAX_HASH_KEY + 1n) / BigInt(shardCount);
    for (let index = 0; index < shardCount; index++) {
      const start = width * BigInt(index);
      const end = index === shardCount - 1 ? MAX_HASH_KEY : start + width - 1n;
      this.#open(start, end, null, null);
    }
  }

  /** True once the stream was deleted: every call about it then fails with ResourceNotFound. */
  get deleted(): boolean {
    return this.#deleted;
  }

  delete(): void {
    this.#deleted = true;
  }

  /** Every shard, open and closed, in creation order. */
  shards(): SimulatedShard[] {
    return [...this.#shards.values()];
  }

  openShards(): SimulatedShard[] {
    return this.shards().filter((shard) => shard.endingSequenceNumber === null);
  }

  shard(shardId: string): SimulatedShard | undefined {
    return this.#shards.get(shardId);
  }

  /** Appends a record to the open shard that owns the partition key's hash key. */
  put(
    partitionKey: string,
    data: Uint8Array,
  ): { readonly shardId: string; readonly record: SimulatedRecord } {
    const hashKey = hashKeyOfPartitionKey(partitionKey);
    const shard = this.openShards().find(
      (candidate) => candidate.startingHashKey <= hashKey && hashKey <= candidate.endingHashKey,
    );
    if (shard === undefined) throw new Error(`simulation: no open shard owns hash key ${hashKey}`);
    const position = this.#sequence();
    const record: SimulatedRecord = {
      sequenceNumber: position.toString(),
      position,
      partitionKey,
      data,
      arrivedAt: this.#now(),
    };
    shard.records.push(record);
    return { shardId: shard.shardId, record };
  }

  /** Splits an open shard in the middle of its range; returns the two children. */
  split(shardId: string): [SimulatedShard, SimulatedShard] {
    const parent = this.#openShard(shardId);
    const middle = parent.startingHashKey + (parent.endingHashKey - parent.startingHashKey) / 2n;
    this.#close(parent);
    const low = this.#open(parent.startingHashKey, middle, parent.shardId, null);
    const high = this.#open(middle + 1n, parent.endingHashKey, parent.shardId, null);
    parent.childShardIds.push(low.shardId, high.shardId);
    return [low, high];
  }

  /** Merges two open shards with adjacent ranges; returns the child. */
  merge(shardId: string, adjacentShardId: string): SimulatedShard {
    const first = this.#openShard(shardId);
    const second = this.#openShard(adjacentShardId);
    const [low, high] = first.startingHashKey < second.startingHashKey ? [first, second] : [second, first];
    if (low.endingHashKey + 1n !== high.startingHashKey) {
      throw new Error(`simulation: ${shardId} and ${adjacentShardId} are not adjacent`);
    }
    this.#close(first);
    this.#close(second);
    const child = this.#open(low.startingHashKey, high.endingHashKey, first.shardId, second.shardId);
    first.childShardIds.push(child.shardId);
    second.childShardIds.push(child.shardId);
    return child;
  }

  /** Pairs of open shards whose ranges touch (merge candidates), in key order. */
  adjacentOpenPairs(): Array<[SimulatedShard, SimulatedShard]> {
    const open = this.openShards().sort((a, b) => (a.startingHashKey < b.startingHashKey ? -1 : 1));
    const pairs: Array<[SimulatedShard, SimulatedShard]> = [];
    for (let index = 0; index + 1 < open.length; index++) {
      const low = open[index] as SimulatedShard;
      const high = open[index + 1] as SimulatedShard;
      if (low.endingHashKey + 1n === high.startingHashKey) pairs.push([low, high]);
    }
    return pairs;
  }

  #open(
    start: bigint,
    end: bigint,
    parentShardId: string | null,
    adjacentParentShardId: string | null,
  ): SimulatedShard {
    const shard: SimulatedShard = {
      shardId: `shardId-${String(this.#nextShard++).padStart(12, '0')}`,
      parentShardId,
      adjacentParentShardId,
      startingHashKey: start,
      endingHashKey: end,
      startingSequenceNumber: this.#sequence(),
      endingSequenceNumber: null,
      records: [],
      childShardIds: [],
    };
    this.#shards.set(shard.shardId, shard);
    return shard;
  }

  #close(shard: SimulatedShard): void {
    shard.endingSequenceNumber = this.#sequence();
  }

  #openShard(shardId: string): SimulatedShard {
    const shard = this.#shards.get(shardId);
    if (shard === undefined || shard.endingSequenceNumber !== null) {
      throw new Error(`simulation: ${shardId} is not an open shard`);
    }
    return shard;
  }

  #sequence(): bigint {
    this.#nextSequence += 1_000n;
    return this.#nextSequence;
  }
}
