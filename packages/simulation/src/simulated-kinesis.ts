import {
  type ChildShard,
  GetRecordsCommand,
  type GetRecordsCommandOutput,
  GetShardIteratorCommand,
  type GetShardIteratorCommandInput,
  KinesisClient,
  ListShardsCommand,
  type ListShardsCommandInput,
  type Shard,
} from '@aws-sdk/client-kinesis';
import type { RandomSource } from '@kcl/core';
import type { SimulatedShard, SimulatedStream } from './simulated-stream.js';
import type { FreezableClock, SimulationClock } from './simulation-clock.js';

/** Probabilities (per call) and sizes of the faults the simulated Kinesis injects while they are set. */
export interface KinesisFaults {
  /** A GetRecords call is throttled. */
  readonly throttle: number;
  /** A call fails with a 500 (InternalFailureException). */
  readonly transient: number;
  /** A GetRecords call finds its iterator expired. */
  readonly expireIterator: number;
  /** A call never answers (until the caller aborts it). */
  readonly hang: number;
  /** A call takes `slowMs` longer. */
  readonly slow: number;
  readonly slowMs: number;
  /** A response that ends a shard comes without ChildShards. */
  readonly dropChildShards: number;
}

export const NO_KINESIS_FAULTS: KinesisFaults = {
  throttle: 0,
  transient: 0,
  expireIterator: 0,
  hang: 0,
  slow: 0,
  slowMs: 0,
  dropChildShards: 0,
};

/** Iterators live five minutes, as on Kinesis. */
const ITERATOR_LIFETIME_MS = 300_000;
/** GetRecords calls per shard per second before Kinesis throttles. */
const READS_PER_SHARD_PER_SECOND = 5;
const LIST_SHARDS_PAGE = 3;

class SimulatedServiceError extends Error {
  readonly $metadata: { readonly httpStatusCode: number };
  readonly $fault: 'client' | 'server';

  constructor(name: string, message: string, status: number) {
    super(message);
    this.name = name;
    this.$metadata = { httpStatusCode: status };
    this.$fault = status >= 500 ? 'server' : 'client';
  }
}

function abortError(): Error {
  const error = new Error('The operation was aborted');
  error.name = 'AbortError';
  return error;
}

/** The caller of a simulated Kinesis call: a process that can crash (its calls then never answer). */
export interface KinesisCaller {
  readonly clock: FreezableClock;
  /** Faults for this caller only, on top of the service-wide ones. */
  faults: KinesisFaults;
}

/**
 * The Kinesis API (ListShards, GetShardIterator, GetRecords) over a `SimulatedStream`, with the
 * service's rules that matter to a consumer: paginated listings with shard filters, iterators that
 * expire, five reads per second per shard, records and the shard's end in one response, ChildShards
 * at the end (or not), and injected faults.
 */
export class SimulatedKinesis {
  readonly stream: SimulatedStream;
  readonly #clock: SimulationClock;
  readonly #random: RandomSource;
  readonly #reads = new Map<string, number[]>();
  faults: KinesisFaults = NO_KINESIS_FAULTS;
  #calls = 0;

  constructor(stream: SimulatedStream, clock: SimulationClock, random: RandomSource) {
    this.stream = stream;
    this.#clock = clock;
    this.#random = random;
  }

  get calls(): number {
    return this.#calls;
  }

  /** A client for one simulated process. */
  client(caller: KinesisCaller): KinesisClient {
    return new SimulatedKinesisClient(this, caller);
  }

