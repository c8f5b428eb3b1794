import { ExpiredIteratorException, ProvisionedThroughputExceededException } from '@aws-sdk/client-kinesis';
import { ApplicationMigratedError, ConfigurationError, type KclEvent } from '@kcl/core';
import { createMemoryLeaseStore, MemoryLeaseTable } from '@kcl/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createConsumer, type RecordProcessor } from '../src/index.js';
import { FAST_TIMING } from './support/fleet.js';
import { createStream, type LocalKinesis, putRecords, startLocalKinesis, until } from './support/kinesis.js';

let kinesis: LocalKinesis;
beforeAll(async () => {
  kinesis = await startLocalKinesis();
});
afterAll(async () => {
  await kinesis?.stop();
});

const data = (count: number, prefix = 'x') =>
  Array.from({ length: count }, (_, index) => ({
    partitionKey: `k${index % 5}`,
    data: `${prefix}-${index}`,
  }));

describe('failures', () => {
  it('retries a batch whose processRecords throws, without moving the checkpoint past it', async () => {
    await createStream(kinesis.client, 'throws', 1);
    await putRecords(kinesis.client, 'throws', data(30));
    const store = createMemoryLeaseStore({ applicationName: 'throws' });
    const deliveries: string[][] = [];
    const checkpointsDuringFailures: string[] = [];
    const events: KclEvent[] = [];
    let failures = 0;
    const consumer = createConsumer({
      streamName: 'throws',
      applicationName: 'throws',
      kinesis: kinesis.newClient(),
      leaseStore: store,
      initialPosition: 'TRIM_HORIZON',
      ...FAST_TIMING,
      onEvent: (event) => events.push(event),
      processor: (): RecordProcessor => ({
        async processRecords({ records, checkpointer }) {
          deliveries.push(records.map((record) => Buffer.from(record.data).toString()));
          if (failures < 3) {
            failures += 1;
            checkpointsDuringFailures.push((await store.leases.list())[0]?.checkpoint.toString() ?? '');
            throw new Error('downstream unavailable');
          }
          await checkpointer.checkpoint();
        },
      }),
    });
    await consumer.start();
    await until(() => failures === 3 && deliveries.length >= 4, 20_000, 'retries');
    await consumer.stop();
    expect(deliveries[0]).toEqual(data(30).map((record) => record.data));
    expect(deliveries[1]).toEqual(deliveries[0]);
    expect(deliveries[3]).toEqual(deliveries[0]);
    expect(checkpointsDuringFailures).toEqual(['TRIM_HORIZON', 'TRIM_HORIZON', 'TRIM_HORIZON']);
    const errors = events.filter((event) => event.type === 'processing-error');
    expect(
      errors.map((event) => (event.type === 'processing-error' ? [event.attempt, event.action] : [])),
    ).toEqual([
      [1, 'retry'],
      [2, 'retry'],
      [3, 'retry'],
    ]);
    const lease = (await store.leases.list())[0];
    expect(lease?.checkpoint.isSentinel).toBe(false);
  });

  it('stops delivering, without a processing error, when a checkpoint finds the lease taken', async () => {
    await createStream(kinesis.client, 'taken-away', 1);
    await putRecords(kinesis.client, 'taken-away', data(10));
    const store = createMemoryLeaseStore({ applicationName: 'taken-away' });
    const events: KclEvent[] = [];
    let deliveries = 0;
    let lostCalls = 0;
    const consumer = createConsumer({
      streamName: 'taken-away',
      applicationName: 'taken-away',
      workerId: 'victim',
      kinesis: kinesis.newClient(),
      leaseStore: store,
      initialPosition: 'TRIM_HORIZON',
      ...FAST_TIMING,
      rebalanceIntervalMs: 60_000,
      onEvent: (event) => events.push(event),
      processor: () => ({
        async processRecords({ checkpointer }) {
          deliveries += 1;
          const [lease] = await store.leases.list();
          if (lease !== undefined) await store.leases.take(lease.leaseKey, lease.leaseCounter, 'thief');
          await checkpointer.checkpoint();
        },
        leaseLost() {
          lostCalls += 1;
        },
      }),
    });
    await consumer.start();
    await until(() => lostCalls === 1, 10_000, 'leaseLost');
    await consumer.stop();
    expect(deliveries).toBe(1);
    expect(events.filter((event) => event.type === 'processing-error')).toEqual([]);
    expect(events).toContainEqual(expect.objectContaining({ type: 'lease-lost', reason: 'taken-by-other' }));
    expect((await store.leases.list())[0]?.owner).toBe('thief');
  });

  it('skips a failing batch when onProcessingError says so', async () => {
    await createStream(kinesis.client, 'skips', 1);
    await putRecords(kinesis.client, 'skips', data(10));
    let calls = 0;
    const consumer = createConsumer({
      streamName: 'skips',
      applicationName: 'skips',
      kinesis: kinesis.newClient(),
      leaseStore: createMemoryLeaseStore({ applicationName: 'skips' }),
      initialPosition: 'TRIM_HORIZON',
      ...FAST_TIMING,
      onProcessingError: (_error, context) => (context.attempt >= 2 ? 'skip' : 'retry'),
      processor: () => ({
        processRecords() {
          calls += 1;
          throw new Error('poison');
        },
      }),
    });
    await consumer.start();
    await until(() => calls >= 2, 10_000, 'two attempts');
    await new Promise((resolve) => setTimeout(resolve, 300));
    await consumer.stop();
    expect(calls).toBe(2);
  });

  it('backs off on throttling and renews expired iterators, losing nothing', async () => {
    await createStream(kinesis.client, 'throttled', 1);
    await putRecords(kinesis.client, 'throttled', data(200, 't'));
    const client = kinesis.newClient();
    let getRecordsCalls = 0;
    client.middlewareStack.add(
      (next, context) => async (args) => {
        if (context.commandName === 'GetRecordsCommand') {
          getRecordsCalls += 1;
          if (getRecordsCalls <= 3) {
            throw new ProvisionedThroughputExceededException({
              message: 'Rate exceeded for shard',
              $metadata: { httpStatusCode: 400 },
            });
          }
          if (getRecordsCalls === 5) {
            throw new ExpiredIteratorException({
              message: 'Iterator expired',
              $metadata: { httpStatusCode: 400 },
            });
          }
        }
        return next(args);
      },
      { step: 'initialize', name: 'inject-kinesis-faults' },
    );
    const seen: string[] = [];
    const events: KclEvent[] = [];
    const consumer = createConsumer({
      streamName: 'throttled',
      applicationName: 'throttled',
      kinesis: client,
      leaseStore: createMemoryLeaseStore({ applicationName: 'throttled' }),
      initialPosition: 'TRIM_HORIZON',
      ...FAST_TIMING,
      maxRecords: 50,
      onEvent: (event) => events.push(event),
      processor: () => ({
        async processRecords({ records, checkpointer }) {
          seen.push(...records.map((record) => Buffer.from(record.data).toString()));
          await checkpointer.checkpoint();
        },
      }),
    });
    await consumer.start();
    await until(() => seen.length >= 200, 20_000, 'all records');
    await consumer.stop();
    client.destroy();
    expect(seen).toEqual(data(200, 't').map((record) => record.data));
    const throttled = events.filter((event) => event.type === 'throttled');
    expect(throttled).toHaveLength(3);
    const delays = throttled.map((event) => (event.type === 'throttled' ? event.backoffMs : 0));
    expect(delays[1]).toBeGreaterThanOrEqual(FAST_TIMING.kinesisRetry.initialMs);
    expect(events.filter((event) => event.type === 'iterator-expired')).toHaveLength(1);
  });

  it('refuses to start on a store whose application was migrated elsewhere', async () => {
    await createStream(kinesis.client, 'migrated', 1);
    const store = createMemoryLeaseStore({ applicationName: 'migrated' });
    await store.admin.setMigrationMarker({
      migratedTo: 'postgres table "kcl_leases"',
      migratedAt: new Date(),
    });
    const consumer = createConsumer({
      streamName: 'migrated',
      applicationName: 'migrated',
      kinesis: kinesis.newClient(),
      leaseStore: store,
      processor: () => ({ processRecords() {} }),
    });
    await expect(consumer.start()).rejects.toThrow(ApplicationMigratedError);
    await expect(consumer.start()).rejects.toThrow(/migrated to postgres table "kcl_leases"/);
    expect(consumer.status().state).toBe('failed');
  });

  it('stops a running worker when its application is migrated away', async () => {
    await createStream(kinesis.client, 'migrated-later', 1);
    const table = new MemoryLeaseTable();
    const store = createMemoryLeaseStore({ applicationName: 'later', table });
    const consumer = createConsumer({
      streamName: 'migrated-later',
      applicationName: 'later',
      kinesis: kinesis.newClient(),
      leaseStore: store,
      ...FAST_TIMING,
      shardSyncIntervalMs: 100,
      processor: () => ({ processRecords() {} }),
    });
    await consumer.start();
    await store.admin.setMigrationMarker({ migratedTo: 'dynamodb table "billing"', migratedAt: new Date() });
    await expect(consumer.stopped()).rejects.toThrow(ApplicationMigratedError);
    expect(consumer.status().state).toBe('failed');
    expect((await store.leases.list()).every((lease) => lease.owner === null)).toBe(true);
  });

  it('stops the worker with the ConfigurationError when processRecords calls checkpointer.transaction on a store that cannot run it, instead of retrying the batch forever', async () => {
    await createStream(kinesis.client, 'no-transactions', 1);
    await putRecords(kinesis.client, 'no-transactions', data(5));
    const store = createMemoryLeaseStore({ applicationName: 'no-transactions' });
    let calls = 0;
    const consumer = createConsumer({
      streamName: 'no-transactions',
      applicationName: 'no-transactions',
      kinesis: kinesis.newClient(),
      leaseStore: store,
      initialPosition: 'TRIM_HORIZON',
      ...FAST_TIMING,
      processingRetry: { initialMs: 10, maxMs: 10 },
      processor: (): RecordProcessor => ({
        async processRecords({ checkpointer }) {
          calls += 1;
          await checkpointer.transaction(async () => {});
        },
      }),
    });
    await consumer.start();
    const stopped = await consumer.stopped().then(
      () => null,
      (error: unknown) => error,
    );
    expect(stopped).toBeInstanceOf(ConfigurationError);
    expect(String(stopped)).toMatch(/cannot checkpoint in a transaction/);
    expect(consumer.status().state).toBe('failed');
    expect(calls).toBe(1);
  });
});

