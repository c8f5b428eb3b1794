import { KinesisClient } from '@aws-sdk/client-kinesis';
import { ConfigurationError } from '@kcl/core';
import { createMemoryLeaseStore, MemoryLeaseTable } from '@kcl/testkit';
import { describe, expect, it } from 'vitest';
import { isKinesisClient, resolveConsumerOptions } from './consumer-options.js';
import { createConsumer } from './create-consumer.js';

describe('the kinesis option', () => {
  it('tells a client from settings by its send method, so a client of another SDK copy is used as given', async () => {
    expect(isKinesisClient(new KinesisClient({ region: 'eu-west-1' }))).toBe(true);
    expect(isKinesisClient({ region: 'eu-west-1', endpoint: 'http://localhost:4567' })).toBe(false);

    // A client whose class is not this package's KinesisClient: what an application's own copy of
    // @aws-sdk/client-kinesis hands over. It answers nothing; what matters is that it is called.
    const sent: string[] = [];
    const otherCopy = {
      config: {},
      send: async (command: object): Promise<never> => {
        sent.push(command.constructor.name);
        throw Object.assign(new Error('no stream here'), { name: 'ResourceNotFoundException' });
      },
      destroy: () => {},
    } as unknown as KinesisClient;
    const consumer = createConsumer({
      streamName: 'orders',
      applicationName: 'app',
      kinesis: otherCopy,
      leaseStore: createMemoryLeaseStore({ applicationName: 'app', table: new MemoryLeaseTable() }),
      processor: () => ({ processRecords: async () => {} }),
    });
    await consumer.start().catch(() => undefined);
    await consumer.stop();
    expect(sent.length).toBeGreaterThan(0);
    expect(sent.every((name) => name.endsWith('Command'))).toBe(true);
  });
});

describe('the hand-off options', () => {
  const base = {
    streamName: 'orders',
    applicationName: 'app',
    kinesis: { region: 'eu-west-1' },
    leaseStore: createMemoryLeaseStore({ applicationName: 'app', table: new MemoryLeaseTable() }),
    processor: () => ({ processRecords: async () => {} }),
  };

  it('default to hand-offs timing out at half the lease expiry, checked four times meanwhile', () => {
    expect(resolveConsumerOptions(base)).toMatchObject({
      handoff: true,
      handoffTimeoutMs: 22_500,
      handoffPollIntervalMs: 500,
    });
    expect(resolveConsumerOptions({ ...base, leaseRenewIntervalMs: 200, leaseExpiryMs: 700 })).toMatchObject({
      handoffTimeoutMs: 350,
      handoffPollIntervalMs: 87,
    });
  });

  it('refuse a timeout at or past the lease expiry, a check no more often than the timeout, and a non-boolean switch', () => {
    let error: unknown;
    try {
      resolveConsumerOptions({
        ...base,
        leaseRenewIntervalMs: 1_000,
        leaseExpiryMs: 3_000,
        handoffTimeoutMs: 3_000,
        handoffPollIntervalMs: 3_000,
        handoff: 'yes' as never,
      });
    } catch (caught) {
      error = caught;
    }
    expect(ConfigurationError.is(error)).toBe(true);
    const problems = (error as ConfigurationError).problems;
    expect(problems).toHaveLength(3);
    expect(problems.join('\n')).toContain('handoffTimeoutMs (3000) must be below leaseExpiryMs (3000)');
    expect(problems.join('\n')).toContain(
      'handoffPollIntervalMs (3000) must be below handoffTimeoutMs (3000)',
    );
    expect(problems.join('\n')).toContain('handoff');
  });
});