  /** @internal */
  async handle(command: unknown, signal: AbortSignal | undefined, caller: KinesisCaller): Promise<unknown> {
    this.#calls += 1;
    if (caller.clock.frozen) return new Promise(() => {});
    const faults = this.#combined(caller.faults);
    let latency = 2 + Math.floor(this.#random() * 8);
    if (this.#random() < faults.slow) latency += faults.slowMs;
    await caller.clock.sleep(latency, signal);
    if (caller.clock.frozen) return new Promise(() => {});
    if (signal?.aborted) throw abortError();
    if (this.#random() < faults.hang) {
      await new Promise<void>((resolve) => {
        if (signal === undefined) return;
        signal.addEventListener('abort', () => resolve(), { once: true });
      });
      throw abortError();
    }
    if (this.#random() < faults.transient) {
      throw new SimulatedServiceError('InternalFailureException', 'simulated internal failure', 500);
    }
    if (this.stream.deleted) {
      throw new SimulatedServiceError(
        'ResourceNotFoundException',
        `Stream ${this.stream.name} not found`,
        400,
      );
    }
    if (command instanceof ListShardsCommand) return this.#listShards(command.input);
    if (command instanceof GetShardIteratorCommand) return this.#getShardIterator(command.input);
    if (command instanceof GetRecordsCommand) {
      return this.#getRecords(command.input.ShardIterator ?? '', command.input.Limit ?? 10_000, faults);
    }
    throw new SimulatedServiceError('UnknownOperationException', 'simulation: operation not simulated', 400);
  }

  #combined(own: KinesisFaults): KinesisFaults {
    const global = this.faults;
    return {
      throttle: Math.max(global.throttle, own.throttle),
      transient: Math.max(global.transient, own.transient),
      expireIterator: Math.max(global.expireIterator, own.expireIterator),
      hang: Math.max(global.hang, own.hang),
      slow: Math.max(global.slow, own.slow),
      slowMs: Math.max(global.slowMs, own.slowMs),
      dropChildShards: Math.max(global.dropChildShards, own.dropChildShards),
    };
  }

  #listShards(input: ListShardsCommandInput): { Shards: Shard[]; NextToken?: string } {
    let offset = 0;
    let filterType: string | undefined = input.ShardFilter?.Type;
    if (input.NextToken !== undefined) {
      const [, offsetText, filter] = input.NextToken.split(':');
      offset = Number(offsetText);
      filterType = filter === '' ? undefined : filter;
    }
    const shards = this.stream
      .shards()
      .filter((shard) => filterType !== 'AT_LATEST' || shard.endingSequenceNumber === null);
    const page = shards.slice(offset, offset + LIST_SHARDS_PAGE).map(describeShard);
    const next = offset + LIST_SHARDS_PAGE;
    return next < shards.length
      ? { Shards: page, NextToken: `page:${next}:${filterType ?? ''}` }
      : { Shards: page };
  }

  #getShardIterator(input: GetShardIteratorCommandInput): { ShardIterator: string } {
    const shard = this.stream.shard(input.ShardId ?? '');
    if (shard === undefined) {
      throw new SimulatedServiceError('ResourceNotFoundException', `Shard ${input.ShardId} not found`, 400);
    }
    let index: number;
    const target = input.StartingSequenceNumber === undefined ? null : BigInt(input.StartingSequenceNumber);
    switch (input.ShardIteratorType) {
      case 'TRIM_HORIZON':
        index = 0;
        break;
      case 'LATEST':
        index = shard.records.length;
        break;
      case 'AT_SEQUENCE_NUMBER':
        index = indexWhere(shard, (position) => position >= (target ?? 0n));
        break;
      case 'AFTER_SEQUENCE_NUMBER':
        index = indexWhere(shard, (position) => position > (target ?? 0n));
        break;
      case 'AT_TIMESTAMP': {
        const at = input.Timestamp?.getTime() ?? 0;
        const found = shard.records.findIndex((record) => record.arrivedAt >= at);
        index = found === -1 ? shard.records.length : found;
        break;
      }
      default:
        throw new SimulatedServiceError('InvalidArgumentException', 'unknown iterator type', 400);
    }
    return { ShardIterator: this.#iterator(shard.shardId, index) };
  }

