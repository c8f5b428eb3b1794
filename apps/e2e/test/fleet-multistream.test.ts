import { mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type AttributeValue, DynamoDBClient, ScanCommand } from '@aws-sdk/client-dynamodb';
import { parseStreamIdentifier } from '@kcl/consumer';
import type { Lease } from '@kcl/core';
import { startDynalite } from '@kcl/testkit';
import { afterAll, beforeAll, describe, expect, it, onTestFailed } from 'vitest';
import { type OpenedStore, openStore, type StoreConfig } from '../src/store-config.js';
import type { ProcessedLine, WorkerStreamConfig } from '../src/worker-process.js';
import {
  balanced,
  type FleetEvent,
  FleetHarness,
  type Verification,
  verify,
  waitFor,
} from './support/harness.js';
import { byHashKey, produceContinuously, startTestStream, type TestStream } from './support/stream.js';

/** How often the workers read the stream list (the tracker file) again. */
const STREAM_SYNC_MS = 500;
/** How long a removed stream is read on before its leases are deleted (`formerStreams: auto`). */
const FORMER_WAIT_MS = 4_000;
/** Records written to the third stream before it is listed. */
const BEFORE_LISTED = 400;
/** Records written to the removed stream right after its removal. */
const AFTER_REMOVAL = 200;

/** A multi-stream lease key in the Java KCL's format: `account:stream:creationEpoch:shardId-…`. */
const MULTI_STREAM_KEY = /^(\d{12}:[A-Za-z0-9_.-]+:\d+):(shardId-\d+)$/;

interface StoreUnderTest {
  readonly config: StoreConfig;
  /** The lease table's raw items (DynamoDB), to check what was written in the Java KCL's format. */
  readonly rawItems?: (applicationName: string) => Promise<Array<Record<string, AttributeValue>>>;
  teardown(): Promise<void>;
}

const now = (): number => performance.timeOrigin + performance.now();

const streamOf = (lease: Pick<Lease, 'streamIdentifier'>): string | undefined =>
  parseStreamIdentifier(lease.streamIdentifier ?? '')?.streamName;

/**
 * Sorts the records processed more than once by why: the first processing was the killed worker's
 * before the kill, or its worker reported the lease lost by expiry (renewals kept from the store)
 * between the two processings. Anything else is unexplained.
 */
function classifyRepeats(
  processed: readonly ProcessedLine[],
  events: readonly FleetEvent[],
  killed: { readonly workerId: string; readonly at: number },
): { fromKill: number; fromExpiry: number; unexplained: string[] } {
  const leaseKeys = new Map<string, string>();
  for (const event of events) {
    const match = event.leaseKey === undefined ? null : MULTI_STREAM_KEY.exec(event.leaseKey);
    const streamName = parseStreamIdentifier(match?.[1] ?? '')?.streamName;
    if (match !== null && streamName !== undefined)
      leaseKeys.set(`${streamName}/${match[2]}`, event.leaseKey ?? '');
  }
  const expiries = events.filter((event) => event.type === 'lease-lost' && event.reason === 'expired');
  const first = new Map<string, ProcessedLine>();
  const result = { fromKill: 0, fromExpiry: 0, unexplained: [] as string[] };
  for (const line of processed) {
    const earlier = first.get(line.d);
    if (earlier === undefined) {
      first.set(line.d, line);
      continue;
    }
    const leaseKey = leaseKeys.get(`${earlier.st}/${earlier.s}`);
    if (earlier.w === killed.workerId && earlier.t < killed.at) result.fromKill += 1;
    else if (
      expiries.some(
        (event) =>
          event.workerId === earlier.w &&
          event.leaseKey === leaseKey &&
          event.at > earlier.t &&
          event.at < line.t,
      )
    )
      result.fromExpiry += 1;
    else
      result.unexplained.push(
        `${line.d} on ${earlier.st}/${earlier.s}: ${earlier.w} at ${Math.round(earlier.t)}, ${line.w} at ${Math.round(line.t)}`,
      );
  }
  return result;
}