describe('unknown options', () => {
  const base = {
    streamName: 'orders',
    applicationName: 'app',
    kinesis: { region: 'eu-west-1' },
    leaseStore: createMemoryLeaseStore({ applicationName: 'app' }),
    processor: () => ({ processRecords: async () => {} }),
  };

  function problemsOf(options: object): readonly string[] {
    try {
      createConsumer(options as never);
    } catch (error) {
      if (ConfigurationError.is(error)) return error.problems;
      throw error;
    }
    throw new Error('expected a ConfigurationError');
  }

  it('names a misspelt option, suggests the closest one, and reports it with the other problems', () => {
    const problems = problemsOf({
      ...base,
      leaseRenewalIntervalMs: 1_000,
      maxrecords: 100,
      leaseExpiryMs: 0,
      retrieval: { mode: 'fanout', consumerNmae: 'billing' },
      streams: undefined,
    });
    expect(problems).toEqual([
      'leaseRenewalIntervalMs is not an option: did you mean `leaseRenewIntervalMs`?',
      'maxrecords is not an option: did you mean `maxRecords`?',
      'leaseExpiryMs must be an integer from 1 to ∞, got 0',
      'retrieval.consumerNmae is not an option: did you mean `consumerName`?',
    ]);
  });

  it('lists the known options when nothing is close', () => {
    const [problem] = problemsOf({ ...base, tableName: 'leases' });
    expect(problem).toMatch(/^tableName is not an option \(known: streamName, streamArn, .*, random\)$/);
  });

  it('accepts every documented option', () => {
    expect(() =>
      resolveConsumerOptions({
        ...base,
        workerId: 'w1',
        initialPosition: 'TRIM_HORIZON',
        leaseRenewIntervalMs: 1_000,
        leaseExpiryMs: 1_500,
        rebalanceIntervalMs: 1_000,
        maxLeasesToSteal: 2,
        maxLeasesForWorker: 10,
        handoff: false,
        handoffTimeoutMs: 500,
        handoffPollIntervalMs: 100,
        pollIntervalMs: 100,
        maxRecords: 100,
        sessionLiveness: false,
        livenessCheckIntervalMs: 500,
        parentPollIntervalMs: 500,
        shardSyncIntervalMs: 500,
        leaseCleanupIntervalMs: 500,
        shutdownTimeoutMs: 500,
        storeCallTimeoutMs: 500,
        kinesisCallTimeoutMs: 500,
        callProcessRecordsEvenForEmptyRecordList: true,
        retrieval: { mode: 'polling' },
        processingRetry: { initialMs: 10, maxMs: 100 },
        kinesisRetry: { initialMs: 10, maxMs: 100 },
        onProcessingError: () => 'retry',
        onEvent: () => {},
        metricsLevel: 'SUMMARY',
        signal: new AbortController().signal,
      }),
    ).not.toThrow();
  });
});

describe('the exactlyOnce option', () => {
  const base = {
    streamName: 'orders',
    applicationName: 'app',
    kinesis: { region: 'eu-west-1' },
    processor: () => ({ processRecords: async () => {} }),
  };

  it('is refused by createConsumer on a store that cannot checkpoint in a transaction, naming the option and the store', () => {
    const leaseStore = createMemoryLeaseStore({ applicationName: 'app', table: new MemoryLeaseTable() });
    let error: unknown;
    try {
      createConsumer({ ...base, leaseStore, exactlyOnce: true });
    } catch (caught) {
      error = caught;
    }
    expect(ConfigurationError.is(error)).toBe(true);
    const problems = (error as ConfigurationError).problems;
    expect(problems).toHaveLength(1);
    expect(problems[0]).toContain('exactlyOnce');
    expect(problems[0]).toContain(leaseStore.description);
    expect(problems[0]).toContain('capabilities.transactionalCheckpoint');
  });

  it('is accepted on a store that declares transactional checkpoints, and defaults to false', () => {
    const leaseStore = createMemoryLeaseStore({
      applicationName: 'app',
      table: new MemoryLeaseTable(),
      transactions: true,
    });
    expect(resolveConsumerOptions({ ...base, leaseStore, exactlyOnce: true }).exactlyOnce).toBe(true);
    expect(resolveConsumerOptions({ ...base, leaseStore }).exactlyOnce).toBe(false);
  });

  it('refuses a pipeline whose batches may commit out of shard order, or that has no handleBatch', () => {
    const leaseStore = createMemoryLeaseStore({
      applicationName: 'app',
      table: new MemoryLeaseTable(),
      transactions: true,
    });
    const { processor: _, ...withoutProcessor } = base;
    let error: unknown;
    try {
      resolveConsumerOptions({
        ...withoutProcessor,
        leaseStore,
        exactlyOnce: true,
        pipeline: {
          handleMessage: () => {},
          processors: { concurrency: 4 },
          batchers: { concurrency: 2 },
        },
      });
    } catch (caught) {
      error = caught;
    }
    expect(ConfigurationError.is(error)).toBe(true);
    const problems = (error as ConfigurationError).problems;
    // The fourth: batchers without handleBatch, reported by the pipeline's own check.
    expect(problems).toHaveLength(4);
    expect(problems.join('\n')).toContain('exactlyOnce with pipeline needs pipeline.handleBatch');
    expect(problems.join('\n')).toContain('pipeline.batchers.concurrency 1 (got 2)');
    expect(problems.join('\n')).toContain('pipeline.processors.concurrency 1 with handleMessage (got 4)');
    expect(
      resolveConsumerOptions({
        ...withoutProcessor,
        leaseStore,
        exactlyOnce: true,
        pipeline: { handleBatch: (_messages, batch) => batch.transaction(() => {}) },
      }).exactlyOnce,
    ).toBe(true);
  });
});
