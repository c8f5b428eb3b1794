import {
  DeleteStreamCommand,
  DescribeStreamConsumerCommand,
  DescribeStreamSummaryCommand,
  type KinesisClient,
} from '@aws-sdk/client-kinesis';
import type { Lease } from '@kcl/core';
import { createMemoryLeaseStore, MemoryLeaseTable } from '@kcl/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type ConsumerOptions,
  createConsumer,
  parseStreamIdentifier,
  type StreamConfig,
} from '../src/index.js';
import { FAST_TIMING, Fleet } from './support/fleet.js';
import {
  createStream,
  indexOf,
  type LocalKinesis,
  mergeShards,
  openShards,
  putRecords,
  records,
  splitShard,
  startLocalKinesis,
  until,
} from './support/kinesis.js';

let kinesis: LocalKinesis;
beforeAll(async () => {
  kinesis = await startLocalKinesis();
});
afterAll(async () => {
  await kinesis?.stop();
});

let streamCounter = 0;
async function newStream(shards: number, prefix = 'multi'): Promise<string> {
  streamCounter += 1;
  const name = `${prefix}-${streamCounter}`;
  await createStream(kinesis.client, name, shards);
  return name;
}

function multiFleet(
  applicationName: string,
  overrides: Partial<ConsumerOptions>,
  newClient: () => KinesisClient = kinesis.newClient,
) {
  const table = new MemoryLeaseTable();
  const store = createMemoryLeaseStore({ applicationName, table });
  return {
    store,
    fleet: new Fleet({
      applicationName,
      newClient,
      store: () => createMemoryLeaseStore({ applicationName, table }),
      overrides,
    }),
  };
}

/** The stream name of a multi-stream lease (its key's identifier). */
function streamOfLease(lease: Pick<Lease, 'leaseKey'>): string | undefined {
  const identifier = lease.leaseKey.slice(0, lease.leaseKey.lastIndexOf(':'));
  return parseStreamIdentifier(identifier)?.streamName;
}

/** A tracker whose answer the test changes. */
class MutableTracker {
  current: StreamConfig[];
  constructor(initial: StreamConfig[]) {
    this.current = initial;
  }
  streams(): readonly StreamConfig[] {
    return this.current;
  }
}

