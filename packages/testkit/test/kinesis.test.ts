import {
  GetRecordsCommand,
  GetShardIteratorCommand,
  type KinesisClient,
  PutRecordsCommand,
  type PutRecordsCommandOutput,
} from '@aws-sdk/client-kinesis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RunningEmulator, startKinesisLocal, waitUntil } from '../src/index.js';
import {
  byHashKey,
  createStream,
  listAllShards,
  localKinesisClient,
  mergeShards,
  openShards,
  putRecords,
  splitShard,
  updateShardCount,
  waitForStreamActive,
} from '../src/kinesis.js';

let emulator: RunningEmulator;
let kinesis: KinesisClient;

beforeAll(async () => {
  emulator = await startKinesisLocal({
    durations: { createStream: 50, splitShard: 50, mergeShards: 50, updateShardCount: 50 },
  });
  kinesis = localKinesisClient(emulator);
});

afterAll(async () => {
  kinesis?.destroy();
  await emulator?.stop();
});

async function readShard(streamName: string, shardId: string): Promise<string[]> {
  const { ShardIterator } = await kinesis.send(
    new GetShardIteratorCommand({
      StreamName: streamName,
      ShardId: shardId,
      ShardIteratorType: 'TRIM_HORIZON',
    }),
  );
  const data: string[] = [];
  let iterator = ShardIterator;
  for (let calls = 0; iterator !== undefined && calls < 20; calls++) {
    const page = await kinesis.send(new GetRecordsCommand({ ShardIterator: iterator, Limit: 10_000 }));
    data.push(...(page.Records ?? []).map((record) => Buffer.from(record.Data ?? []).toString()));
    if ((page.Records ?? []).length === 0) break;
    iterator = page.NextShardIterator;
  }
  return data;
}

describe('@kcl/testkit/kinesis', () => {
  it('creates a stream, writes records over several PutRecords calls and keeps their order per key', async () => {
    await createStream(kinesis, 'written', 2);
    const records = Array.from({ length: 1_200 }, (_, index) => ({
      partitionKey: `key-${index % 7}`,
      data: `r-${index}`,
    }));
    await putRecords(kinesis, 'written', records);

    const shards = await listAllShards(kinesis, 'written');
    expect(shards).toHaveLength(2);
    const read = (await Promise.all(shards.map((shard) => readShard('written', shard.ShardId ?? '')))).flat();
    expect(read.sort()).toEqual(records.map((record) => record.data).sort());
    for (const shard of shards) {
      const inShard = (await readShard('written', shard.ShardId ?? '')).map((data) => Number(data.slice(2)));
      for (let key = 0; key < 7; key++) {
        const ofKey = inShard.filter((index) => index % 7 === key);
        expect(ofKey).toEqual([...ofKey].sort((a, b) => a - b));
      }
    }
  });

  it('splits, merges and rescales, each time returning once the stream is ACTIVE again', async () => {
    await createStream(kinesis, 'resharded', 2);
    const [first, second] = byHashKey(await openShards(kinesis, 'resharded'));
    await splitShard(kinesis, 'resharded', first?.ShardId ?? '');
    const afterSplit = byHashKey(await openShards(kinesis, 'resharded'));
    expect(afterSplit).toHaveLength(3);
    expect(afterSplit.map((shard) => shard.ParentShardId)).toEqual([
      first?.ShardId,
      first?.ShardId,
      undefined,
    ]);

    await mergeShards(kinesis, 'resharded', afterSplit[1]?.ShardId ?? '', second?.ShardId ?? '');
    const afterMerge = byHashKey(await openShards(kinesis, 'resharded'));
    expect(afterMerge).toHaveLength(2);
    expect(afterMerge[1]?.ParentShardId).toBe(afterSplit[1]?.ShardId);
    expect(afterMerge[1]?.AdjacentParentShardId).toBe(second?.ShardId);

    await updateShardCount(kinesis, 'resharded', 4);
    expect(await openShards(kinesis, 'resharded')).toHaveLength(4);
    expect((await listAllShards(kinesis, 'resharded')).length).toBeGreaterThan(4);
  });

  it('refuses to split a shard the stream does not have', async () => {
    await createStream(kinesis, 'small', 1);
    await expect(splitShard(kinesis, 'small', 'shardId-000000000042')).rejects.toThrow(
      'stream small has no shard shardId-000000000042',
    );
  });

  it('waits for ACTIVE no longer than told', async () => {
    // A client whose stream stays CREATING.
    const creating = {
      send: async () => ({ StreamDescriptionSummary: { StreamStatus: 'CREATING' } }),
    } as unknown as KinesisClient;
    await expect(waitForStreamActive(creating, 'stuck', { timeoutMs: 60 })).rejects.toThrow(
      'stream stuck did not become ACTIVE within 60 ms',
    );
  });

  it('writes again what a call rejected, and repeats a call that failed outright', async () => {
    await createStream(kinesis, 'flaky', 1);
    let calls = 0;
    // Fault injection around the real client: the first call fails, the second has its last entry throttled.
    const flaky = {
      send: async (command: PutRecordsCommand): Promise<PutRecordsCommandOutput> => {
        calls += 1;
        if (calls === 1) throw new Error('socket hang up');
        const entries = command.input.Records ?? [];
        if (calls === 2) {
          const accepted = await kinesis.send(
            new PutRecordsCommand({ StreamName: 'flaky', Records: entries.slice(0, -1) }),
          );
          return {
            ...accepted,
            FailedRecordCount: 1,
            Records: [
              ...(accepted.Records ?? []),
              { ErrorCode: 'ProvisionedThroughputExceededException', ErrorMessage: 'slow down' },
            ],
          };
        }
        return kinesis.send(command);
      },
    } as unknown as KinesisClient;
    await putRecords(flaky, 'flaky', [
      { partitionKey: 'a', data: 'one' },
      { partitionKey: 'a', data: 'two' },
      { partitionKey: 'a', data: 'three' },
    ]);
    expect(calls).toBe(3);
    const [shard] = await listAllShards(kinesis, 'flaky');
    expect(await readShard('flaky', shard?.ShardId ?? '')).toEqual(['one', 'two', 'three']);
  });

  it('gives up after maxAttempts, with the last failure as the cause', async () => {
    const failing = {
      send: async () => {
        throw new Error('connection refused');
      },
    } as unknown as KinesisClient;
    const attempt = putRecords(failing, 'nowhere', [{ partitionKey: 'a', data: 'x' }], { maxAttempts: 2 });
    await expect(attempt).rejects.toThrow('PutRecords to nowhere still failing after 2 attempts');
    await expect(attempt).rejects.toHaveProperty('cause.message', 'connection refused');
  });
});

describe('waitUntil', () => {
  it('resolves once the condition holds, sync or async', async () => {
    let polls = 0;
    await waitUntil(() => ++polls >= 3, 5_000, 'three polls', 1);
    expect(polls).toBe(3);
    await waitUntil(async () => true, 5_000, 'an async condition');
  });

  it('rejects naming what it waited for', async () => {
    await expect(waitUntil(() => false, 30, 'the impossible', 5)).rejects.toThrow(
      'timed out after 30 ms waiting for the impossible',
    );
  });
});
