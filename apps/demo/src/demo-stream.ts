import {
  CreateStreamCommand,
  DescribeStreamSummaryCommand,
  KinesisClient,
  ListShardsCommand,
  MergeShardsCommand,
  type Shard,
  SplitShardCommand,
} from '@aws-sdk/client-kinesis';
import { parseStreamIdentifier } from '@kcl/consumer';
import { type Clock, systemClock } from '@kcl/core';
import type { RunningEmulator } from '@kcl/testkit';
import { NodeHttpHandler } from '@smithy/node-http-handler';

/** A shard as the view and the script need it. */
export interface ShardInfo {
  readonly shardId: string;
  readonly parentShardIds: readonly string[];
  readonly startingHashKey: bigint;
  readonly endingHashKey: bigint;
  /** Closed by a split or merge: no new records arrive. */
  readonly closed: boolean;
}

export const MAX_HASH_KEY = 2n ** 128n - 1n;

/** The demo's stream on the local emulator: create, list, split, merge. */
export class DemoStream {
  readonly client: KinesisClient;

  constructor(
    readonly emulator: RunningEmulator,
    readonly name: string,
    readonly clock: Clock = systemClock,
  ) {
    this.client = new KinesisClient({
      endpoint: emulator.endpoint,
      region: emulator.region,
      credentials: emulator.credentials,
      // HTTP/1.1 for the emulator; a generous timeout so a stalled request is retried, not waited on forever.
      requestHandler: new NodeHttpHandler({ requestTimeout: 15_000 }),
    });
  }

  async create(shardCount: number): Promise<void> {
    await this.client.send(new CreateStreamCommand({ StreamName: this.name, ShardCount: shardCount }));
    await this.waitActive();
  }

  /** Waits until the stream is ACTIVE again after a change (the emulator keeps it UPDATING briefly). */
  async waitActive(timeoutMs = 60_000): Promise<void> {
    const deadline = this.clock.monotonicNow() + timeoutMs;
    for (;;) {
      const summary = await this.client.send(new DescribeStreamSummaryCommand({ StreamName: this.name }));
      if (summary.StreamDescriptionSummary?.StreamStatus === 'ACTIVE') return;
      if (this.clock.monotonicNow() > deadline)
        throw new Error(`stream ${this.name} did not become ACTIVE within ${timeoutMs / 1000} s`);
      await this.clock.sleep(50);
    }
  }

  /** Every shard, open and closed, sorted by the start of its hash key range. */
  async shards(): Promise<ShardInfo[]> {
    const shards: Shard[] = [];
    let token: string | undefined;
    do {
      const page = await this.client.send(
        token === undefined
          ? new ListShardsCommand({ StreamName: this.name })
          : new ListShardsCommand({ NextToken: token }),
      );
      shards.push(...(page.Shards ?? []));
      token = page.NextToken;
    } while (token !== undefined);
    return sortByHashKey(
      shards.map((shard) => ({
        shardId: shard.ShardId ?? '',
        parentShardIds: [shard.ParentShardId, shard.AdjacentParentShardId].filter(
          (parent): parent is string => parent !== undefined,
        ),
        startingHashKey: BigInt(shard.HashKeyRange?.StartingHashKey ?? '0'),
        endingHashKey: BigInt(shard.HashKeyRange?.EndingHashKey ?? '0'),
        closed: shard.SequenceNumberRange?.EndingSequenceNumber !== undefined,
      })),
    );
  }

  /** Splits a shard in the middle of its hash key range; returns the children. */
  async split(shard: ShardInfo): Promise<ShardInfo[]> {
    await this.client.send(
      new SplitShardCommand({
        StreamName: this.name,
        ShardToSplit: shard.shardId,
        NewStartingHashKey: ((shard.startingHashKey + shard.endingHashKey + 1n) / 2n).toString(),
      }),
    );
    await this.waitActive();
    return (await this.shards()).filter((candidate) => candidate.parentShardIds.includes(shard.shardId));
  }

  /** Merges two adjacent open shards; returns the child. */
  async merge(lower: ShardInfo, upper: ShardInfo): Promise<ShardInfo | undefined> {
    await this.client.send(
      new MergeShardsCommand({
        StreamName: this.name,
        ShardToMerge: lower.shardId,
        AdjacentShardToMerge: upper.shardId,
      }),
    );
    await this.waitActive();
    return (await this.shards()).find(
      (candidate) =>
        candidate.parentShardIds.includes(lower.shardId) && candidate.parentShardIds.includes(upper.shardId),
    );
  }

  close(): void {
    this.client.destroy();
  }
}