describe('one application, several streams', () => {
  it('reads two streams with one fleet, keys the leases in the Java format and balances them by count', async () => {
    const orders = await newStream(2);
    const payments = await newStream(2);
    const { fleet, store } = multiFleet('two-streams', { streams: [orders, { streamName: payments }] });
    await Promise.all(['w1', 'w2'].map((id) => fleet.add(id)));
    const ordersWritten = records('orders', 300, 30);
    const paymentsWritten = records('payments', 300, 30);
    await putRecords(kinesis.client, orders, ordersWritten);
    await putRecords(kinesis.client, payments, paymentsWritten);
    await until(() => fleet.distinct().size >= 600, 30_000, 'every record of both streams');
    await until(
      () => fleet.leasesHeldBy('w1').length === 2 && fleet.leasesHeldBy('w2').length === 2,
      10_000,
      'two leases on each worker',
    );
    const leases = await store.leases.list();
    expect(leases).toHaveLength(4);
    for (const lease of leases) {
      expect(lease.leaseKey).toMatch(/^\d{12}:multi-\d+:\d+:shardId-\d+$/);
      expect(lease.streamIdentifier).toBe(lease.leaseKey.slice(0, lease.leaseKey.lastIndexOf(':')));
    }
    expect(new Set(leases.map(streamOfLease))).toEqual(new Set([orders, payments]));
    // Each processor was told its stream: every record came from the stream it was written to.
    for (const record of fleet.processed)
      expect(record.data.startsWith(record.stream === orders ? 'orders' : 'payments')).toBe(true);
    const status = fleet.workers.get('w1')?.status().leases[0];
    expect(status?.streamIdentifier).toMatch(/^\d{12}:multi-\d+:\d+$/);
    await fleet.stopAll();
    expect(fleet.duplicates()).toBe(0);
    expect(fleet.orderViolations(indexOf)).toBe(0);
  });

  it('follows a split on one stream and a merge on another', async () => {
    const splitting = await newStream(1);
    const merging = await newStream(2);
    const { fleet } = multiFleet('reshard', { streams: [splitting, merging] });
    await Promise.all(['w1', 'w2'].map((id) => fleet.add(id)));
    await putRecords(kinesis.client, splitting, records('s', 200, 20));
    await putRecords(kinesis.client, merging, records('m', 200, 20));
    await until(() => fleet.distinct().size >= 400, 30_000, 'records before the reshards');
    const [parent] = await openShards(kinesis.client, splitting);
    await splitShard(kinesis.client, splitting, parent?.ShardId ?? '');
    const [left, right] = await openShards(kinesis.client, merging);
    await mergeShards(kinesis.client, merging, left?.ShardId ?? '', right?.ShardId ?? '');
    await putRecords(kinesis.client, splitting, records('s', 200, 20, 200));
    await putRecords(kinesis.client, merging, records('m', 200, 20, 200));
    await until(() => fleet.distinct().size >= 800, 40_000, 'records after the reshards');
    await fleet.stopAll();
    expect(fleet.duplicates()).toBe(0);
    expect(fleet.orderViolations(indexOf)).toBe(0);
    const children = new Set(
      fleet.processed.filter((record) => record.data.startsWith('s-')).map((r) => r.shardId),
    );
    expect(children.size).toBe(3);
  });

  it('reads a stream added at run time from its initial position, and a removed one until its leases are deleted', async () => {
    const first = await newStream(1);
    const added = await newStream(1);
    const tracker = new MutableTracker([first]);
    const { fleet, store } = multiFleet('tracked', {
      streamTracker: tracker,
      streamSyncIntervalMs: 200,
      formerStreams: { strategy: 'auto', waitMs: 2_000 },
    });
    await fleet.add('w1');
    await fleet.add('w2');
    // Written before the stream is listed: TRIM_HORIZON reads it.
    await putRecords(kinesis.client, added, records('added', 100, 10));
    await putRecords(kinesis.client, first, records('first', 100, 10));
    await until(() => fleet.distinct().size >= 100, 20_000, 'the first stream');
    expect(fleet.processed.some((record) => record.stream === added)).toBe(false);
    tracker.current = [first, { streamName: added, initialPosition: 'TRIM_HORIZON' }];
    await until(() => fleet.distinct().size >= 200, 20_000, 'the added stream from its start');
    // Removed: what is written to it now is still read while the wait lasts.
    tracker.current = [{ streamName: added, initialPosition: 'TRIM_HORIZON' }];
    const removedAt = Date.now();
    await putRecords(kinesis.client, first, records('first', 50, 10, 100));
    await until(() => fleet.distinct().size >= 250, 20_000, 'records written after the removal');
    expect(Date.now() - removedAt).toBeLessThan(2_000);
    await until(
      async () => (await store.leases.list()).every((lease) => streamOfLease(lease) === added),
      20_000,
      'the removed stream’s leases deleted',
    );
    expect(Date.now() - removedAt).toBeGreaterThanOrEqual(2_000);
    await until(
      () =>
        fleet.workers
          .get('w1')
          ?.status()
          .leases.every((lease) => !lease.leaseKey.includes(first)) ?? false,
      10_000,
      'w1 read the removed stream no more',
    );
    await putRecords(kinesis.client, added, records('added', 50, 10, 100));
    await until(() => fleet.distinct().size >= 300, 20_000, 'the remaining stream read on');
    await fleet.stopAll();
    expect(fleet.duplicates()).toBe(0);
    expect(fleet.orderViolations(indexOf)).toBe(0);
  });

  it('recognises a stream deleted and re-created under its name by its creation time', async () => {
    const name = await newStream(1, 'recreated');
    const { fleet, store } = multiFleet('recreate', {
      streams: [{ streamName: name, initialPosition: 'TRIM_HORIZON' }],
      streamSyncIntervalMs: 100,
      formerStreams: { strategy: 'none' },
    });
    await fleet.add('w1');
    await putRecords(kinesis.client, name, records('old', 50, 5));
    await until(() => fleet.distinct().size >= 50, 20_000, 'the first incarnation');
    const [before] = await store.leases.list();
    await kinesis.client.send(new DeleteStreamCommand({ StreamName: name }));
    // kinesis-local stamps creation times in whole seconds: the new stream must not share the old one's.
    await new Promise((resolve) => setTimeout(resolve, 1_100));
    await createStream(kinesis.client, name, 1);
    await putRecords(kinesis.client, name, records('new', 50, 5));
    await until(() => fleet.distinct().size >= 100, 30_000, 'the re-created stream');
    await until(
      async () =>
        (await store.leases.list()).every((lease) => lease.streamIdentifier !== before?.streamIdentifier),
      20_000,
      'the old incarnation’s leases deleted (even with formerStreams none)',
    );
    const [after] = await store.leases.list();
    expect(after?.streamIdentifier).not.toBe(before?.streamIdentifier);
    expect(parseStreamIdentifier(after?.streamIdentifier ?? '')?.streamName).toBe(name);
    await fleet.stopAll();
    expect(fleet.duplicates()).toBe(0);
  });
});

