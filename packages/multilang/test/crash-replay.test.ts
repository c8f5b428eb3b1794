import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openLeaseStore } from '@kcl/stores';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { recordData } from './support/child-output.js';
import { createTestDaemon, FAST_PROPERTIES, PACKAGE_DIR } from './support/daemon-harness.js';
import { createStream, type LocalAws, putRecords, startLocalAws, until } from './support/local-aws.js';

let aws: LocalAws;

beforeAll(async () => {
  aws = await startLocalAws();
});
afterAll(async () => {
  await aws?.stop();
});

const wave = (name: string) =>
  Array.from({ length: 10 }, (_, index) => ({ partitionKey: `key-${index}`, data: `${name}-${index}` }));

describe('a child that crashes mid-batch (kinesis-local, SQLite lease store, npm aws-kcl child)', () => {
  it('processes every record at least once: the replacement child’s checkpoint never covers records it was not sent', async () => {
    const streamName = 'crash-replay';
    const applicationName = 'crash-replay-app';
    const sqlUrl = `sqlite:${join(mkdtempSync(join(tmpdir(), 'kcl-crash-replay-')), 'leases.db')}`;
    await createStream(aws.kinesis, streamName, 1);
    const test = createTestDaemon({
      properties: {
        executableName: 'node test/fixtures/aws-kcl-processor.cjs',
        streamName,
        applicationName,
        workerId: 'crash-replay-worker',
        initialPositionInStream: 'TRIM_HORIZON',
        regionName: aws.kinesisEmulator.region,
        kinesisEndpoint: aws.kinesisEmulator.endpoint,
        'kcl.leaseStore': 'sql',
        'kcl.sqlUrl': sqlUrl,
        ...FAST_PROPERTIES,
      },
      environment: {
        // A child that checkpoints "everything so far" (no argument) at most once a minute: each process
        // checkpoints its first batch only. It dies in the middle of the third batch, once.
        KCL_TEST_CHECKPOINT_EVERY_MS: '60000',
        KCL_TEST_CRASH_ON: 'c-3',
      },
    });
    await test.daemon.start();

    // Batch A is checkpointed by the first child; B is acknowledged but not checkpointed; the child dies in C.
    await putRecords(aws.kinesis, streamName, wave('a'));
    await until(() => recordData(test.childEvents()).size === 10, 30_000, 'batch A');
    await putRecords(aws.kinesis, streamName, wave('b'));
    await until(() => recordData(test.childEvents()).size === 20, 30_000, 'batch B');
    await putRecords(aws.kinesis, streamName, wave('c'));
    await until(() => test.childEvents().some((event) => event.event === 'crash'), 30_000, 'the crash');

    // The replacement gets B replayed and checkpoints after it (its first batch): that checkpoint must
    // stop at the end of B, not at the end of C, or c-3…c-9 are never processed.
    const expected = new Set([...wave('a'), ...wave('b'), ...wave('c')].map((record) => record.data));
    await until(
      () => recordData(test.childEvents()).size === expected.size,
      20_000,
      'every record, the ones after the crash included',
    );
    await test.daemon.stop();
    await test.daemon.stopped();

    const events = test.childEvents();
    expect(recordData(events)).toEqual(expected);
    expect(events.filter((event) => event.event === 'initialize')).toHaveLength(2);
    expect(events.filter((event) => event.event === 'checkpoint' && event.error !== null)).toEqual([]);
    // The final checkpoint (shutdownRequested, no argument) is at the last record, in the SQL lease table.
    const last = events.filter((event) => event.event === 'record').at(-1);
    expect(last?.data).toBe('c-9');
    const store = await openLeaseStore(`${sqlUrl}?table=kcl_leases`, {
      applicationName,
      workingDirectory: PACKAGE_DIR,
    });
    try {
      const [lease] = await store.leases.list();
      expect(lease?.checkpoint.sequenceNumber).toBe(last?.sequenceNumber);
      expect(lease?.owner).toBeNull();
    } finally {
      await store.close();
    }
  });

  it('past kcl.replayBufferTotalMaxBytes, a crash releases only that lease: the shard is read again from its checkpoint, nothing skipped', async () => {
    const streamName = 'replay-budget';
    const sqlUrl = `sqlite:${join(mkdtempSync(join(tmpdir(), 'kcl-replay-budget-')), 'leases.db')}`;
    await createStream(aws.kinesis, streamName, 1);
    const test = createTestDaemon({
      properties: {
        executableName: 'node test/fixtures/aws-kcl-processor.cjs',
        streamName,
        applicationName: 'replay-budget-app',
        workerId: 'replay-budget-worker',
        initialPositionInStream: 'TRIM_HORIZON',
        regionName: aws.kinesisEmulator.region,
        kinesisEndpoint: aws.kinesisEmulator.endpoint,
        'kcl.leaseStore': 'sql',
        'kcl.sqlUrl': sqlUrl,
        // Room for no batch at all, for all shards together.
        'kcl.replayBufferTotalMaxBytes': '1',
        ...FAST_PROPERTIES,
      },
      environment: { KCL_TEST_CHECKPOINT_EVERY_MS: '60000', KCL_TEST_CRASH_ON: 'c-3' },
    });
    await test.daemon.start();
    await putRecords(aws.kinesis, streamName, wave('a'));
    await until(() => recordData(test.childEvents()).size === 10, 30_000, 'batch A');
    await putRecords(aws.kinesis, streamName, wave('b'));
    await until(() => recordData(test.childEvents()).size === 20, 30_000, 'batch B');
    await putRecords(aws.kinesis, streamName, wave('c'));
    const expected = new Set([...wave('a'), ...wave('b'), ...wave('c')].map((record) => record.data));
    await until(() => recordData(test.childEvents()).size === expected.size, 30_000, 'every record');

    // B could not be kept for a replay, so the crash in C released the lease instead; the worker took
    // it again and its new child started at A's checkpoint, reading B and C from Kinesis.
    expect(
      test.logs.some(
        (line) =>
          line.includes('the replay buffer of shard shardId-000000000000 is full') &&
          line.includes('kcl.replayBufferTotalMaxBytes'),
      ),
    ).toBe(true);
    expect(
      test.logs.some(
        (line) => line.includes('ERROR') && line.includes('giving up shard shardId-000000000000'),
      ),
    ).toBe(true);
    expect(test.events.some((event) => event.type === 'lease-released')).toBe(true);
    const initializations = test.childEvents().filter((event) => event.event === 'initialize');
    expect(initializations).toHaveLength(2);
    const lastOfA = test
      .childEvents()
      .filter((event) => event.event === 'record' && event.data === 'a-9')
      .at(0)?.sequenceNumber;
    expect(initializations[1]?.sequenceNumber).toBe(lastOfA);
    await test.daemon.stop();
    // The daemon kept running: it stops now because it was asked to, not because of the crash.
    await expect(test.daemon.stopped()).resolves.toBeUndefined();
  });
});
