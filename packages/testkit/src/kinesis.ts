// Stream helpers for tests against kinesis-local (or any Kinesis endpoint): create a stream and wait
// for it, write records with retries, list shards, split, merge and rescale. Imported from
// `@kcl/testkit/kinesis`, so the main entry point needs no AWS SDK.
import {
  CreateStreamCommand,
  DescribeStreamSummaryCommand,
  KinesisClient,
  ListShardsCommand,
  MergeShardsCommand,
  PutRecordsCommand,
  type PutRecordsRequestEntry,
  type Shard,
  SplitShardCommand,
  UpdateShardCountCommand,
} from '@aws-sdk/client-kinesis';
import { NodeHttpHandler } from '@smithy/node-http-handler';
import type { RunningEmulator } from './emulators.js';

/** A Kinesis client for a local emulator, over HTTP/1.1 (SubscribeToShard on kinesis-local needs it). */
export function localKinesisClient(emulator: RunningEmulator): KinesisClient {
  return new KinesisClient({
    endpoint: emulator.endpoint,
    region: emulator.region,
    credentials: emulator.credentials,
    requestHandler: new NodeHttpHandler(),
  });
}

export interface StreamWaitOptions {
  /** How long to wait for ACTIVE (default 15 s). */
  readonly timeoutMs?: number;
}

/** Waits until the stream is ACTIVE, as after CreateStream, SplitShard, MergeShards or UpdateShardCount. */
export async function waitForStreamActive(
  client: KinesisClient,
  streamName: string,
  options: StreamWaitOptions = {},
): Promise<void> {
  const timeoutMs = options.timeoutMs ?? 15_000;
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const summary = await client.send(new DescribeStreamSummaryCommand({ StreamName: streamName }));
    if (summary.StreamDescriptionSummary?.StreamStatus === 'ACTIVE') return;
    if (performance.now() > deadline) {
      throw new Error(`stream ${streamName} did not become ACTIVE within ${timeoutMs} ms`);
    }
    await sleep(25);
  }
}

/** Creates a stream with `shardCount` shards and waits until it is ACTIVE. */
export async function createStream(
  client: KinesisClient,
  streamName: string,
  shardCount: number,
  options: StreamWaitOptions = {},
): Promise<void> {
  await client.send(new CreateStreamCommand({ StreamName: streamName, ShardCount: shardCount }));
  await waitForStreamActive(client, streamName, options);
}

export interface TestRecord {
  readonly partitionKey: string;
  readonly data: string | Uint8Array;
  readonly explicitHashKey?: string;
}

export interface PutRecordsOptions {
  /**
   * Records per PutRecords call (default and maximum 500). A batch that holds each partition key at
   * most once keeps per-key order equal to write order even when some entries are retried.
   */
  readonly batchSize?: number;
  /** Attempts per batch before giving up (default 50). */
  readonly maxAttempts?: number;
}

/**
 * Writes the records in order, batch by batch. Entries the service rejects (throttling) are written
 * again, and a call that fails outright is repeated, up to `maxAttempts` per batch.
 */
export async function putRecords(
  client: KinesisClient,
  streamName: string,
  records: readonly TestRecord[],
  options: PutRecordsOptions = {},
): Promise<void> {
  const batchSize = Math.min(options.batchSize ?? 500, 500);
  const maxAttempts = options.maxAttempts ?? 50;
  for (let index = 0; index < records.length; index += batchSize) {
    let entries: PutRecordsRequestEntry[] = records.slice(index, index + batchSize).map((record) => ({
      PartitionKey: record.partitionKey,
      Data: typeof record.data === 'string' ? Buffer.from(record.data) : record.data,
      ...(record.explicitHashKey === undefined ? {} : { ExplicitHashKey: record.explicitHashKey }),
    }));
    let lastError: unknown;
    for (let attempt = 0; entries.length > 0; attempt++) {
      if (attempt >= maxAttempts) {
        throw new Error(`PutRecords to ${streamName} still failing after ${maxAttempts} attempts`, {
          cause: lastError,
        });
      }
      try {
        const output = await client.send(new PutRecordsCommand({ StreamName: streamName, Records: entries }));
        entries = entries.filter((_, position) => output.Records?.[position]?.ErrorCode !== undefined);
      } catch (error) {
        lastError = error;
      }
      if (entries.length > 0) await sleep(50);
    }
  }
}

/** Every shard of the stream, open and closed, following ListShards pages. */
export async function listAllShards(client: KinesisClient, streamName: string): Promise<Shard[]> {
  const shards: Shard[] = [];
  let token: string | undefined;
  do {
    const page = await client.send(
      token === undefined
        ? new ListShardsCommand({ StreamName: streamName })
        : new ListShardsCommand({ NextToken: token }),
    );
    shards.push(...(page.Shards ?? []));
    token = page.NextToken;
  } while (token !== undefined);
  return shards;
}

/** The shards that are still open (no ending sequence number). */
export async function openShards(client: KinesisClient, streamName: string): Promise<Shard[]> {
  return (await listAllShards(client, streamName)).filter(
    (shard) => shard.SequenceNumberRange?.EndingSequenceNumber === undefined,
  );
}

/** Shards sorted by the start of their hash key range. */
export function byHashKey(shards: readonly Shard[]): Shard[] {
  return [...shards].sort((a, b) => {
    const x = BigInt(a.HashKeyRange?.StartingHashKey ?? '0');
    const y = BigInt(b.HashKeyRange?.StartingHashKey ?? '0');
    return x < y ? -1 : x > y ? 1 : 0;
  });
}

/** Splits a shard at the middle of its hash key range and waits until the stream is ACTIVE again. */
export async function splitShard(client: KinesisClient, streamName: string, shardId: string): Promise<void> {
  const shard = (await listAllShards(client, streamName)).find((candidate) => candidate.ShardId === shardId);
  if (shard?.HashKeyRange === undefined) throw new Error(`stream ${streamName} has no shard ${shardId}`);
  const start = BigInt(shard.HashKeyRange.StartingHashKey ?? '0');
  const end = BigInt(shard.HashKeyRange.EndingHashKey ?? '0');
  await client.send(
    new SplitShardCommand({
      StreamName: streamName,
      ShardToSplit: shardId,
      NewStartingHashKey: ((start + end + 1n) / 2n).toString(),
    }),
  );
  await waitForStreamActive(client, streamName);
}

/** Merges two adjacent shards and waits until the stream is ACTIVE again. */
export async function mergeShards(
  client: KinesisClient,
  streamName: string,
  shardId: string,
  adjacentShardId: string,
): Promise<void> {
  await client.send(
    new MergeShardsCommand({
      StreamName: streamName,
      ShardToMerge: shardId,
      AdjacentShardToMerge: adjacentShardId,
    }),
  );
  await waitForStreamActive(client, streamName);
}

/** Rescales the stream uniformly to `target` open shards and waits until it is ACTIVE again. */
export async function updateShardCount(
  client: KinesisClient,
  streamName: string,
  target: number,
): Promise<void> {
  await client.send(
    new UpdateShardCountCommand({
      StreamName: streamName,
      TargetShardCount: target,
      ScalingType: 'UNIFORM_SCALING',
    }),
  );
  await waitForStreamActive(client, streamName);
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
