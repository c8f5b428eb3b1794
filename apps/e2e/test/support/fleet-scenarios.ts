import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DescribeStreamConsumerCommand, DescribeStreamSummaryCommand } from '@aws-sdk/client-kinesis';
import type { Lease } from '@kcl/core';
import { FLEET_TIMINGS } from '@kcl/testkit';
import { afterAll, afterEach, beforeAll, describe, expect, it, onTestFailed } from 'vitest';
import { type OpenedStore, openStore, type StoreConfig } from '../../src/store-config.js';
import type { WorkerProcessConfig } from '../../src/worker-process.js';
import { balanced, FleetHarness, verify, waitFor } from './harness.js';
import { describePlannedMoves } from './planned-move-scenarios.js';
import { byHashKey, produceContinuously, startTestStream, type TestStream } from './stream.js';

export interface StoreUnderTest {
  /** The store config for worker processes; one physical table per test file is fine (applications differ). */
  readonly config: StoreConfig;
  teardown(): Promise<void>;
}

/** The timings the worker processes run with (the harness's default). */
const TIMING = FLEET_TIMINGS.processes;

let counter = 0;

/** Consumer options of every worker of a fleet, beyond the timings. */
type ConsumerOverrides = NonNullable<WorkerProcessConfig['consumer']>;

/** One test's fleet: its own stream and application. */
export interface FleetTest {
  /** Counts the fleets of a test file from 1. */
  readonly index: number;
  readonly streamName: string;
  readonly applicationName: string;
}

export interface FleetSuiteOptions {
  /** Why the suite cannot run here (a missing service), or nothing. */
  readonly skip?: string | null;
  /**
   * Consumer options every worker of a test runs with (fan-out retrieval with a consumer of the test's
   * own, say); a scenario's own (`maxLeasesToSteal`, …) go on top.
   */
  readonly consumer?: (test: FleetTest) => ConsumerOverrides;
  /**
   * The first scenario's records, and whether its third worker joins late — while they are being
   * written, so that it gets its share by taking leases from living owners. Default 20 000, all three
   * workers from the start.
   */
  readonly records?: { readonly count: number; readonly lateJoiner: boolean };
  /** Whether the planned-move scenarios run. Default true. */
  readonly plannedMoves?: boolean;
  /**
   * Added to the kill -9 scenario's bound on how long after the kill a taken-over shard's first record
   * is processed (the new owner's first read may wait on the retrieval: a subscription, say). Default 0.
   */
  readonly resumeAllowanceMs?: number;
}

