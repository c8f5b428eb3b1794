import {
  type ChildShard,
  DescribeStreamSummaryCommand,
  GetRecordsCommand,
  type GetRecordsCommandOutput,
  GetShardIteratorCommand,
  type GetShardIteratorCommandInput,
  type KinesisClient,
  type _Record as KinesisSdkRecord,
  ListShardsCommand,
  type Shard,
  type ShardFilter,
  type StartingPosition,
  SubscribeToShardCommand,
} from '@aws-sdk/client-kinesis';
import type { Clock, ExtendedSequenceNumber, RandomSource } from '@kcl/core';
import { KclError } from '@kcl/core';
import { linkSignals } from '../abort-link.js';
import { Backoff } from '../backoff.js';
import { withDeadline } from '../deadline.js';
import { isRetryableKinesisError, KinesisCallTimeoutError } from './kinesis-errors.js';

/** Where a shard iterator starts. */
export type IteratorPosition =
  | { readonly type: 'TRIM_HORIZON' }
  | { readonly type: 'LATEST' }
  | { readonly type: 'AT_TIMESTAMP'; readonly timestamp: Date }
  | { readonly type: 'AT_SEQUENCE_NUMBER'; readonly sequenceNumber: string }
  | { readonly type: 'AFTER_SEQUENCE_NUMBER'; readonly sequenceNumber: string };

/**
 * Where reading a shard starts, from its lease's checkpoint: a sentinel as it says (a lease at
 * SHARD_END reads from the start), a sequence number at that record (the records up to the checkpoint
 * are dropped before delivery). AT_TIMESTAMP reads from the time it carries, or else from the
 * application's initial timestamp; without one
 * the shard is read from TRIM_HORIZON, and `onNoTimestamp` is told.
 */
export function startPositionOf(
  checkpoint: ExtendedSequenceNumber,
  initialTimestamp: Date | null,
  onNoTimestamp: () => void,
): IteratorPosition {
  switch (checkpoint.sentinel) {
    case 'TRIM_HORIZON':
      return { type: 'TRIM_HORIZON' };
    case 'LATEST':
      return { type: 'LATEST' };
    case 'AT_TIMESTAMP':
      // A lease reset to a time (`kcl reset --to <time>`) carries its own.
      if (checkpoint.timestamp !== null) return { type: 'AT_TIMESTAMP', timestamp: checkpoint.timestamp };
      if (initialTimestamp === null) {
        onNoTimestamp();
        return { type: 'TRIM_HORIZON' };
      }
      return { type: 'AT_TIMESTAMP', timestamp: initialTimestamp };
    case 'SHARD_END':
      return { type: 'TRIM_HORIZON' };
    default:
      return { type: 'AT_SEQUENCE_NUMBER', sequenceNumber: checkpoint.sequenceNumber };
  }
}

export type StreamIdentity = { readonly streamName: string } | { readonly streamArn: string };

export interface KinesisStreamOptions {
  readonly clock: Clock;
  readonly random: RandomSource;
  /** Attempts for ListShards when throttled or failing transiently (the Java KCL uses 50 × 1.5 s). */
  readonly listShardsAttempts?: number;
  /** The longest one call may take before it is aborted (and fails as a transient error). Default 30 000. */
  readonly callTimeoutMs?: number;
}

/** One event of a SubscribeToShard subscription (enhanced fan-out). */
export interface ShardEvent {
  readonly records: readonly KinesisSdkRecord[];
  /** Where the subscription got to; null at the shard's end (then `childShards` names its children). */
  readonly continuationSequenceNumber: string | null;
  readonly millisBehindLatest: number;
  readonly childShards: readonly ChildShard[];
}

/** What DescribeStreamSummary tells of a stream: its name, ARN and creation time. */
export interface StreamDescription {
  readonly streamName: string;
  readonly streamArn: string;
  readonly createdAt: Date;
}