function describeMultiStreamFleet(name: string, setup: () => Promise<StoreUnderTest>): void {
  describe(`multi-stream fleet on ${name}`, () => {
    let stream: TestStream;
    let store: StoreUnderTest;
    let harness: FleetHarness | undefined;
    const opened: OpenedStore[] = [];
    const dirs: string[] = [];
    /** A failed run keeps its workers' files for a look afterwards. */
    let keepFiles = false;

    beforeAll(async () => {
      [stream, store] = await Promise.all([startTestStream(), setup()]);
    });
    afterAll(async () => {
      await harness?.stopAll();
      for (const handle of opened) await handle.close();
      await stream?.stop();
      await store?.teardown();
      if (!keepFiles) for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
    });

    it('reads streams added and removed while it runs, through a split, a merge, a kill -9 and a late joiner: per stream none lost, in order', async () => {
      const startedAt = now();
      const [a, b, c] = ['a', 'b', 'c'].map((letter) => `multi-${name}-${letter}`) as [
        string,
        string,
        string,
      ];
      const applicationName = `multi-${name}-${Date.now()}`;
      await Promise.all([stream.create(a, 2), stream.create(b, 2), stream.create(c, 2)]);
      // Written before the stream is listed: its TRIM_HORIZON must reach back to them.
      await stream.produce(c, BEFORE_LISTED, 40);

      const dir = mkdtempSync(join(tmpdir(), 'kcl-multistream-'));
      dirs.push(dir);
      const trackerFile = join(dir, 'streams.json');
      /** Rewrites the stream list the workers read (a rename: a read never sees half a file). */
      const listStreams = (names: readonly string[]): number => {
        const configs: WorkerStreamConfig[] = names.map((streamName) => ({
          streamName,
          initialPosition: 'TRIM_HORIZON',
        }));
        writeFileSync(`${trackerFile}.next`, JSON.stringify(configs));
        renameSync(`${trackerFile}.next`, trackerFile);
        return now();
      };
      listStreams([a, b]);
      const fleet = new FleetHarness({
        dir,
        store: store.config,
        kinesisEndpoint: stream.emulator.endpoint,
        applicationName,
        // Each listed stream starts at TRIM_HORIZON by its own setting: a worker that ignored it would
        // start the added stream at LATEST and miss what was written before it was listed.
        initialPosition: 'LATEST',
        streams: {
          trackerFile,
          streamSyncIntervalMs: STREAM_SYNC_MS,
          formerStreams: { strategy: 'auto', waitMs: FORMER_WAIT_MS },
        },
      });
      harness = fleet;
      const handle = await openStore(store.config, applicationName);
      opened.push(handle);
      const leaseStore = handle.store;
      const onStream = (streamName: string) => (lease: Lease) => streamOf(lease) === streamName;
      const linesOf = (streamName: string): ProcessedLine[] =>
        fleet.processed().filter((line) => line.st === streamName);
      const phases: Record<string, number> = {};
      const phase = (label: string): void => {
        phases[label] = Math.round(now() - startedAt);
      };
      onTestFailed(() => {
        keepFiles = true;
        const processed = fleet.processed();
        process.stderr.write(
          `multi-stream diagnostics (files in ${dir}; ${JSON.stringify(phases)}):\n${[a, b, c]
            .map(
              (streamName) =>
                `  ${streamName}: written ${stream.writtenTo(streamName).length}, ${JSON.stringify(
                  verify(
                    stream.writtenTo(streamName),
                    processed.filter((line) => line.st === streamName),
                  ),
                )}`,
            )
            .join('\n')}\nlast events:\n${fleet.events
            .slice(-40)
            .map((event) => `  ${event.workerId} ${event.type} ${event.leaseKey ?? ''}`)
            .join('\n')}\n`,
        );
        for (const workerId of ['w1', 'w2', 'w3', 'w4']) {
          const stderr = fleet.stderrOf(workerId);
          if (stderr !== '') process.stderr.write(`${workerId} stderr:\n${stderr.slice(-3_000)}\n`);
        }
      });

      // Two streams, three workers.
      const workers = ['w1', 'w2', 'w3'];
      await Promise.all(workers.map((workerId) => fleet.spawn(workerId)));
      await waitFor(balanced(fleet, workers, 4), 20_000, 'the two streams’ four leases spread');
      phase('spread');
      const producers = new Map([
        [a, produceContinuously(stream, a, 40, 60)],
        [b, produceContinuously(stream, b, 40, 60)],
      ]);
      await waitFor(
        () => fleet.distinctCount(a) >= 200 && fleet.distinctCount(b) >= 200,
        30_000,
        'records of both streams',
      );
      expect(fleet.distinctCount(c)).toBe(0);

      // A third stream, listed while the fleet runs: read from its start.
      const addedAt = listStreams([a, b, c]);
      await waitFor(
        () => fleet.distinctCount(c) >= BEFORE_LISTED,
        20_000,
        'what the added stream held before',
      );
      phase('added');
      expect(linesOf(c).every((line) => line.t > addedAt)).toBe(true);
      producers.set(c, produceContinuously(stream, c, 40, 60));

      // A split on the first stream.
      const [splitParent] = byHashKey(await stream.openShards(a));
      const splitParentId = splitParent?.ShardId ?? '';
      await stream.split(a, splitParentId);
      const splitChildren = (await stream.openShards(a))
        .filter((shard) => shard.ParentShardId === splitParentId)
        .map((shard) => shard.ShardId);
      expect(splitChildren).toHaveLength(2);
      await waitFor(
        () => splitChildren.every((shardId) => linesOf(a).some((line) => line.s === shardId)),
        20_000,
        'both children of the split read',
      );
      phase('split');

      // The second stream removed: what is written to it right after is still read.
      await producers.get(b)?.stop();
      producers.delete(b);
      const removedLeases = (await leaseStore.leases.list()).filter(onStream(b));
      expect(removedLeases).toHaveLength(2);
      const removedAt = listStreams([a, c]);
      await stream.produce(b, AFTER_REMOVAL, 40);

      // A merge on the third stream.
      const [left, right] = byHashKey(await stream.openShards(c));
      await stream.merge(c, left?.ShardId ?? '', right?.ShardId ?? '');
      const [merged] = (await stream.openShards(c)).filter(
        (shard) => shard.ParentShardId === left?.ShardId && shard.AdjacentParentShardId === right?.ShardId,
      );
      expect(merged).toBeDefined();
      await waitFor(
        () => linesOf(c).some((line) => line.s === merged?.ShardId),
        20_000,
        'the merged shard read',
      );
      phase('merged');

      // A crash, then a worker that joins late and takes its share from living owners.
      const victimLeases = [...fleet.leasesOf('w2')];
      expect(victimLeases.length).toBeGreaterThan(0);
      const killedAt = await fleet.kill('w2');
      phase('killed');
      await fleet.spawn('w4');
      await waitFor(() => fleet.leasesOf('w4').size > 0, 20_000, 'the late joiner’s share');
      phase('joined');

      // The removed stream's leases go once the wait has passed, not before.
      await waitFor(
        async () => !(await leaseStore.leases.list()).some(onStream(b)),
        FORMER_WAIT_MS + 20_000,
        'the removed stream’s leases deleted',
      );
      phase('removed');
      const deletions = fleet.events.filter(
        (event) =>
          event.type === 'lease-deleted' && removedLeases.some((lease) => lease.leaseKey === event.leaseKey),
      );
      // A deletion whose answer timed out may have applied without its event: the table says the rest.
      expect(deletions.length).toBeGreaterThan(0);
      const deletedAfterMs = Math.min(...deletions.map((event) => event.at)) - removedAt;
      expect(deletedAfterMs).toBeGreaterThanOrEqual(FORMER_WAIT_MS);

      // Records still flow on the two listed streams: the late joiner processes its share of them (a
      // lease of the removed stream it may have taken first has nothing more to read).
      await waitFor(
        () => fleet.processed().some((line) => line.w === 'w4' && line.st !== b),
        20_000,
        'the late joiner processing records',
      );
      for (const producer of producers.values()) await producer.stop();
      await waitFor(
        () =>
          [a, b, c].every(
            (streamName) => fleet.distinctCount(streamName) >= stream.writtenTo(streamName).length,
          ),
        60_000,
        'every record of every stream',
      );
      phase('drained');
      await fleet.stopAll();
      phase('stopped');

      const processed = fleet.processed();
      const results: Record<string, Verification> = {};
      for (const streamName of [a, b, c]) {
        const written = stream.writtenTo(streamName);
        const result = verify(
          written,
          processed.filter((line) => line.st === streamName),
        );
        results[streamName] = result;
        // Every record processed under this stream's name was written to it, and each one was processed.
        expect(result).toMatchObject({
          written: written.length,
          processedDistinct: written.length,
          lost: 0,
          orderViolations: 0,
        });
      }
      // Records processed twice: only what a worker had processed and not checkpointed when it lost the
      // lease without handing it over — killed, or its renewals kept from the store past the expiry.
      const repeats = classifyRepeats(processed, fleet.events, { workerId: 'w2', at: killedAt });
      expect(repeats.unexplained.slice(0, 5), `${repeats.unexplained.length} unexplained repeats`).toEqual(
        [],
      );

      // Both reshards were followed: the split parent and the merge's parents ended.
      const ended = new Set(
        fleet.events.filter((event) => event.type === 'shard-ended').map((event) => event.leaseKey),
      );
      const keyOf = (streamName: string, shardId: string): string | undefined =>
        [...ended].find(
          (leaseKey) => leaseKey?.endsWith(`:${shardId}`) && leaseKey.includes(`:${streamName}:`),
        );
      expect(keyOf(a, splitParentId)).toBeDefined();
      expect(keyOf(c, left?.ShardId ?? '')).toBeDefined();
      expect(keyOf(c, right?.ShardId ?? '')).toBeDefined();

      // The lease table: the two remaining streams, each lease keyed by its stream identifier.
      const leases = await leaseStore.leases.list();
      expect(new Set(leases.map(streamOf))).toEqual(new Set([a, c]));
      for (const lease of leases) {
        const match = MULTI_STREAM_KEY.exec(lease.leaseKey);
        expect(match, lease.leaseKey).not.toBeNull();
        expect(lease.streamIdentifier).toBe(match?.[1]);
      }
      if (store.rawItems !== undefined) {
        const items = await store.rawItems(applicationName);
        expect(items.length).toBe(leases.length);
        for (const item of items) {
          const leaseKey = item.leaseKey?.S ?? '';
          const match = MULTI_STREAM_KEY.exec(leaseKey);
          expect(match, leaseKey).not.toBeNull();
          expect(item.streamName?.S, leaseKey).toBe(match?.[1]);
          expect(item.shardId?.S, leaseKey).toBe(match?.[2]);
        }
      }

      const duplicates = Object.fromEntries(
        Object.entries(results).map(([streamName, result]) => [streamName, result.duplicates]),
      );
      const leasesExpired = fleet.events.filter(
        (event) => event.type === 'lease-lost' && event.reason === 'expired' && event.workerId !== 'w2',
      ).length;
      process.stdout.write(
        `multi-stream fleet on ${name}: ${Math.round(now() - startedAt)} ms, phases ${JSON.stringify(phases)}, ` +
          `written ${JSON.stringify(Object.fromEntries(Object.entries(results).map(([streamName, result]) => [streamName, result.written])))}, ` +
          `duplicates ${JSON.stringify(duplicates)}: ${repeats.fromKill} after the kill (the killed worker held ${victimLeases.length} leases), ` +
          `${repeats.fromExpiry} after ${leasesExpired} leases expired on living workers, ` +
          `removed stream's leases deleted ${Math.round(deletedAfterMs)} ms after the removal, ` +
          `${fleet.concurrentOwners().length} concurrent owners\n`,
      );
    });
  });
}

