import type { _Record as KinesisSdkRecord, Shard } from '@aws-sdk/client-kinesis';
import { ManualClock } from '@kcl/testkit';
import { describe, expect, it } from 'vitest';
import type { IteratorPosition, ShardEvent, StreamReader } from './kinesis-stream.js';
import type { FetchedBatch } from './record-fetcher.js';
import { ShardSubscriber, type ShardSubscriberOptions, type SubscriptionIssue } from './shard-subscriber.js';

// ShardSubscriber with a scripted SubscribeToShard (the faults Kinesis can send); the real service is
// exercised in test/fanout.test.ts against kinesis-local.

const record = (sequence: number): KinesisSdkRecord => ({
  SequenceNumber: String(1000 + sequence),
  Data: new TextEncoder().encode(`r${sequence}`),
  PartitionKey: 'k',
});
const event = (from: number, to: number, continuation: string | null = String(1000 + to)): ShardEvent => ({
  records: Array.from({ length: to - from + 1 }, (_, index) => record(from + index)),
  continuationSequenceNumber: continuation,
  millisBehindLatest: 0,
  childShards: [],
});

const shard = (shardId: string, endingSequenceNumber?: string): Shard => ({
  ShardId: shardId,
  HashKeyRange: { StartingHashKey: '0', EndingHashKey: '1' },
  SequenceNumberRange: {
    StartingSequenceNumber: '1000',
    ...(endingSequenceNumber === undefined ? {} : { EndingSequenceNumber: endingSequenceNumber }),
  },
});

function named(name: string): Error {
  const error = new Error(name);
  error.name = name;
  return error;
}

/** One subscription's script: events, then an error, an end, or silence. */
interface Script {
  readonly events: readonly ShardEvent[];
  readonly after?: 'end' | 'hang' | Error;
  /** Rejects the call itself. */
  readonly refuse?: Error;
}

function scriptedStream(scripts: Script[], shards: Shard[] = [shard('shard-0')]) {
  const subscriptions: IteratorPosition[] = [];
  /** How many events each subscription had handed out when it was read last. */
  const reads: number[] = [];
  const stream: StreamReader = {
    name: 'scripted',
    listShards: async () => shards,
    getShardIterator: async () => 'iterator',
    getRecords: async () => ({ Records: [], NextShardIterator: 'next', MillisBehindLatest: 0 }),
    subscribeToShard: async (_arn, _shardId, position, signal) => {
      const index = subscriptions.length;
      subscriptions.push(position);
      const script = scripts.shift() ?? { events: [], after: 'hang' };
      if (script.refuse !== undefined) throw script.refuse;
      reads[index] = 0;
      return (async function* events(): AsyncGenerator<ShardEvent> {
        for (const item of script.events) {
          reads[index] = (reads[index] ?? 0) + 1;
          yield item;
        }
        if (script.after instanceof Error) throw script.after;
        if (script.after === 'hang') {
          await new Promise<void>((resolve) =>
            signal.addEventListener('abort', () => resolve(), { once: true }),
          );
        }
      })();
    },
  };
  return { stream, subscriptions, reads };
}

function subscriberOf(
  stream: StreamReader,
  clock: ManualClock,
  issues: SubscriptionIssue[] = [],
  hooks: Pick<ShardSubscriberOptions, 'onSubscribed' | 'onEvent' | 'onGetRecords'> = {},
) {
  return new ShardSubscriber({ ...optionsOf(stream, clock, issues), ...hooks });
}

function optionsOf(
  stream: StreamReader,
  clock: ManualClock,
  issues: SubscriptionIssue[] = [],
): ShardSubscriberOptions {
  return {
    stream,
    consumerArn: 'arn:consumer',
    shardId: 'shard-0',
    start: { type: 'TRIM_HORIZON' },
    clock,
    random: () => 0.5,
    backoff: { initialMs: 100, maxMs: 1_000 },
    subscriptionLifetimeMs: 60_000,
    idleTimeoutMs: 5_000,
    closedShardCheckIntervalMs: 1_000,
    polling: { maxRecords: 100, pollIntervalMs: 100 },
    onIssue: (issue: SubscriptionIssue) => issues.push(issue),
  };
}