/** The calls the runtime makes against one stream. `KinesisStream` is the implementation. */
export interface StreamReader {
  /** A short name for logs. */
  readonly name: string;
  listShards(filter?: ShardFilter, signal?: AbortSignal): Promise<Shard[]>;
  getShardIterator(shardId: string, position: IteratorPosition, signal?: AbortSignal): Promise<string>;
  getRecords(
    shardIterator: string,
    limit: number,
    signal?: AbortSignal,
  ): Promise<
    Pick<GetRecordsCommandOutput, 'Records' | 'NextShardIterator' | 'MillisBehindLatest' | 'ChildShards'>
  >;
  /**
   * Subscribes a registered stream consumer to a shard (enhanced fan-out): resolves once Kinesis
   * answered, to the events as they come; `signal` ends the subscription. An error event is thrown
   * from the iteration.
   */
  subscribeToShard?(
    consumerArn: string,
    shardId: string,
    position: IteratorPosition,
    signal: AbortSignal,
  ): Promise<AsyncIterable<ShardEvent>>;
}

/** The Kinesis calls of one stream, named by name or ARN. */
export class KinesisStream implements StreamReader {
  readonly client: KinesisClient;
  readonly identity: StreamIdentity;
  readonly #clock: Clock;
  readonly #random: RandomSource;
  readonly #listShardsAttempts: number;
  readonly #callTimeoutMs: number;

  constructor(client: KinesisClient, identity: StreamIdentity, options: KinesisStreamOptions) {
    this.client = client;
    this.identity = identity;
    this.#clock = options.clock;
    this.#random = options.random;
    this.#listShardsAttempts = options.listShardsAttempts ?? 20;
    this.#callTimeoutMs = options.callTimeoutMs ?? 30_000;
  }

