import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MultiLangChildError, type MultiLangDaemonOptions } from '../src/index.js';
import { recordData } from './support/child-output.js';
import {
  createTestDaemon,
  FAST_PROPERTIES,
  localAwsProperties,
  type TestDaemon,
} from './support/daemon-harness.js';
import {
  createStream,
  type LocalAws,
  listShards,
  putRecords,
  scanTable,
  splitShard,
  startLocalAws,
  until,
} from './support/local-aws.js';

let aws: LocalAws;

beforeAll(async () => {
  aws = await startLocalAws();
});
afterAll(async () => {
  await aws?.stop();
});

const NODE_CHILD = 'node test/fixtures/aws-kcl-processor.cjs';

function awsKclDaemon(
  streamName: string,
  applicationName: string,
  extra: Record<string, string> = {},
  environment: Record<string, string> = {},
  daemonOptions: Partial<MultiLangDaemonOptions> = {},
): TestDaemon {
  return createTestDaemon({
    properties: {
      executableName: NODE_CHILD,
      streamName,
      applicationName,
      workerId: `${applicationName}-worker`,
      initialPositionInStream: 'TRIM_HORIZON',
      processingLanguage: 'nodejs',
      ...localAwsProperties(aws),
      ...FAST_PROPERTIES,
      ...extra,
    },
    environment,
    daemonOptions,
  });
}

function records(prefix: string, count: number) {
  return Array.from({ length: count }, (_, index) => ({
    partitionKey: `key-${index % 16}`,
    data: `${prefix}-${index}`,
  }));
}