describe('several streams by enhanced fan-out', () => {
  it('registers the stream consumer on each stream and reads both by subscription', async () => {
    const left = await newStream(1, 'fanout-multi');
    const right = await newStream(2, 'fanout-multi');
    const commands: string[] = [];
    const countingClient = (): KinesisClient => {
      const client = kinesis.newClient();
      client.middlewareStack.add(
        (next, context) => (args) => {
          commands.push(String(context.commandName));
          return next(args);
        },
        { step: 'initialize' },
      );
      return client;
    };
    const { fleet } = multiFleet(
      'fanout-multi',
      {
        streams: [left, right],
        retrieval: { mode: 'fanout', consumerName: 'multi-reader', closedShardCheckIntervalMs: 500 },
      },
      countingClient,
    );
    await fleet.add('w1');
    await putRecords(kinesis.client, left, records('left', 100, 10));
    await putRecords(kinesis.client, right, records('right', 100, 10));
    await until(() => fleet.distinct().size >= 200, 30_000, 'records of both streams');
    for (const name of [left, right]) {
      const summary = await kinesis.client.send(new DescribeStreamSummaryCommand({ StreamName: name }));
      const consumer = await kinesis.client.send(
        new DescribeStreamConsumerCommand({
          StreamARN: summary.StreamDescriptionSummary?.StreamARN,
          ConsumerName: 'multi-reader',
        }),
      );
      expect(consumer.ConsumerDescription?.ConsumerStatus).toBe('ACTIVE');
    }
    expect(commands.filter((name) => name === 'RegisterStreamConsumerCommand')).toHaveLength(2);
    expect(commands.filter((name) => name === 'SubscribeToShardCommand').length).toBeGreaterThanOrEqual(3);
    expect(commands).not.toContain('GetRecordsCommand');
    await fleet.stopAll();
    expect(fleet.duplicates()).toBe(0);
    expect(fleet.orderViolations(indexOf)).toBe(0);
  });
});

describe('multi-stream options', () => {
  const base = {
    applicationName: 'app',
    kinesis: { region: 'us-east-1' },
    leaseStore: createMemoryLeaseStore({ applicationName: 'app', table: new MemoryLeaseTable() }),
    processor: () => ({ processRecords() {} }),
  };

  it('names every problem at once', () => {
    let message = '';
    try {
      createConsumer({
        ...base,
        streamName: 'one',
        streams: ['ok', 'not a name', { streamName: 'x', initialPosition: 'SOMEWHERE' as never }],
        formerStreams: { strategy: 'auto' } as never,
        retrieval: {
          mode: 'fanout',
          consumerArn: 'arn:aws:kinesis:us-east-1:123456789012:stream/ok/consumer/c:1',
        },
      });
    } catch (error) {
      message = (error as Error).message;
    }
    expect(message).toContain('streams[1] "not a name" is neither a stream name');
    expect(message).toContain('streams[2].initialPosition "SOMEWHERE"');
    expect(message).toContain("formerStreams.waitMs is required with strategy 'auto'");
    expect(message).toContain('streamName and streams are both set');
    expect(message).toContain('retrieval.consumerArn names the stream consumer of one stream');
  });

  it('refuses a tracker without streams() and a formerStreams strategy it does not know', () => {
    expect(() =>
      createConsumer({ ...base, streamTracker: {} as never, formerStreams: { strategy: 'later' } as never }),
    ).toThrow(
      /formerStreams\.strategy must be 'none', 'auto' or 'provided', got "later"\n {2}- streamTracker must be an object with a streams\(\) method/,
    );
    expect(() => createConsumer({ ...base, streamName: 's', streamSyncIntervalMs: 10 })).toThrow(
      /streamSyncIntervalMs applies to several streams/,
    );
  });

  it('accepts the same stream given twice only once', () => {
    expect(() => createConsumer({ ...base, streams: ['a', { streamName: 'a' }] })).toThrow(
      /streams names "a" twice/,
    );
  });

  it('starts reading with defaults', () => {
    const consumer = createConsumer({ ...base, streams: ['a', 'b'], ...FAST_TIMING });
    expect(consumer.status().leases).toEqual([]);
  });
});