  #getRecords(
    iterator: string,
    limit: number,
    faults: KinesisFaults,
  ): Partial<
    Pick<GetRecordsCommandOutput, 'Records' | 'NextShardIterator' | 'MillisBehindLatest' | 'ChildShards'>
  > {
    const [, shardId = '', indexText = '0', issuedText = '0'] = iterator.split('|');
    const shard = this.stream.shard(shardId);
    if (shard === undefined) {
      throw new SimulatedServiceError('ResourceNotFoundException', `Shard ${shardId} not found`, 400);
    }
    const now = this.#clock.monotonicNow();
    if (now - Number(issuedText) > ITERATOR_LIFETIME_MS || this.#random() < faults.expireIterator) {
      throw new SimulatedServiceError('ExpiredIteratorException', 'Iterator expired', 400);
    }
    const reads = (this.#reads.get(shardId) ?? []).filter((at) => now - at < 1_000);
    if (reads.length >= READS_PER_SHARD_PER_SECOND || this.#random() < faults.throttle) {
      this.#reads.set(shardId, reads);
      throw new SimulatedServiceError(
        'ProvisionedThroughputExceededException',
        'Rate exceeded for shard',
        400,
      );
    }
    reads.push(now);
    this.#reads.set(shardId, reads);
    const index = Number(indexText);
    // Kinesis returns fewer records than asked now and then; so does the simulation.
    const cap = this.#random() < 0.2 ? 1 + Math.floor(this.#random() * limit) : limit;
    const records = shard.records.slice(index, index + Math.min(limit, cap));
    const next = index + records.length;
    const closed = shard.endingSequenceNumber !== null;
    const output = {
      Records: records.map((record) => ({
        SequenceNumber: record.sequenceNumber,
        PartitionKey: record.partitionKey,
        Data: record.data,
        ApproximateArrivalTimestamp: new Date(record.arrivedAt),
      })),
      MillisBehindLatest:
        next >= shard.records.length
          ? 0
          : Math.max(0, this.#clock.now() - (shard.records[next]?.arrivedAt ?? this.#clock.now())),
    };
    if (closed && next >= shard.records.length) {
      const children = this.#childShards(shard);
      return this.#random() < faults.dropChildShards ? output : { ...output, ChildShards: children };
    }
    return { ...output, NextShardIterator: this.#iterator(shard.shardId, next) };
  }

  #childShards(shard: SimulatedShard): ChildShard[] {
    return shard.childShardIds.map((childId) => {
      const child = this.stream.shard(childId) as SimulatedShard;
      return {
        ShardId: child.shardId,
        ParentShards: [child.parentShardId, child.adjacentParentShardId].filter(
          (id): id is string => id !== null,
        ),
        HashKeyRange: {
          StartingHashKey: child.startingHashKey.toString(),
          EndingHashKey: child.endingHashKey.toString(),
        },
      };
    });
  }

  #iterator(shardId: string, index: number): string {
    return `sim|${shardId}|${index}|${this.#clock.monotonicNow()}`;
  }
}

function indexWhere(shard: SimulatedShard, predicate: (position: bigint) => boolean): number {
  const found = shard.records.findIndex((record) => predicate(record.position));
  return found === -1 ? shard.records.length : found;
}

function describeShard(shard: SimulatedShard): Shard {
  return {
    ShardId: shard.shardId,
    ...(shard.parentShardId === null ? {} : { ParentShardId: shard.parentShardId }),
    ...(shard.adjacentParentShardId === null ? {} : { AdjacentParentShardId: shard.adjacentParentShardId }),
    HashKeyRange: {
      StartingHashKey: shard.startingHashKey.toString(),
      EndingHashKey: shard.endingHashKey.toString(),
    },
    SequenceNumberRange: {
      StartingSequenceNumber: shard.startingSequenceNumber.toString(),
      ...(shard.endingSequenceNumber === null
        ? {}
        : { EndingSequenceNumber: shard.endingSequenceNumber.toString() }),
    },
  };
}

/**
 * A real `KinesisClient` whose `send` answers from the simulation instead of the network, so the
 * consumer's own Kinesis code (pagination, iterators, error classification) runs unchanged.
 */
class SimulatedKinesisClient extends KinesisClient {
  readonly #service: SimulatedKinesis;
  readonly #caller: KinesisCaller;

  constructor(service: SimulatedKinesis, caller: KinesisCaller) {
    super({ region: 'us-east-1', credentials: { accessKeyId: 'simulated', secretAccessKey: 'simulated' } });
    this.#service = service;
    this.#caller = caller;
  }

  // biome-ignore lint/suspicious/noExplicitAny: overrides the SDK's overloaded send
  override send(command: any, options?: any): any {
    const signal = (options as { abortSignal?: AbortSignal } | undefined)?.abortSignal;
    return this.#service.handle(command, signal, this.#caller);
  }
}