describe('kcl-multilang with the npm aws-kcl child library', () => {
  it('delivers every record, checkpoints in the Java lease table, and stops gracefully with a final checkpoint', async () => {
    await createStream(aws.kinesis, 'basic', 2);
    const written = records('basic', 120);
    await putRecords(aws.kinesis, 'basic', written);
    const test = awsKclDaemon('basic', 'basic-app');
    await test.daemon.start();
    await until(() => recordData(test.childEvents()).size === written.length, 30_000, 'every record');
    expect(test.daemon.childCount).toBe(2);
    await test.daemon.stop();
    await test.daemon.stopped();

    const events = test.childEvents();
    expect(recordData(events)).toEqual(new Set(written.map((record) => record.data)));
    // Every record arrived with its metadata, as the Java daemon sends it.
    for (const event of events.filter((candidate) => candidate.event === 'record')) {
      expect(event.subSequenceNumber).toBe(0);
      expect(typeof event.approximateArrivalTimestamp).toBe('number');
      expect(event.partitionKey).toMatch(/^key-/);
    }
    expect(events.filter((event) => event.event === 'checkpoint' && event.error !== null)).toEqual([]);

    // One child per shard, each told shutdownRequested (it checkpointed) and then leaseLost.
    const shards = [...new Set(events.map((event) => event.shardId))].sort();
    expect(shards).toEqual(['shardId-000000000000', 'shardId-000000000001']);
    for (const shardId of shards) {
      const mine = events.filter((event) => event.shardId === shardId);
      expect(new Set(mine.map((event) => event.pid)).size).toBe(1);
      expect(mine[0]).toMatchObject({
        event: 'initialize',
        sequenceNumber: 'TRIM_HORIZON',
        subSequenceNumber: 0,
      });
      expect(mine.slice(-2).map((event) => event.event)).toEqual(['shutdownRequested', 'leaseLost']);
      expect(mine.at(-2)?.error).toBeNull();
    }
    expect(test.daemon.childCount).toBe(0);

    // The lease table is the Java KCL's: leaseKey/leaseOwner/leaseCounter/checkpoint, released on stop.
    const items = await scanTable(aws.dynamo, 'basic-app');
    expect(items.map((item) => item.leaseKey?.S).sort()).toEqual(shards);
    for (const item of items) {
      const shardId = item.leaseKey?.S;
      const last = events.filter((event) => event.event === 'record' && event.shardId === shardId).at(-1);
      expect(item.checkpoint?.S).toBe(last?.sequenceNumber);
      expect(item.checkpointSubSequenceNumber?.N).toBe('0');
      expect(item.leaseOwner).toBeUndefined();
      expect(Number(item.leaseCounter?.N)).toBeGreaterThan(0);
    }
  });

  it('follows a split: the parent child checkpoints SHARD_END, then the children shards are read', async () => {
    await createStream(aws.kinesis, 'split', 1);
    const before = records('before', 40);
    await putRecords(aws.kinesis, 'split', before);
    const test = awsKclDaemon('split', 'split-app');
    await test.daemon.start();
    await until(
      () => recordData(test.childEvents()).size === before.length,
      30_000,
      'the records before the split',
    );
    await splitShard(aws.kinesis, 'split', 'shardId-000000000000');
    const after = records('after', 40);
    await putRecords(aws.kinesis, 'split', after);
    await until(
      () => recordData(test.childEvents()).size === before.length + after.length,
      30_000,
      'the records after the split',
    );
    await test.daemon.stop();
    await test.daemon.stopped();

    const events = test.childEvents();
    const parentEvents = events.filter((event) => event.shardId === 'shardId-000000000000');
    expect(parentEvents.filter((event) => event.event === 'shardEnded')).toEqual([
      expect.objectContaining({ event: 'shardEnded', error: null }),
    ]);
    expect(parentEvents.at(-1)?.event).toBe('shardEnded');
    const children = (await listShards(aws.kinesis, 'split'))
      .filter((shard) => shard.ParentShardId === 'shardId-000000000000')
      .map((shard) => shard.ShardId as string)
      .sort();
    expect(children).toHaveLength(2);
    // Every record written after the split went to a child shard.
    for (const event of events.filter(
      (candidate) => candidate.event === 'record' && candidate.data?.startsWith('after'),
    )) {
      expect(children).toContain(event.shardId);
    }

    const items = await scanTable(aws.dynamo, 'split-app');
    const parent = items.find((item) => item.leaseKey?.S === 'shardId-000000000000');
    // The parent lease may already be cleaned up; if it is still there it is finished.
    if (parent !== undefined) expect(parent.checkpoint?.S).toBe('SHARD_END');
    for (const child of children) {
      const item = items.find((candidate) => candidate.leaseKey?.S === child);
      expect(item?.parentShardId?.SS).toEqual(['shardId-000000000000']);
      expect(item?.checkpoint?.S).toMatch(/^\d+$/);
    }
    expect(test.events.some((event) => event.type === 'shard-ended')).toBe(true);
  });

  it('restarts a crashed child without disturbing the other shard, and loses no record', async () => {
    await createStream(aws.kinesis, 'crash', 2);
    const written = records('crash', 100);
    const test = awsKclDaemon('crash', 'crash-app', {}, { KCL_TEST_CRASH_ON: 'crash-50' });
    await putRecords(aws.kinesis, 'crash', written.slice(0, 40));
    await test.daemon.start();
    await until(() => recordData(test.childEvents()).size === 40, 30_000, 'the first records');
    await putRecords(aws.kinesis, 'crash', written.slice(40));
    await until(() => recordData(test.childEvents()).size === written.length, 30_000, 'every record');

    const events = test.childEvents();
    // One child died, on the record it was told to crash on; its shard is one of the two.
    const crashes = events.filter((event) => event.event === 'crash');
    expect(crashes).toEqual([
      expect.objectContaining({
        data: 'crash-50',
        shardId: expect.stringMatching(/^shardId-00000000000[01]$/),
      }),
    ]);
    const crashedShard = crashes[0]?.shardId as string;
    const otherShard = crashedShard.endsWith('0') ? 'shardId-000000000001' : 'shardId-000000000000';
    const initializations = (shardId: string) =>
      events.filter((event) => event.event === 'initialize' && event.shardId === shardId);
    // The crashed shard got a new child, initialized at its last checkpoint; the other kept its only child.
    expect(initializations(crashedShard)).toHaveLength(2);
    expect(initializations(crashedShard)[1]?.sequenceNumber).toMatch(/^\d+$/);
    expect(
      new Set(events.filter((event) => event.shardId === crashedShard).map((event) => event.pid)).size,
    ).toBe(2);
    expect(initializations(otherShard)).toHaveLength(1);
    expect(
      new Set(events.filter((event) => event.shardId === otherShard).map((event) => event.pid)).size,
    ).toBe(1);
    expect(test.logs.some((line) => line.includes('child failed during processRecords'))).toBe(true);

    await test.daemon.stop();
    await expect(test.daemon.stopped()).resolves.toBeUndefined();
  });

  it('ends and replaces a child that answers with the wrong status', async () => {
    await createStream(aws.kinesis, 'wrong-status', 2);
    const written = records('wrong', 60);
    await putRecords(aws.kinesis, 'wrong-status', written);
    const test = awsKclDaemon(
      'wrong-status',
      'wrong-status-app',
      {},
      { KCL_TEST_WRONG_STATUS_ON: 'wrong-30' },
    );
    await test.daemon.start();
    await until(() => recordData(test.childEvents()).size === written.length, 30_000, 'every record');
    const events = test.childEvents();
    const liars = events.filter((event) => event.event === 'wrong-status');
    expect(liars).toEqual([
      expect.objectContaining({
        data: 'wrong-30',
        shardId: expect.stringMatching(/^shardId-00000000000[01]$/),
      }),
    ]);
    const liar = liars[0];
    expect(
      test.logs.some((line) => line.includes('answered processRecords with a status for \\"initialize\\"')),
    ).toBe(true);
    const liarShard = liar?.shardId as string;
    expect(
      events.filter((event) => event.event === 'initialize' && event.shardId === liarShard),
    ).toHaveLength(2);
    expect(
      events.filter((event) => event.event === 'initialize' && event.shardId !== liarShard),
    ).toHaveLength(1);
    await test.daemon.stop();
    await test.daemon.stopped();
  });

  it('ends a child that does not answer within timeoutInSeconds and carries on with a new one', async () => {
    await createStream(aws.kinesis, 'hang', 1);
    const written = records('hang', 30);
    await putRecords(aws.kinesis, 'hang', written);
    const test = awsKclDaemon('hang', 'hang-app', { timeoutInSeconds: '1' }, { KCL_TEST_HANG_ON: 'hang-10' });
    await test.daemon.start();
    await until(() => recordData(test.childEvents()).size === written.length, 30_000, 'every record');
    const events = test.childEvents();
    expect(events.some((event) => event.event === 'hang')).toBe(true);
    expect(events.filter((event) => event.event === 'initialize')).toHaveLength(2);
    expect(test.logs.some((line) => line.includes('timeoutInSeconds'))).toBe(true);
    await test.daemon.stop();
    await test.daemon.stopped();
  });

  it('gives up the lease of a shard whose child fails on every attempt, so another worker processes it', async () => {
    await createStream(aws.kinesis, 'poison', 1);
    const written = records('poison', 10);
    await putRecords(aws.kinesis, 'poison', written);
    const sent: {
      MetricData?: { MetricName?: string; Dimensions?: { Name?: string; Value?: string }[] }[];
    }[] = [];
    const cloudWatch = {
      send: async (command: unknown) => {
        sent.push((command as { input: (typeof sent)[number] }).input);
        return {};
      },
    };
    const givenUp: unknown[] = [];
    // Worker A's children die on poison-5 every time (its environment has the poison, B's has not).
    const first = awsKclDaemon(
      'poison',
      'poison-app',
      {
        workerId: 'worker-a',
        'kcl.childFailureLimit': '2',
        metricsLevel: 'SUMMARY',
        metricsBufferTimeMillis: '200',
      },
      { KCL_TEST_CRASH_ALWAYS_ON: 'poison-5' },
      { cloudWatch, onShardGivenUp: (error) => givenUp.push(error) },
    );
    await first.daemon.start();
    await until(() => givenUp.length > 0, 30_000, 'worker A to give the shard up');
    expect(
      first.logs.some(
        (line) =>
          line.includes('ERROR') &&
          line.includes('giving up shard shardId-000000000000') &&
          line.includes('kcl.childFailureLimit'),
      ),
    ).toBe(true);
    await until(
      () => first.events.some((event) => event.type === 'lease-released'),
      10_000,
      'the lease to be released',
    );

    const second = awsKclDaemon('poison', 'poison-app', { workerId: 'worker-b' });
    await second.daemon.start();
    await until(
      () => recordData(second.childEvents()).size === written.length,
      60_000,
      'worker B to process every record',
    );
    await Promise.all([first.daemon.stop(), second.daemon.stop()]);
    await Promise.all([first.daemon.stopped(), second.daemon.stopped()]);
    expect(first.childEvents().filter((event) => event.event === 'crash').length).toBeGreaterThanOrEqual(2);
    expect(recordData(first.childEvents()).has('poison-5')).toBe(false);
    const metricNames = sent.flatMap((input) => (input.MetricData ?? []).map((datum) => datum.MetricName));
    expect(metricNames).toContain('LeasesGivenUp');
    expect(metricNames).toContain('ChildFailures');
    const [item] = await scanTable(aws.dynamo, 'poison-app');
    expect(item?.checkpoint?.S).toBe(
      second
        .childEvents()
        .filter((event) => event.event === 'record')
        .at(-1)?.sequenceNumber,
    );
  });

  it('stops with the failure when kcl.exitOnChildFailure asks for the Java behaviour', async () => {
    await createStream(aws.kinesis, 'exit-on-failure', 2);
    await putRecords(aws.kinesis, 'exit-on-failure', records('exit', 40));
    const test = awsKclDaemon(
      'exit-on-failure',
      'exit-on-failure-app',
      { 'kcl.exitOnChildFailure': 'true' },
      { KCL_TEST_CRASH_ON: 'exit-20' },
    );
    await test.daemon.start();
    const failure = await test.daemon.stopped().then(
      () => null,
      (error: unknown) => error,
    );
    expect(failure).toBeInstanceOf(MultiLangChildError);
    expect((failure as MultiLangChildError).reason).toBe('exited');
    expect(test.daemon.childCount).toBe(0);
    // The stop was graceful for the other shard: its child was asked to checkpoint.
    const events = test.childEvents();
    const crashed = events.find((event) => event.event === 'crash')?.shardId;
    expect(events.some((event) => event.event === 'shutdownRequested' && event.shardId !== crashed)).toBe(
      true,
    );
    const items = await scanTable(aws.dynamo, 'exit-on-failure-app');
    for (const item of items) expect(item.leaseOwner).toBeUndefined();
  });

  it('hands a lease to a second worker: the first worker’s child gets shutdownRequested, then leaseLost, and exits', async () => {
    await createStream(aws.kinesis, 'fleet', 2);
    await putRecords(aws.kinesis, 'fleet', records('fleet-a', 20));
    const first = awsKclDaemon('fleet', 'fleet-app', { workerId: 'worker-a' });
    await first.daemon.start();
    await until(() => recordData(first.childEvents()).size === 20, 30_000, 'the first records');
    expect(first.daemon.childCount).toBe(2);

    const second = awsKclDaemon('fleet', 'fleet-app', { workerId: 'worker-b' });
    await second.daemon.start();
    await until(
      () => second.daemon.childCount === 1 && first.daemon.childCount === 1,
      30_000,
      'one lease to move',
    );
    await putRecords(aws.kinesis, 'fleet', records('fleet-b', 20));
    await until(
      () => recordData(first.childEvents()).size + recordData(second.childEvents()).size >= 40,
      30_000,
      'the later records on both workers',
    );
    const moved = second.childEvents().find((event) => event.event === 'initialize')?.shardId;
    const lost = first.childEvents().filter((event) => event.shardId === moved);
    // A steal is a hand-off: the child is asked to checkpoint (shutdownRequested, as the Java daemon
    // sends it), the lease moves, then leaseLost and EOF.
    expect(
      lost.map((event) => event.event).filter((event) => event !== 'record' && event !== 'checkpoint'),
    ).toEqual(['initialize', 'shutdownRequested', 'leaseLost']);
    // The second worker starts at the first one's final checkpoint: no record of the shard twice.
    const before = recordData(lost);
    const after = recordData(second.childEvents().filter((event) => event.shardId === moved));
    expect([...after].filter((data) => before.has(data))).toEqual([]);
    await Promise.all([first.daemon.stop(), second.daemon.stop()]);
    await Promise.all([first.daemon.stopped(), second.daemon.stopped()]);
    const owners = (await scanTable(aws.dynamo, 'fleet-app')).map((item) => item.leaseOwner?.S ?? null);
    expect(owners).toEqual([null, null]);
  });

  it('bounds a graceful stop: a child that never answers shutdownRequested is terminated and the lease released', async () => {
    await createStream(aws.kinesis, 'stuck-shutdown', 1);
    await putRecords(aws.kinesis, 'stuck-shutdown', records('stuck', 5));
    const test = awsKclDaemon(
      'stuck-shutdown',
      'stuck-shutdown-app',
      { shutdownGraceMillis: '3000' },
      { KCL_TEST_HANG_ON_SHUTDOWN: '1' },
    );
    await test.daemon.start();
    await until(() => recordData(test.childEvents()).size === 5, 30_000, 'the records');
    const started = Date.now();
    await test.daemon.stop();
    await test.daemon.stopped();
    // Half the grace waits for shutdownRequested; then the lease is released and the child terminated.
    expect(Date.now() - started).toBeLessThan(3_000);
    // The child never saw leaseLost: it was ended (stdin closed, then SIGTERM) while still busy.
    expect(test.childEvents().at(-1)?.event).toBe('hang-on-shutdown');
    expect(
      test.logs.some((line) =>
        line.includes('the lease ended while the child was still busy; terminating the child'),
      ),
    ).toBe(true);
    expect(test.logs.some((line) => line.includes('ERROR'))).toBe(false);
    expect(test.daemon.childCount).toBe(0);
    const [item] = await scanTable(aws.dynamo, 'stuck-shutdown-app');
    expect(item?.leaseOwner).toBeUndefined();
  });

  it('publishes the KCL metrics to CloudWatch in the application namespace when metricsLevel asks for them', async () => {
    await createStream(aws.kinesis, 'metrics', 1);
    await putRecords(aws.kinesis, 'metrics', records('metrics', 10));
    // No CloudWatch emulator exists here: a client that keeps what it is sent stands in for it.
    const sent: {
      Namespace?: string;
      MetricData?: { MetricName?: string; Dimensions?: { Name?: string; Value?: string }[] }[];
    }[] = [];
    const cloudWatch = {
      send: async (command: unknown) => {
        sent.push((command as { input: (typeof sent)[number] }).input);
        return {};
      },
    };
    const test = awsKclDaemon(
      'metrics',
      'metrics-app',
      { metricsLevel: 'SUMMARY', metricsBufferTimeMillis: '200' },
      {},
      { cloudWatch },
    );
    await test.daemon.start();
    await until(() => recordData(test.childEvents()).size === 10, 30_000, 'the records');
    await test.daemon.stop();
    await test.daemon.stopped();
    expect(sent.length).toBeGreaterThan(0);
    expect(new Set(sent.map((input) => input.Namespace))).toEqual(new Set(['metrics-app']));
    const names = new Set(sent.flatMap((input) => (input.MetricData ?? []).map((datum) => datum.MetricName)));
    expect(names.has('RecordsProcessed')).toBe(true);
    expect(names.has('MillisBehindLatest')).toBe(true);
  });
});
