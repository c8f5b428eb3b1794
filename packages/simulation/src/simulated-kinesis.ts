import {
  type ChildShard,
  DescribeStreamSummaryCommand,
  type DescribeStreamSummaryCommandOutput,
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
/** The region and account of the simulated streams' ARNs. */
export const SIMULATED_REGION = 'us-east-1';
export const SIMULATED_ACCOUNT = '123456789012';

/** The ARN Kinesis gives a simulated stream. */
export function simulatedStreamArn(streamName: string): string {
  return `arn:aws:kinesis:${SIMULATED_REGION}:${SIMULATED_ACCOUNT}:stream/${streamName}`;
}

/** The multi-stream identifier (`account:name:creationEpochSeconds`) of a simulated stream. */
export function simulatedStreamIdentifier(stream: SimulatedStream): string {
  return `${SIMULATED_ACCOUNT}:${stream.name}:${Math.floor(stream.createdAt / 1_000)}`;
}

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
 * The Kinesis API (ListShards, GetShardIterator, GetRecords, DescribeStreamSummary) over one or more
 * `SimulatedStream`s, addressed by name or ARN, with the service's rules that matter to a consumer:
 * paginated listings with shard filters, iterators that expire, five reads per second per shard,
 * records and the shard's end in one response, ChildShards at the end (or not), and injected faults.
 */
export class SimulatedKinesis {
  /** The first stream (the only one of a single-stream simulation). */
  readonly stream: SimulatedStream;
  readonly #streams = new Map<string, SimulatedStream>();
  readonly #clock: SimulationClock;
  readonly #random: RandomSource;
  readonly #reads = new Map<string, number[]>();
  faults: KinesisFaults = NO_KINESIS_FAULTS;
  #calls = 0;

  constructor(
    streams: SimulatedStream | readonly SimulatedStream[],
    clock: SimulationClock,
    random: RandomSource,
  ) {
    const list = Array.isArray(streams)
      ? (streams as readonly SimulatedStream[])
      : [streams as SimulatedStream];
    if (list[0] === undefined) throw new Error('simulation: a simulated Kinesis needs a stream');
    this.stream = list[0];
    for (const stream of list) this.addStream(stream);
    this.#clock = clock;
    this.#random = random;
  }

  /** Serves one more stream (a stream created under a name already served replaces it: a re-creation). */
  addStream(stream: SimulatedStream): void {
    this.#streams.set(stream.name, stream);
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
    const stream = this.#target(command);
    if (stream === undefined || stream.deleted) {
      throw new SimulatedServiceError(
        'ResourceNotFoundException',
        `Stream ${stream?.name ?? streamNameOf(command) ?? '(unnamed)'} not found`,
        400,
      );
    }
    if (command instanceof ListShardsCommand) return this.#listShards(stream, command.input);
    if (command instanceof GetShardIteratorCommand) return this.#getShardIterator(stream, command.input);
    if (command instanceof GetRecordsCommand) {
      return this.#getRecords(
        stream,
        command.input.ShardIterator ?? '',
        command.input.Limit ?? 10_000,
        faults,
      );
    }
    if (command instanceof DescribeStreamSummaryCommand) return this.#describeStreamSummary(stream);
    throw new SimulatedServiceError('UnknownOperationException', 'simulation: operation not simulated', 400);
  }

  /** The stream a command is about: its name or ARN, the stream of its iterator or page token. */
  #target(command: unknown): SimulatedStream | undefined {
    if (command instanceof GetRecordsCommand) {
      return this.#streams.get(iteratorParts(command.input.ShardIterator ?? '').streamName);
    }
    if (command instanceof ListShardsCommand && command.input.NextToken !== undefined) {
      return this.#streams.get(command.input.NextToken.split(':')[3] ?? '');
    }
    const name = streamNameOf(command);
    return name === undefined ? undefined : this.#streams.get(name);
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

  #listShards(
    stream: SimulatedStream,
    input: ListShardsCommandInput,
  ): { Shards: Shard[]; NextToken?: string } {
    let offset = 0;
    let filterType: string | undefined = input.ShardFilter?.Type;
    if (input.NextToken !== undefined) {
      const [, offsetText, filter] = input.NextToken.split(':');
      offset = Number(offsetText);
      filterType = filter === '' ? undefined : filter;
    }
    const shards = stream
      .shards()
      .filter((shard) => filterType !== 'AT_LATEST' || shard.endingSequenceNumber === null);
    const page = shards.slice(offset, offset + LIST_SHARDS_PAGE).map(describeShard);
    const next = offset + LIST_SHARDS_PAGE;
    return next < shards.length
      ? { Shards: page, NextToken: `page:${next}:${filterType ?? ''}:${stream.name}` }
      : { Shards: page };
  }

  #getShardIterator(stream: SimulatedStream, input: GetShardIteratorCommandInput): { ShardIterator: string } {
    const shard = stream.shard(input.ShardId ?? '');
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
    return { ShardIterator: this.#iterator(stream, shard.shardId, index) };
  }

  #getRecords(
    stream: SimulatedStream,
    iterator: string,
    limit: number,
    faults: KinesisFaults,
  ): Partial<
    Pick<GetRecordsCommandOutput, 'Records' | 'NextShardIterator' | 'MillisBehindLatest' | 'ChildShards'>
  > {
    const { shardId, index, issuedAt } = iteratorParts(iterator);
    const shard = stream.shard(shardId);
    if (shard === undefined) {
      throw new SimulatedServiceError('ResourceNotFoundException', `Shard ${shardId} not found`, 400);
    }
    const now = this.#clock.monotonicNow();
    if (now - issuedAt > ITERATOR_LIFETIME_MS || this.#random() < faults.expireIterator) {
      throw new SimulatedServiceError('ExpiredIteratorException', 'Iterator expired', 400);
    }
    const readsKey = `${stream.name}|${shardId}`;
    const reads = (this.#reads.get(readsKey) ?? []).filter((at) => now - at < 1_000);
    if (reads.length >= READS_PER_SHARD_PER_SECOND || this.#random() < faults.throttle) {
      this.#reads.set(readsKey, reads);
      throw new SimulatedServiceError(
        'ProvisionedThroughputExceededException',
        'Rate exceeded for shard',
        400,
      );
    }
    reads.push(now);
    this.#reads.set(readsKey, reads);
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
      const children = this.#childShards(stream, shard);
      return this.#random() < faults.dropChildShards ? output : { ...output, ChildShards: children };
    }
    return { ...output, NextShardIterator: this.#iterator(stream, shard.shardId, next) };
  }

  #describeStreamSummary(
    stream: SimulatedStream,
  ): Pick<DescribeStreamSummaryCommandOutput, 'StreamDescriptionSummary'> {
    return {
      StreamDescriptionSummary: {
        StreamName: stream.name,
        StreamARN: simulatedStreamArn(stream.name),
        StreamStatus: 'ACTIVE',
        StreamModeDetails: { StreamMode: 'PROVISIONED' },
        RetentionPeriodHours: 24,
        StreamCreationTimestamp: new Date(stream.createdAt),
        EnhancedMonitoring: [],
        OpenShardCount: stream.openShards().length,
        ConsumerCount: 0,
      },
    };
  }

  #childShards(stream: SimulatedStream, shard: SimulatedShard): ChildShard[] {
    return shard.childShardIds.map((childId) => {
      const child = stream.shard(childId) as SimulatedShard;
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

  #iterator(stream: SimulatedStream, shardId: string, index: number): string {
    return `sim|${shardId}|${index}|${this.#clock.monotonicNow()}|${stream.name}`;
  }
}

function iteratorParts(iterator: string): {
  readonly shardId: string;
  readonly index: number;
  readonly issuedAt: number;
  readonly streamName: string;
} {
  const [, shardId = '', indexText = '0', issuedText = '0', streamName = ''] = iterator.split('|');
  return { shardId, index: Number(indexText), issuedAt: Number(issuedText), streamName };
}

/** The stream a command names, by `StreamName` or by the name at the end of its `StreamARN`. */
function streamNameOf(command: unknown): string | undefined {
  const input = (command as { input?: { StreamName?: string; StreamARN?: string } }).input;
  if (input?.StreamName !== undefined) return input.StreamName;
  if (input?.StreamARN === undefined) return undefined;
  return input.StreamARN.startsWith(`arn:aws:kinesis:${SIMULATED_REGION}:${SIMULATED_ACCOUNT}:stream/`)
    ? input.StreamARN.split('/').pop()
    : undefined;
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