const sequences = (batch: FetchedBatch | null): number[] =>
  (batch?.records ?? []).map((item) => Number(item.SequenceNumber) - 1000);

async function take(subscriber: ShardSubscriber, clock: ManualClock, count: number): Promise<number[]> {
  const seen: number[] = [];
  while (seen.length < count) {
    const batch = subscriber.next();
    await clock.advance(1_000);
    seen.push(...sequences(await batch));
  }
  return seen;
}

describe('ShardSubscriber', () => {
  it('reads the next event only once the previous one was taken', async () => {
    const clock = new ManualClock();
    const { stream, reads } = scriptedStream([
      { events: [event(1, 2), event(3, 4), event(5, 6)], after: 'hang' },
    ]);
    const subscriber = subscriberOf(stream, clock);
    subscriber.start();
    await clock.advance(10);
    // One event buffered, none read ahead of it.
    expect(reads[0]).toBe(1);
    expect(sequences(await subscriber.next())).toEqual([1, 2]);
    await clock.advance(10);
    expect(reads[0]).toBe(2);
    await subscriber.stop();
  });

  it('resubscribes after the last record when a subscription ends or fails, delivering nothing twice', async () => {
    const clock = new ManualClock();
    const issues: SubscriptionIssue[] = [];
    const { stream, subscriptions } = scriptedStream([
      { events: [event(1, 2)], after: 'end' },
      // Kinesis may repeat records a new subscription already had: they are dropped.
      { events: [event(2, 4)], after: named('LimitExceededException') },
      { events: [], refuse: named('ResourceInUseException') },
      { events: [], refuse: Object.assign(named('Error'), { code: 'ECONNRESET' }) },
      { events: [event(5, 6)], after: 'hang' },
    ]);
    const subscriber = subscriberOf(stream, clock, issues);
    subscriber.start();
    expect(await take(subscriber, clock, 6)).toEqual([1, 2, 3, 4, 5, 6]);
    expect(subscriptions.slice(1)).toEqual([
      { type: 'AFTER_SEQUENCE_NUMBER', sequenceNumber: '1002' },
      { type: 'AFTER_SEQUENCE_NUMBER', sequenceNumber: '1004' },
      { type: 'AFTER_SEQUENCE_NUMBER', sequenceNumber: '1004' },
      { type: 'AFTER_SEQUENCE_NUMBER', sequenceNumber: '1004' },
    ]);
    expect(issues.map((issue) => issue.kind)).toEqual(['throttled', 'resource-in-use', 'transient']);
    // Another subscription of the consumer is waited out for at least a second.
    expect(issues[1]?.backoffMs).toBeGreaterThanOrEqual(1_000);
    await subscriber.stop();
  });

  it('reports each subscription started (with the time its call took) and each event, and no GetRecords', async () => {
    const clock = new ManualClock();
    const issues: SubscriptionIssue[] = [];
    const { stream } = scriptedStream([
      { events: [event(1, 2)], after: named('LimitExceededException') },
      { events: [], refuse: named('ResourceInUseException') },
      { events: [event(2, 4), { ...event(1, 0, '1004'), records: [] }], after: 'hang' },
    ]);
    const subscribe = stream.subscribeToShard;
    stream.subscribeToShard = async (...args) => {
      await clock.sleep(30);
      return (subscribe as NonNullable<StreamReader['subscribeToShard']>)(...args);
    };
    const subscribed: number[] = [];
    const events: number[] = [];
    const getRecords: number[] = [];
    const subscriber = subscriberOf(stream, clock, issues, {
      onSubscribed: (durationMs) => subscribed.push(durationMs),
      onEvent: (_waitedMs, recordCount) => events.push(recordCount),
      onGetRecords: (_durationMs, recordCount) => getRecords.push(recordCount),
    });
    subscriber.start();
    expect(await take(subscriber, clock, 4)).toEqual([1, 2, 3, 4]);
    await subscriber.next();
    // The refused call started no subscription; the others took the 30 ms the script waits.
    expect(subscribed).toEqual([30, 30]);
    // Repeated records are not counted again; the heartbeat is an event with none.
    expect(events).toEqual([2, 2, 0]);
    expect(getRecords).toEqual([]);
    expect(issues.map((issue) => `${issue.operation}:${issue.kind}`)).toEqual([
      'SubscribeToShard:throttled',
      'SubscribeToShard:resource-in-use',
    ]);
    await subscriber.stop();
  });

  it('starts a subscription again when it delivers nothing for idleTimeoutMs', async () => {
    const clock = new ManualClock();
    const issues: SubscriptionIssue[] = [];
    const { stream, subscriptions } = scriptedStream([
      { events: [event(1, 1)], after: 'hang' },
      { events: [event(2, 2)], after: 'hang' },
    ]);
    const subscriber = subscriberOf(stream, clock, issues);
    subscriber.start();
    expect(sequences(await subscriber.next())).toEqual([1]);
    const next = subscriber.next();
    await clock.advance(4_999);
    expect(subscriptions).toHaveLength(1);
    await clock.advance(1);
    expect(sequences(await next)).toEqual([2]);
    expect(subscriptions).toHaveLength(2);
    expect(issues.map((issue) => issue.kind)).toEqual(['idle']);
    await subscriber.stop();
  });

  it('ends the shard at the final event, with its children', async () => {
    const clock = new ManualClock();
    const final: ShardEvent = {
      ...event(3, 3, null),
      childShards: [{ ShardId: 'shard-1', ParentShards: ['shard-0'], HashKeyRange: undefined }],
    };
    const { stream } = scriptedStream([{ events: [event(1, 2), final], after: 'hang' }]);
    const subscriber = subscriberOf(stream, clock);
    subscriber.start();
    expect(sequences(await subscriber.next())).toEqual([1, 2]);
    const last = await subscriber.next();
    expect(sequences(last)).toEqual([3]);
    expect(last?.shardEnd?.childShards.map((child) => child.ShardId)).toEqual(['shard-1']);
    expect(await subscriber.next()).toBeNull();
    await subscriber.stop();
  });

  it('fails on ResourceNotFound while the shard is listed (the consumer is gone), ends the shard when it is not', async () => {
    const clock = new ManualClock();
    const listed = scriptedStream([{ events: [], refuse: named('ResourceNotFoundException') }]);
    let gone = 0;
    const failing = new ShardSubscriber({
      ...optionsOf(listed.stream, clock),
      onConsumerGone: () => {
        gone += 1;
      },
    });
    failing.start();
    await expect(failing.next()).rejects.toMatchObject({ code: 'STREAM_CONSUMER_GONE' });
    expect(gone).toBe(1);
    await failing.stop();

    const deleted = scriptedStream([{ events: [], refuse: named('ResourceNotFoundException') }], []);
    const ending = subscriberOf(deleted.stream, clock);
    ending.start();
    expect((await ending.next())?.shardEnd).toEqual({ childShards: [], gone: true });
    await ending.stop();
  });

  it('reads a closed shard that the subscription never ends to its end with GetRecords', async () => {
    const clock = new ManualClock();
    const issues: SubscriptionIssue[] = [];
    const empty = (at: number): ShardEvent => ({ ...event(1, 0, String(at)), records: [] });
    const { stream } = scriptedStream(
      [{ events: [event(1, 2), empty(1002), empty(1002), empty(1002)], after: 'hang' }],
      [shard('shard-0', '1003')],
    );
    const positions: string[] = [];
    stream.getShardIterator = async (_shardId, position) => {
      positions.push(position.type === 'AFTER_SEQUENCE_NUMBER' ? position.sequenceNumber : position.type);
      return 'tail';
    };
    stream.getRecords = async () => ({
      Records: [record(3)],
      ChildShards: [{ ShardId: 'shard-1', ParentShards: ['shard-0'], HashKeyRange: undefined }],
    });
    const getRecords: number[] = [];
    const subscriber = subscriberOf(stream, clock, issues, {
      onGetRecords: (_durationMs, recordCount) => getRecords.push(recordCount),
    });
    subscriber.start();
    const seen: FetchedBatch[] = [];
    while (seen.at(-1)?.shardEnd == null) {
      const next = subscriber.next();
      await clock.advance(1_000);
      const batch = await next;
      if (batch === null) break;
      seen.push(batch);
    }
    expect(seen.flatMap(sequences)).toEqual([1, 2, 3]);
    expect(seen.at(-1)?.shardEnd?.childShards.map((child) => child.ShardId)).toEqual(['shard-1']);
    expect(positions).toEqual(['1002']);
    expect(issues).toContainEqual(
      expect.objectContaining({ kind: 'closed-without-children', operation: 'SubscribeToShard' }),
    );
    // The rest was read with GetRecords: one call, one record, reported as a GetRecords call.
    expect(getRecords).toEqual([1]);
    await subscriber.stop();
  });

  it('does not take an end without children on an open shard for the shard end: it subscribes again', async () => {
    const clock = new ManualClock();
    const { stream, subscriptions } = scriptedStream([
      { events: [event(1, 2), { ...event(3, 3, null), childShards: [] }], after: 'hang' },
      { events: [event(4, 4)], after: 'hang' },
    ]);
    const subscriber = subscriberOf(stream, clock);
    subscriber.start();
    const batches: FetchedBatch[] = [];
    for (let index = 0; index < 3; index++) {
      const next = subscriber.next();
      await clock.advance(1_000);
      batches.push((await next) as FetchedBatch);
    }
    expect(batches.flatMap(sequences)).toEqual([1, 2, 3, 4]);
    expect(batches.every((batch) => batch.shardEnd === null)).toBe(true);
    expect(subscriptions[1]).toEqual({ type: 'AFTER_SEQUENCE_NUMBER', sequenceNumber: '1003' });
    await subscriber.stop();
  });

  it('waits before subscribing again when a subscription ends before its first event', async () => {
    const clock = new ManualClock();
    const { stream, subscriptions } = scriptedStream(
      Array.from({ length: 50 }, () => ({ events: [], after: 'end' as const })),
    );
    const subscriber = subscriberOf(stream, clock);
    subscriber.start();
    await clock.advance(1_000);
    // Backoff from 100 ms (doubling to 1 s): a handful of attempts in a second, not a tight loop.
    expect(subscriptions.length).toBeGreaterThan(1);
    expect(subscriptions.length).toBeLessThan(8);
    await subscriber.stop();
  });

  it('reads a closed shard from its last continuation when no record came yet', async () => {
    const clock = new ManualClock();
    const { stream } = scriptedStream(
      [
        {
          events: [
            { ...event(1, 0, '1005'), records: [] },
            { ...event(1, 0, '1005'), records: [] },
          ],
          after: 'hang',
        },
      ],
      [shard('shard-0', '1010')],
    );
    const positions: IteratorPosition[] = [];
    stream.getShardIterator = async (_shardId, position) => {
      positions.push(position);
      return 'tail';
    };
    stream.getRecords = async () => ({
      Records: [],
      ChildShards: [{ ShardId: 'shard-1', ParentShards: ['shard-0'], HashKeyRange: undefined }],
    });
    const subscriber = new ShardSubscriber({
      ...optionsOf(stream, clock),
      start: { type: 'LATEST' },
      closedShardCheckIntervalMs: 0,
    });
    subscriber.start();
    expect((await subscriber.next())?.records).toEqual([]);
    await clock.advance(1_000);
    expect(positions).toEqual([{ type: 'AFTER_SEQUENCE_NUMBER', sequenceNumber: '1005' }]);
    await subscriber.stop();
  });
});