export function sortByHashKey<T extends Pick<ShardInfo, 'startingHashKey'>>(shards: readonly T[]): T[] {
  return [...shards].sort((a, b) =>
    a.startingHashKey < b.startingHashKey ? -1 : a.startingHashKey > b.startingHashKey ? 1 : 0,
  );
}

/** The shard to split: the first open shard in hash order among the widest (within 1%). */
export function shardToSplit(shards: readonly ShardInfo[]): ShardInfo | undefined {
  const open = sortByHashKey(shards.filter((candidate) => !candidate.closed));
  const width = (shard: ShardInfo): bigint => shard.endingHashKey - shard.startingHashKey;
  let widest = 0n;
  for (const shard of open) if (width(shard) > widest) widest = width(shard);
  return open.find((shard) => width(shard) * 100n >= widest * 99n);
}

/**
 * Two open shards to merge: adjacent ranges (one ends where the other starts), preferring the
 * narrowest pair, so the key space stays evenly spread; the last such pair in hash order on a tie.
 */
export function shardsToMerge(shards: readonly ShardInfo[]): [ShardInfo, ShardInfo] | undefined {
  const open = sortByHashKey(shards.filter((shard) => !shard.closed));
  let best: [ShardInfo, ShardInfo] | undefined;
  let bestWidth = 0n;
  for (let index = 0; index + 1 < open.length; index++) {
    const lower = open[index]!;
    const upper = open[index + 1]!;
    if (lower.endingHashKey + 1n !== upper.startingHashKey) continue;
    const width = upper.endingHashKey - lower.startingHashKey;
    if (best === undefined || width <= bestWidth) {
      best = [lower, upper];
      bestWidth = width;
    }
  }
  return best;
}

/** `shardId-000000000004` → `shard-4`, for narrow terminals. */
export function shortShardId(shardId: string): string {
  const match = /^shardId-0*(\d+)$/.exec(shardId);
  return match === null ? shardId : `shard-${match[1]}`;
}

/** The demo's stream names: `kcl-demo` alone, or `kcl-demo-1` … `kcl-demo-<count>` for several. */
export function demoStreamNames(count: number): string[] {
  return count === 1 ? ['kcl-demo'] : Array.from({ length: count }, (_, index) => `kcl-demo-${index + 1}`);
}

/** `kcl-demo-2` → `demo-2`, the name shown beside a shard. */
export function shortStreamName(streamName: string): string {
  return streamName.replace(/^kcl-/, '');
}

/**
 * A shard of the demo's streams. `streamName` is null when the demo reads one stream: its lease keys
 * are then bare shard ids, as for any single-stream application.
 */
export interface ShardRef {
  readonly streamName: string | null;
  readonly shardId: string;
}

/** The shard a lease key names: `shardId-…` with one stream, `account:stream:creationEpoch:shardId-…` with several. */
export function shardOfLeaseKey(leaseKey: string): ShardRef {
  const end = leaseKey.lastIndexOf(':');
  if (end === -1) return { streamName: null, shardId: leaseKey };
  const identifier = leaseKey.slice(0, end);
  return {
    streamName: parseStreamIdentifier(identifier)?.streamName ?? identifier,
    shardId: leaseKey.slice(end + 1),
  };
}

/** One string per shard of the demo's streams, to key maps by: the shard id, or `stream/shardId`. */
export function shardKey(shard: ShardRef): string {
  return shard.streamName === null ? shard.shardId : `${shard.streamName}/${shard.shardId}`;
}

/** How the view names a shard: `shard-3`, or `demo-2/shard-3` when the demo reads several streams. */
export function shardLabel(shard: ShardRef): string {
  return shard.streamName === null
    ? shortShardId(shard.shardId)
    : `${shortStreamName(shard.streamName)}/${shortShardId(shard.shardId)}`;
}

/** The label of the shard a lease key names (see `shardLabel`). */
export function leaseLabel(leaseKey: string): string {
  return shardLabel(shardOfLeaseKey(leaseKey));
}

/** The share of the hash key space a shard covers, as `25–50%`. */
export function hashRangeLabel(shard: Pick<ShardInfo, 'startingHashKey' | 'endingHashKey'>): string {
  const percent = (key: bigint): string => {
    const tenths = Math.round(Number((key * 10_000n) / (MAX_HASH_KEY + 1n)) / 10);
    return (tenths / 10).toFixed(tenths % 10 === 0 ? 0 : 1);
  };
  return `${percent(shard.startingHashKey)}–${percent(shard.endingHashKey + 1n)}%`;
}