  /** Sends one command with the call deadline; the caller's signal aborts it too. */
  #send<T>(
    operation: string,
    signal: AbortSignal | undefined,
    send: (options: { abortSignal?: AbortSignal }) => Promise<T>,
  ): Promise<T> {
    return withDeadline(
      this.#clock,
      this.#callTimeoutMs,
      async (deadline) => {
        const link = linkSignals(signal, deadline);
        try {
          return await send({ abortSignal: link.signal });
        } finally {
          link.dispose();
        }
      },
      () => new KinesisCallTimeoutError(operation, this.#callTimeoutMs),
    );
  }

  /** A short name for logs. */
  get name(): string {
    return 'streamName' in this.identity ? this.identity.streamName : this.identity.streamArn;
  }

  #streamParameters(): { StreamName: string } | { StreamARN: string } {
    return 'streamName' in this.identity
      ? { StreamName: this.identity.streamName }
      : { StreamARN: this.identity.streamArn };
  }

  /**
   * Every shard of the stream (all pages), optionally filtered. Throttling and transient failures are
   * retried with backoff; other errors are thrown.
   */
  async listShards(filter?: ShardFilter, signal?: AbortSignal): Promise<Shard[]> {
    const backoff = new Backoff({ initialMs: 500, maxMs: 5_000, random: this.#random });
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.#listAllShards(filter, signal);
      } catch (error) {
        if (!isRetryableKinesisError(error) || attempt >= this.#listShardsAttempts || signal?.aborted)
          throw error;
        await this.#clock.sleep(backoff.next(), signal);
      }
    }
  }

  async #listAllShards(filter: ShardFilter | undefined, signal: AbortSignal | undefined): Promise<Shard[]> {
    const shards: Shard[] = [];
    let nextToken: string | undefined;
    do {
      const token = nextToken;
      const page = await this.#send('ListShards', signal, (options) =>
        this.client.send(
          token === undefined
            ? new ListShardsCommand({
                ...this.#streamParameters(),
                ...(filter === undefined ? {} : { ShardFilter: filter }),
              })
            : new ListShardsCommand({ NextToken: token }),
          options,
        ),
      );
      shards.push(...(page.Shards ?? []));
      nextToken = page.NextToken;
    } while (nextToken !== undefined);
    return shards;
  }

  /** DescribeStreamSummary: the stream's name, ARN and creation time (a re-created stream has a new one). */
  async describe(signal?: AbortSignal): Promise<StreamDescription> {
    const output = await this.#send('DescribeStreamSummary', signal, (options) =>
      this.client.send(new DescribeStreamSummaryCommand(this.#streamParameters()), options),
    );
    const summary = output.StreamDescriptionSummary;
    if (
      summary?.StreamName === undefined ||
      summary.StreamARN === undefined ||
      summary.StreamCreationTimestamp === undefined
    ) {
      throw new KclError(
        'KINESIS_INCOMPLETE_DESCRIPTION',
        `@kcl/consumer: DescribeStreamSummary of ${this.name} did not name the stream, its ARN and its creation time; retrying`,
        { retryable: true },
      );
    }
    return {
      streamName: summary.StreamName,
      streamArn: summary.StreamARN,
      createdAt: summary.StreamCreationTimestamp,
    };
  }

  async getShardIterator(shardId: string, position: IteratorPosition, signal?: AbortSignal): Promise<string> {
    const input: GetShardIteratorCommandInput = {
      ...this.#streamParameters(),
      ShardId: shardId,
      ShardIteratorType: position.type,
      ...(position.type === 'AT_TIMESTAMP' ? { Timestamp: position.timestamp } : {}),
      ...(position.type === 'AT_SEQUENCE_NUMBER' || position.type === 'AFTER_SEQUENCE_NUMBER'
        ? { StartingSequenceNumber: position.sequenceNumber }
        : {}),
    };
    const output = await this.#send('GetShardIterator', signal, (options) =>
      this.client.send(new GetShardIteratorCommand(input), options),
    );
    if (output.ShardIterator === undefined) {
      throw new KclError(
        'KINESIS_NO_ITERATOR',
        `@kcl/consumer: GetShardIterator returned no iterator for ${shardId}; retrying`,
        { retryable: true },
      );
    }
    return output.ShardIterator;
  }

  getRecords(shardIterator: string, limit: number, signal?: AbortSignal): Promise<GetRecordsCommandOutput> {
    return this.#send('GetRecords', signal, (options) =>
      this.client.send(
        new GetRecordsCommand({
          ShardIterator: shardIterator,
          Limit: limit,
          ...('streamArn' in this.identity ? { StreamARN: this.identity.streamArn } : {}),
        }),
        options,
      ),
    );
  }

  async subscribeToShard(
    consumerArn: string,
    shardId: string,
    position: IteratorPosition,
    signal: AbortSignal,
  ): Promise<AsyncIterable<ShardEvent>> {
    const startingPosition: StartingPosition = {
      Type: position.type,
      ...(position.type === 'AT_TIMESTAMP' ? { Timestamp: position.timestamp } : {}),
      ...(position.type === 'AT_SEQUENCE_NUMBER' || position.type === 'AFTER_SEQUENCE_NUMBER'
        ? { SequenceNumber: position.sequenceNumber }
        : {}),
    };
    // The call deadline covers the answer only (it is not armed once the answer came); the events then
    // flow until `signal` ends the subscription, so the link to it is kept for the stream's life.
    const output = await withDeadline(
      this.#clock,
      this.#callTimeoutMs,
      async (deadline) => {
        const link = linkSignals(signal, deadline);
        try {
          return await this.client.send(
            new SubscribeToShardCommand({
              ConsumerARN: consumerArn,
              ShardId: shardId,
              StartingPosition: startingPosition,
            }),
            { abortSignal: link.signal },
          );
        } catch (error) {
          link.dispose();
          throw error;
        }
      },
      () => new KinesisCallTimeoutError('SubscribeToShard', this.#callTimeoutMs),
    );
    const stream = output.EventStream;
    if (stream === undefined) {
      throw new KclError(
        'KINESIS_NO_EVENT_STREAM',
        `@kcl/consumer: SubscribeToShard on ${shardId} returned no event stream; retrying`,
        { retryable: true },
      );
    }
    return (async function* events(): AsyncGenerator<ShardEvent> {
      for await (const member of stream) {
        const event = member.SubscribeToShardEvent;
        if (event === undefined) {
          const failure = Object.values(member).find((value) => value !== undefined);
          throw (
            failure ??
            new KclError(
              'KINESIS_UNKNOWN_EVENT',
              `@kcl/consumer: SubscribeToShard on ${shardId} sent an unknown event; resubscribing`,
              { retryable: true },
            )
          );
        }
        yield {
          records: event.Records ?? [],
          continuationSequenceNumber: event.ContinuationSequenceNumber ?? null,
          millisBehindLatest: event.MillisBehindLatest ?? 0,
          childShards: event.ChildShards ?? [],
        };
      }
    })();
  }
}
