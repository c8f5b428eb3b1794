import { noopLogger, OptionProblems } from '@kcl/core';
import { createMemoryLeaseStore, ManualClock, MemoryLeaseTable } from '@kcl/testkit';
import { describe, expect, it } from 'vitest';
import type { StreamDescription, StreamIdentity } from '../kinesis/kinesis-stream.js';
import type { FormerStreamsStrategy, StreamConfig } from './stream-options.js';
import { checkMultiStream } from './stream-options.js';
import { type DescribableStreamReader, StreamRegistry } from './stream-registry.js';

const ACCOUNT = '123456789012';

/** Streams that exist "in Kinesis", by name, with their creation times (seconds). */
class FakeKinesis {
  readonly created = new Map<string, number>();
  describes = 0;

  reader(identity: StreamIdentity): DescribableStreamReader {
    const name =
      'streamName' in identity ? identity.streamName : (identity.streamArn.split('/').pop() as string);
    return {
      name,
      listShards: async () => [],
      getShardIterator: async () => 'iterator',
      getRecords: async () => ({ Records: [] }),
      describe: async (): Promise<StreamDescription> => {
        this.describes += 1;
        const created = this.created.get(name);
        if (created === undefined) {
          throw Object.assign(new Error(`Stream ${name} not found`), { name: 'ResourceNotFoundException' });
        }
        return {
          streamName: name,
          streamArn: `arn:aws:kinesis:us-east-1:${ACCOUNT}:stream/${name}`,
          createdAt: new Date(created * 1000),
        };
      },
    };
  }
}

function registry(list: () => StreamConfig[], formerStreams: FormerStreamsStrategy, syncIntervalMs = 1_000) {
  const clock = new ManualClock();
  const kinesis = new FakeKinesis();
  const check = new OptionProblems('test');
  const settings = checkMultiStream(
    check,
    { streamTracker: { streams: list }, streamSyncIntervalMs: syncIntervalMs, formerStreams },
    'TRIM_HORIZON',
  );
  check.throwIfAny();
  if (settings === null) throw new Error('multi-stream settings expected');
  const streams = new StreamRegistry({
    single: null,
    multi: { settings, readerFor: (identity) => kinesis.reader(identity), region: async () => 'us-east-1' },
    initialPosition: 'TRIM_HORIZON',
    store: createMemoryLeaseStore({ applicationName: 'app', table: new MemoryLeaseTable() }),
    workerId: 'w',
    clock,
    logger: noopLogger,
    emit: () => {},
  });
  return { clock, kinesis, streams };
}

const signal = new AbortController().signal;
const id = (name: string, created: number): string => `${ACCOUNT}:${name}:${created}`;