/** The fleet tests of ARCHITECTURE §6 / the consumer issue, against one lease store, with workers as OS processes. */
export function describeFleetScenarios(
  name: string,
  setup: () => Promise<StoreUnderTest>,
  options: FleetSuiteOptions = {},
): void {
  const records = options.records ?? { count: 20_000, lateJoiner: false };
  describe.skipIf(options.skip !== undefined && options.skip !== null)(
    `fleet on ${name}${options.skip ? ` (skipped: ${options.skip})` : ''}`,
    () => {
      let stream: TestStream;
      let store: StoreUnderTest;
      const harnesses: FleetHarness[] = [];
      const opened: OpenedStore[] = [];
      /** Each fleet's stream and consumer options, for `expectRetrievalUsed`. */
      const retrievals = new Map<
        FleetHarness,
        { streamName: string; applicationName: string; consumer: ConsumerOverrides }
      >();

      beforeAll(async () => {
        [stream, store] = await Promise.all([startTestStream(), setup()]);
      });
      afterEach(async () => {
        for (const fleetHarness of harnesses) await fleetHarness.stopAll();
      });
      afterAll(async () => {
        for (const fleetHarness of harnesses) await fleetHarness.stopAll();
        for (const handle of opened) await handle.close();
        await stream?.stop();
        await store?.teardown();
      });

      const fleet = async (
        shards: number,
        scenarioConsumer?: ConsumerOverrides,
      ): Promise<{ harness: FleetHarness; streamName: string; applicationName: string }> => {
        counter += 1;
        const streamName = `fleet-${name}-${counter}`;
        const applicationName = `app-${name}-${counter}-${Date.now()}`;
        const consumer = {
          ...options.consumer?.({ index: counter, streamName, applicationName }),
          ...scenarioConsumer,
        };
        stream.written.length = 0;
        await stream.create(streamName, shards);
        const harness = new FleetHarness({
          dir: mkdtempSync(join(tmpdir(), 'kcl-fleet-')),
          store: store.config,
          kinesisEndpoint: stream.emulator.endpoint,
          streamName,
          applicationName,
          consumer,
        });
        retrievals.set(harness, { streamName, applicationName, consumer });
        harnesses.push(harness);
        onTestFailed(() => {
          // Show what the fleet was doing when the test failed.
          const lines = harness.processed();
          const overlaps = harness.concurrentOwners();
          process.stderr.write(
            `fleet diagnostics: written ${stream.written.length}, processed ${lines.length}, distinct ${new Set(lines.map((line) => line.d)).size}, ` +
              `${verify(stream.written, lines).duplicates} duplicates, ${overlaps.length} concurrent owners${overlaps.length > 0 ? ` (${overlaps.slice(0, 5).join('; ')})` : ''}\n` +
              `last events:\n${harness.events
                .slice(-30)
                .map((event) => `  ${event.workerId} ${event.type} ${event.leaseKey ?? ''}`)
                .join('\n')}\n`,
          );
          for (const workerId of ['w1', 'w2', 'w3', 'w4']) {
            const stderr = harness.stderrOf(workerId);
            if (stderr !== '') process.stderr.write(`${workerId} stderr:\n${stderr.slice(-3_000)}\n`);
          }
        });
        return { harness, streamName, applicationName };
      };

      const openApplicationStore = async (applicationName: string) => {
        const handle = await openStore(store.config, applicationName);
        opened.push(handle);
        return handle.store;
      };

      /**
       * A fan-out fleet read through its registered stream consumer: without this, a worker that
       * ignored `retrieval` would pass every scenario by polling.
       */
      const expectRetrievalUsed = async (fleetHarness: FleetHarness): Promise<void> => {
        const used = retrievals.get(fleetHarness);
        const retrieval = used?.consumer.retrieval;
        if (used === undefined || retrieval?.mode !== 'fanout') return;
        const summary = await stream.client.send(
          new DescribeStreamSummaryCommand({ StreamName: used.streamName }),
        );
        // The consumer's default name is the application's.
        const consumerName = retrieval.consumerName ?? used.applicationName;
        const status = await stream.client
          .send(
            new DescribeStreamConsumerCommand({
              StreamARN: summary.StreamDescriptionSummary?.StreamARN,
              ConsumerName: consumerName,
            }),
          )
          .then(
            (described) => described.ConsumerDescription?.ConsumerStatus,
            (error: unknown) => `none (${(error as { name?: string }).name})`,
          );
        expect(status, `the stream consumer ${consumerName} the fan-out workers read with`).toBe('ACTIVE');
      };

      const joining = records.lateJoiner ? ', the third joining late' : '';
      const count = records.count.toLocaleString('en-US').replaceAll(',', ' ');
      it(`processes ${count} records over 200 keys with 3 workers${joining} on 4 shards: none lost, in order, none twice`, async () => {
        const { harness: fleetHarness, streamName } = await fleet(4);
        const workers = ['w1', 'w2', 'w3'];
        const first = records.lateJoiner ? workers.slice(0, 2) : workers;
        for (const workerId of first) await fleetHarness.spawn(workerId);
        await waitFor(balanced(fleetHarness, first, 4), 20_000, 'an even spread before producing');
        const producing = stream.produce(streamName, records.count, 200);
        // Awaited below; a failure while the late joiner starts is not left unhandled meanwhile.
        producing.catch(() => undefined);
        if (records.lateJoiner) {
          // Joins a fleet whose every lease is held and busy: it gets its share by taking leases over.
          await waitFor(
            () => fleetHarness.processedCount() >= records.count / 4,
            60_000,
            'a quarter of the records',
          );
          await fleetHarness.spawn('w3');
          await waitFor(balanced(fleetHarness, workers, 4), 20_000, 'the late joiner’s share');
        }
        await producing;
        await waitFor(() => fleetHarness.distinctCount() >= records.count, 200_000, 'every record');
        await fleetHarness.stopAll();
        const result = verify(stream.written, fleetHarness.processed());
        expect(result).toEqual({
          written: records.count,
          processedDistinct: records.count,
          lost: 0,
          duplicates: 0,
          orderViolations: 0,
        });
        expect(new Set(fleetHarness.processed().map((line) => line.w))).toEqual(new Set(workers));
        await expectRetrievalUsed(fleetHarness);
      });

      it('moves a kill -9’d worker’s shards to the others in time, replaying only what it had not checkpointed', async () => {
        const { harness: fleetHarness, streamName, applicationName } = await fleet(3);
        const workers = ['w1', 'w2', 'w3'];
        for (const workerId of workers) await fleetHarness.spawn(workerId);
        await waitFor(balanced(fleetHarness, workers, 3), 20_000, 'an even spread');
        const producer = produceContinuously(stream, streamName, 150, 40);
        await waitFor(() => fleetHarness.processedCount() >= 1_500, 30_000, 'records flowing');
        const victimLeases = [...fleetHarness.leasesOf('w2')];
        expect(victimLeases.length).toBeGreaterThan(0);
        const killedAt = await fleetHarness.kill('w2');
        const leaseStore = await openApplicationStore(applicationName);
        const checkpoints = new Map<string, Lease | null>();
        for (const leaseKey of victimLeases) checkpoints.set(leaseKey, await leaseStore.leases.get(leaseKey));
        await waitFor(
          () =>
            victimLeases.every((leaseKey) =>
              fleetHarness
                .processed()
                .some((line) => line.s === leaseKey && line.w !== 'w2' && line.t > killedAt),
            ),
          30_000,
          'the victim’s shards resuming elsewhere',
        );
        await producer.stop();
        await waitFor(() => fleetHarness.distinctCount() >= stream.written.length, 120_000, 'every record');
        await fleetHarness.stopAll();

        const processed = fleetHarness.processed();
        const limit =
          TIMING.leaseExpiryMs +
          TIMING.rebalanceIntervalMs * 1.25 +
          TIMING.pollIntervalMs +
          (options.resumeAllowanceMs ?? 0);
        for (const leaseKey of victimLeases) {
          const resumed = processed.find(
            (line) => line.s === leaseKey && line.w !== 'w2' && line.t > killedAt,
          );
          // Records keep arriving every ~50 ms, so the first one after the takeover shows when it happened.
          expect((resumed?.t ?? Number.POSITIVE_INFINITY) - killedAt).toBeLessThan(limit + 2_000);
        }
        const result = verify(stream.written, processed);
        expect(result.lost).toBe(0);
        expect(result.orderViolations).toBe(0);
        // Every record processed twice was processed first by the killed worker, after its last checkpoint.
        const first = new Map<string, (typeof processed)[number]>();
        for (const line of processed) {
          const earlier = first.get(line.d);
          if (earlier === undefined) {
            first.set(line.d, line);
            continue;
          }
          expect(earlier.w).toBe('w2');
          const checkpoint = checkpoints.get(earlier.s)?.checkpoint;
          expect(
            checkpoint === undefined ||
              checkpoint.isSentinel ||
              BigInt(earlier.q) > BigInt(checkpoint.sequenceNumber),
          ).toBe(true);
        }
        await expectRetrievalUsed(fleetHarness);
      });

      it('follows a split, a merge and UpdateShardCount while records flow: every key stays in order', async () => {
        const { harness: fleetHarness, streamName } = await fleet(2);
        const workers = ['w1', 'w2', 'w3'];
        for (const workerId of workers) await fleetHarness.spawn(workerId);
        const producer = produceContinuously(stream, streamName, 100, 30);
        await waitFor(() => fleetHarness.processedCount() >= 500, 30_000, 'records flowing');
        const [first, second] = byHashKey(await stream.openShards(streamName));
        await stream.split(streamName, first?.ShardId ?? '');
        await waitFor(() => fleetHarness.processedCount() >= 1_500, 30_000, 'records after the split');
        const children = byHashKey(
          (await stream.openShards(streamName)).filter((shard) => shard.ParentShardId === first?.ShardId),
        );
        await stream.merge(streamName, children[1]?.ShardId ?? '', second?.ShardId ?? '');
        await waitFor(() => fleetHarness.processedCount() >= 2_500, 30_000, 'records after the merge');
        await stream.updateShardCount(streamName, 4);
        await waitFor(() => fleetHarness.processedCount() >= 3_500, 30_000, 'records after UpdateShardCount');
        await producer.stop();
        await waitFor(() => fleetHarness.distinctCount() >= stream.written.length, 120_000, 'every record');
        await fleetHarness.stopAll();
        const result = verify(stream.written, fleetHarness.processed());
        expect(result.lost).toBe(0);
        expect(result.orderViolations).toBe(0);
        expect(
          fleetHarness.events.filter((event) => event.type === 'shard-ended').length,
        ).toBeGreaterThanOrEqual(5);
        await expectRetrievalUsed(fleetHarness);
      });

      it('hands a gracefully stopped worker’s shards over within two rebalance intervals, processing nothing twice', async () => {
        const { harness: fleetHarness, streamName } = await fleet(3);
        const workers = ['w1', 'w2', 'w3'];
        for (const workerId of workers) await fleetHarness.spawn(workerId);
        await waitFor(balanced(fleetHarness, workers, 3), 20_000, 'an even spread');
        const producer = produceContinuously(stream, streamName, 150, 40);
        await waitFor(() => fleetHarness.processedCount() >= 1_000, 30_000, 'records flowing');
        const leaving = [...fleetHarness.leasesOf('w2')];
        const stoppedAt = await fleetHarness.stop('w2');
        await waitFor(
          () =>
            leaving.every((leaseKey) =>
              fleetHarness.events.some(
                (event) =>
                  event.type === 'lease-taken' && event.leaseKey === leaseKey && event.at > stoppedAt,
              ),
            ),
          10_000,
          'the takeover',
        );
        const released = Math.max(
          ...fleetHarness.events
            .filter((event) => event.type === 'lease-released' && event.workerId === 'w2')
            .map((event) => event.at),
        );
        const taken = Math.max(
          ...leaving.map((leaseKey) =>
            Math.min(
              ...fleetHarness.events
                .filter(
                  (event) =>
                    event.type === 'lease-taken' && event.leaseKey === leaseKey && event.at > stoppedAt,
                )
                .map((event) => event.at),
            ),
          ),
        );
        await producer.stop();
        await waitFor(() => fleetHarness.distinctCount() >= stream.written.length, 120_000, 'every record');
        await fleetHarness.stopAll();
        expect(taken - released).toBeLessThan(2 * TIMING.rebalanceIntervalMs * 1.25 + 500);
        const result = verify(stream.written, fleetHarness.processed());
        expect(result).toMatchObject({ lost: 0, duplicates: 0, orderViolations: 0 });
        await expectRetrievalUsed(fleetHarness);
      });

      if (options.plannedMoves ?? true) {
        describePlannedMoves({ stream: () => stream, fleet, openApplicationStore });
      }
    },
  );
}