describe('configuration', () => {
  it('lists every problem in one error', () => {
    const store = createMemoryLeaseStore({ applicationName: 'other' });
    let error: unknown;
    try {
      createConsumer({
        applicationName: 'app',
        kinesis: kinesis.newClient(),
        leaseStore: store,
        leaseRenewIntervalMs: 10_000,
        leaseExpiryMs: 5_000,
        maxRecords: 20_000,
        initialPosition: 'EARLIEST' as never,
        processor: undefined as never,
      });
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(ConfigurationError);
    const problems = (error as ConfigurationError).problems.join('\n');
    expect(problems).toContain('streamName or streamArn is required');
    expect(problems).toContain('leaseStore is bound to application "other"');
    expect(problems).toContain('leaseExpiryMs (5000) must exceed leaseRenewIntervalMs (10000)');
    expect(problems).toContain('maxRecords must be an integer from 1 to 10000');
    expect(problems).toContain(
      "initialPosition \"EARLIEST\" must be 'TRIM_HORIZON', 'LATEST' or { timestamp: Date }",
    );
    expect(problems).toContain(
      'processor (a function (shardId, context) => RecordProcessor) or pipeline is required',
    );
    expect((error as ConfigurationError).problems).toHaveLength(6);
  });

  it('rejects both a stream name and an ARN, and a malformed ARN', () => {
    const leaseStore = createMemoryLeaseStore({ applicationName: 'app' });
    const base = {
      applicationName: 'app',
      kinesis: { region: 'us-east-1' },
      leaseStore,
      processor: () => ({ processRecords() {} }),
    };
    expect(() =>
      createConsumer({
        ...base,
        streamName: 'a',
        streamArn: 'arn:aws:kinesis:us-east-1:123456789012:stream/a',
      }),
    ).toThrow(/both set/);
    expect(() => createConsumer({ ...base, streamArn: 'orders' })).toThrow(/not a Kinesis stream ARN/);
    expect(
      createConsumer({ ...base, streamArn: 'arn:aws:kinesis:eu-west-1:123456789012:stream/orders' }).workerId,
    ).toMatch(/:/);
  });
});