describe('StreamRegistry', () => {
  it('tracks the listed streams by identifier and reports additions and removals', async () => {
    let listed: StreamConfig[] = ['a', 'b'];
    const { kinesis, streams } = registry(() => listed, { strategy: 'none' });
    kinesis.created.set('a', 100).set('b', 200);
    const first = await streams.sync(signal);
    expect(first.added.map((entry) => entry.identifier)).toEqual([id('a', 100), id('b', 200)]);
    listed = ['b'];
    const second = await streams.sync(signal);
    expect(second.added).toEqual([]);
    expect(second.removed.map((entry) => entry.identifier)).toEqual([id('a', 100)]);
    expect(streams.tracked().map((entry) => entry.identifier)).toEqual([id('b', 200)]);
    // The former stream is still read: its leases have a stream.
    expect(streams.forLeaseKey(`${id('a', 100)}:shardId-000000000000`)?.stream).toEqual({
      name: 'a',
      identifier: id('a', 100),
    });
    listed = ['a', 'b'];
    const third = await streams.sync(signal);
    expect(third.added.map((entry) => entry.identifier)).toEqual([id('a', 100)]);
  });

  it('never deletes a former stream with strategy none, unless the stream is gone from Kinesis', async () => {
    let listed: StreamConfig[] = ['a'];
    const { clock, kinesis, streams } = registry(() => listed, { strategy: 'none' });
    kinesis.created.set('a', 100);
    await streams.sync(signal);
    listed = [];
    await streams.sync(signal);
    await clock.advance(10 * 3_600_000);
    expect(await streams.dueForDeletion(new Set([id('a', 100)]), signal)).toEqual([]);
    kinesis.created.delete('a');
    // A former stream found still there is described again only after five syncs.
    expect(await streams.dueForDeletion(new Set([id('a', 100)]), signal)).toEqual([]);
    await clock.advance(5_000);
    expect(await streams.dueForDeletion(new Set([id('a', 100)]), signal)).toEqual([id('a', 100)]);
  });

  it('deletes a former stream waitMs after it was noticed gone (auto), not before', async () => {
    let listed: StreamConfig[] = ['a', 'b'];
    const { clock, kinesis, streams } = registry(() => listed, { strategy: 'auto', waitMs: 5_000 });
    kinesis.created.set('a', 100).set('b', 200);
    await streams.sync(signal);
    const withLeases = new Set([id('a', 100), id('b', 200)]);
    listed = ['b'];
    await clock.advance(1_000);
    await streams.sync(signal);
    await clock.advance(4_999);
    expect(await streams.dueForDeletion(withLeases, signal)).toEqual([]);
    await clock.advance(1);
    expect(await streams.dueForDeletion(withLeases, signal)).toEqual([id('a', 100)]);
  });

  it('counts the wait of leases found without their stream listed from when they were found', async () => {
    const { clock, kinesis, streams } = registry(() => ['b'], { strategy: 'auto', waitMs: 5_000 });
    kinesis.created.set('a', 100).set('b', 200);
    await streams.sync(signal);
    await clock.advance(2_000);
    const orphan = id('a', 100);
    expect(streams.forLeaseKey(`${orphan}:shardId-000000000001`)?.identifier).toBe(orphan);
    await clock.advance(4_999);
    expect(await streams.dueForDeletion(new Set([orphan]), signal)).toEqual([]);
    await clock.advance(1);
    expect(await streams.dueForDeletion(new Set([orphan]), signal)).toEqual([orphan]);
  });

  it('deletes only the provided former streams, waitMs after they were first named', async () => {
    let listed: StreamConfig[] = ['a', 'b', 'c'];
    let provided: string[] = [];
    const { clock, kinesis, streams } = registry(() => listed, {
      strategy: 'provided',
      waitMs: 3_000,
      streams: () => provided,
    });
    kinesis.created.set('a', 100).set('b', 200).set('c', 300);
    await streams.sync(signal);
    listed = ['c'];
    await streams.sync(signal);
    const withLeases = new Set([id('a', 100), id('b', 200), id('c', 300)]);
    await clock.advance(10_000);
    expect(await streams.dueForDeletion(withLeases, signal)).toEqual([]);
    provided = ['a', id('c', 300)];
    expect(await streams.dueForDeletion(withLeases, signal)).toEqual([]);
    await clock.advance(3_000);
    // c is named but still listed: never deleted.
    expect(await streams.dueForDeletion(withLeases, signal)).toEqual([id('a', 100)]);
  });

  it('sees a stream re-created under its name as a new stream; the old one’s leases are due at once', async () => {
    const { clock, kinesis, streams } = registry(() => ['a'], { strategy: 'none' }, 100);
    kinesis.created.set('a', 100);
    await streams.sync(signal);
    kinesis.created.set('a', 500);
    // Descriptions are kept for five syncs: the re-creation shows once they are older.
    await clock.advance(499);
    expect((await streams.sync(signal)).added).toEqual([]);
    await clock.advance(1);
    const changes = await streams.sync(signal);
    expect(changes.added.map((entry) => entry.identifier)).toEqual([id('a', 500)]);
    expect(changes.removed.map((entry) => entry.identifier)).toEqual([id('a', 100)]);
    expect(await streams.dueForDeletion(new Set([id('a', 100), id('a', 500)]), signal)).toEqual([
      id('a', 100),
    ]);
  });

  it('skips a listed stream that does not exist yet, and keeps the last list when the tracker fails', async () => {
    let fail = false;
    const { kinesis, streams } = registry(
      () => {
        if (fail) throw new Error('tracker store down');
        return ['a', 'later'];
      },
      { strategy: 'none' },
    );
    kinesis.created.set('a', 100);
    expect((await streams.sync(signal)).added.map((entry) => entry.identifier)).toEqual([id('a', 100)]);
    fail = true;
    await expect(streams.sync(signal)).rejects.toMatchObject({
      code: 'STREAM_TRACKER_FAILED',
      retryable: true,
    });
    expect(streams.tracked().map((entry) => entry.identifier)).toEqual([id('a', 100)]);
    fail = false;
    kinesis.created.set('later', 300);
    expect((await streams.sync(signal)).added.map((entry) => entry.identifier)).toEqual([id('later', 300)]);
  });

  it('does not count a stream as former before a list was read, nor read one whose leases it deleted', async () => {
    let fail = true;
    const { clock, kinesis, streams } = registry(
      () => {
        if (fail) throw new Error('tracker down');
        return ['b'];
      },
      { strategy: 'auto', waitMs: 1_000 },
    );
    kinesis.created.set('a', 100).set('b', 200);
    await expect(streams.sync(signal)).rejects.toMatchObject({ code: 'STREAM_TRACKER_FAILED' });
    const key = `${id('a', 100)}:shardId-000000000000`;
    // Read by the ARN its identifier names in the client's region.
    expect(streams.forLeaseKey(key)?.identity).toEqual({
      streamArn: `arn:aws:kinesis:us-east-1:${ACCOUNT}:stream/a`,
    });
    await clock.advance(10_000);
    expect(await streams.dueForDeletion(new Set([id('a', 100)]), signal)).toEqual([]);
    fail = false;
    await streams.sync(signal);
    await clock.advance(999);
    expect(await streams.dueForDeletion(new Set([id('a', 100)]), signal)).toEqual([]);
    await clock.advance(1);
    expect(await streams.dueForDeletion(new Set([id('a', 100)]), signal)).toEqual([id('a', 100)]);
    streams.forget(id('a', 100));
    expect(streams.forLeaseKey(key)).toBeNull();
    // A lease of it that reappears (a child created by a consumer that had not noticed) goes at once.
    expect(await streams.dueForDeletion(new Set([id('a', 100)]), signal)).toEqual([id('a', 100)]);
  });

  it('does not create the leases of a listed stream again once it saw leases of it', async () => {
    const { kinesis, streams } = registry(() => ['a'], { strategy: 'none' });
    kinesis.created.set('a', 100);
    const [entry] = (await streams.sync(signal)).added;
    if (entry === undefined) throw new Error('a listed');
    expect(streams.mayCreateLeases(entry)).toBe(true);
    streams.noteLeases([{ leaseKey: `${id('a', 100)}:shardId-000000000000` } as never]);
    expect(streams.mayCreateLeases(entry)).toBe(false);
  });

  it('does not accept single-stream lease keys in a multi-stream application', () => {
    const { streams } = registry(() => [], { strategy: 'none' });
    expect(streams.accepts('shardId-000000000000')).toBe(false);
    expect(streams.forLeaseKey('shardId-000000000000')).toBeNull();
    expect(streams.accepts(`${id('a', 1)}:shardId-000000000000`)).toBe(true);
  });
});