describeMultiStreamFleet('sqlite', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'kcl-multistream-sqlite-'));
  return {
    config: { kind: 'sqlite', file: join(dir, 'leases.db') },
    teardown: async () => rmSync(dir, { recursive: true, force: true }),
  };
});

describeMultiStreamFleet('dynamodb', async () => {
  const dynalite = await startDynalite({ separateProcess: true });
  const client = new DynamoDBClient({
    endpoint: dynalite.endpoint,
    region: dynalite.region,
    credentials: { accessKeyId: 'AKIAKCLLOCALSTORE000', secretAccessKey: 'kcl-local-store' },
  });
  return {
    // The application's own table, named after it (the Java layout's default).
    config: { kind: 'dynamo', endpoint: dynalite.endpoint, region: dynalite.region },
    rawItems: async (applicationName) => {
      const items: Array<Record<string, AttributeValue>> = [];
      let start: Record<string, AttributeValue> | undefined;
      do {
        const page = await client.send(
          new ScanCommand({ TableName: applicationName, ConsistentRead: true, ExclusiveStartKey: start }),
        );
        items.push(...(page.Items ?? []));
        start = page.LastEvaluatedKey;
      } while (start !== undefined);
      return items;
    },
    teardown: async () => {
      client.destroy();
      await dynalite.stop();
    },
  };
});
