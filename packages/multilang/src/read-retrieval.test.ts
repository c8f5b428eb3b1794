import { resolveConsumerOptions } from '@kcl/consumer';
import { ConfigurationError } from '@kcl/core';
import { createMemoryLeaseStore, MemoryLeaseTable } from '@kcl/testkit';
import { describe, expect, it } from 'vitest';
import type { RetrievalConfiguration } from './multilang-configuration.js';
import { describeRetrieval, POLLING_KEYS, retrievalOptions } from './read-retrieval.js';
import { resolveMultiLangConfiguration } from './resolve-multilang-configuration.js';

const context = { environment: {}, workingDirectory: process.cwd(), checkExecutable: false };
const minimal = { executableName: 'node app.js', streamName: 'orders', applicationName: 'billing' };
const ARN = 'arn:aws:kinesis:eu-west-1:123456789012:stream/orders/consumer/billing-efo:1700000000';

function resolve(values: Record<string, string>) {
  return resolveMultiLangConfiguration({ ...minimal, ...values }, context);
}

function problemsOf(values: Record<string, string>): string[] {
  try {
    resolve(values);
  } catch (error) {
    if (ConfigurationError.is(error)) return [...error.problems];
    throw error;
  }
  return [];
}

/** The value a polling key is given in these tests (valid for each). */
const POLLING_VALUES: Record<string, string> = {
  maxRecords: '500',
  idleTimeBetweenReadsInMillis: '200',
  retryGetRecordsInSeconds: '3',
  maxGetRecordsThreadPool: '4',
  millisBehindLatestThresholdForReducedTps: '1000',
};

describe('retrievalMode, as the Java daemon decides it', () => {
  it('DEFAULT, or unset, with no polling key: enhanced fan-out as the application', () => {
    for (const values of [{}, { retrievalMode: 'DEFAULT' }, { retrievalMode: 'default' }]) {
      const { configuration, warnings } = resolve(values);
      expect(configuration.retrieval).toEqual({
        mode: 'fanout',
        retrievalMode: 'DEFAULT',
        pollingKeys: [],
        consumerName: 'billing',
        consumerArn: null,
      });
      expect(warnings).toEqual([]);
    }
  });

  it.each(POLLING_KEYS)('DEFAULT with %s set: polling', (key) => {
    const value = POLLING_VALUES[key] as string;
    for (const values of [{ [key]: value }, { [key]: value, retrievalMode: 'DEFAULT' }]) {
      expect(resolve(values).configuration.retrieval).toEqual({
        mode: 'polling',
        retrievalMode: 'DEFAULT',
        pollingKeys: [key],
      });
    }
  });

  it('an empty polling key counts as unset', () => {
    expect(resolve({ maxRecords: '' }).configuration.retrieval.mode).toBe('fanout');
  });

  it('POLLING: polling, with or without polling keys', () => {
    expect(resolve({ retrievalMode: 'POLLING' }).configuration.retrieval).toEqual({
      mode: 'polling',
      retrievalMode: 'POLLING',
      pollingKeys: [],
    });
    expect(resolve({ retrievalMode: 'polling', maxRecords: '100' }).configuration.retrieval).toMatchObject({
      mode: 'polling',
      pollingKeys: ['maxRecords'],
    });
  });

  it('FANOUT: fan-out even with polling keys, which then only serve GetRecords reads of a closed shard', () => {
    const { configuration, warnings } = resolve({
      retrievalMode: 'Fanout',
      maxRecords: '100',
      idleTimeBetweenReadsInMillis: '200',
      maxGetRecordsThreadPool: '2',
    });
    expect(configuration.retrieval).toEqual({
      mode: 'fanout',
      retrievalMode: 'FANOUT',
      pollingKeys: ['maxRecords', 'idleTimeBetweenReadsInMillis', 'maxGetRecordsThreadPool'],
      consumerName: 'billing',
      consumerArn: null,
    });
    expect(warnings).toContain(
      "retrievalMode = FANOUT: records are pushed by SubscribeToShard, so maxRecords and idleTimeBetweenReadsInMillis only apply where a closed shard's last records are read with GetRecords (on an emulator that never ends its subscription)",
    );
  });

  it('refuses another mode, naming the property', () => {
    expect(problemsOf({ retrievalMode: 'EFO' })).toEqual([
      'retrievalMode must be one of DEFAULT, POLLING, FANOUT, got "EFO"',
    ]);
  });
});

describe('fanoutConfig', () => {
  it('registers fanoutConfig.consumerName instead of the application name', () => {
    expect(
      resolve({ retrievalMode: 'FANOUT', 'fanoutConfig.consumerName': 'billing-efo' }).configuration
        .retrieval,
    ).toMatchObject({ mode: 'fanout', consumerName: 'billing-efo', consumerArn: null });
  });

  it('uses fanoutConfig.consumerArn as given, and says that the name is then not registered', () => {
    const { configuration, notices } = resolve({
      'fanoutConfig.consumerArn': ARN,
      'fanoutConfig.consumerName': 'other',
    });
    expect(configuration.retrieval).toMatchObject({ mode: 'fanout', consumerArn: ARN });
    expect(notices).toContain(
      'fanoutConfig.consumerArn is set: that consumer is used as given, and fanoutConfig.consumerName is not registered',
    );
    // With streamArn too: the consumer must belong to that stream.
    expect(
      problemsOf({
        streamArn: 'arn:aws:kinesis:eu-west-1:123456789012:stream/orders',
        'fanoutConfig.consumerArn': ARN,
      }),
    ).toEqual([]);
  });

  it('refuses a bad consumer name or ARN, naming the property', () => {
    expect(problemsOf({ 'fanoutConfig.consumerName': 'billing consumer' })).toEqual([
      'fanoutConfig.consumerName "billing consumer" is not a stream consumer name (1–128 of A–Z a–z 0–9 _ . -)',
    ]);
    expect(problemsOf({ 'fanoutConfig.consumerName': 'x'.repeat(129) })).toHaveLength(1);
    expect(
      problemsOf({ 'fanoutConfig.consumerArn': 'arn:aws:kinesis:eu-west-1:123456789012:stream/orders' }),
    ).toEqual([
      'fanoutConfig.consumerArn "arn:aws:kinesis:eu-west-1:123456789012:stream/orders" is not a stream consumer ARN (arn:aws:kinesis:<region>:<account>:stream/<stream>/consumer/<name>:<timestamp>)',
    ]);
    expect(problemsOf({ streamName: 'payments', 'fanoutConfig.consumerArn': ARN })).toEqual([
      'fanoutConfig.consumerArn is a consumer of stream orders, not of payments: give a consumer of the stream being read',
    ]);
    expect(
      problemsOf({
        streamArn: 'arn:aws:kinesis:eu-west-1:123456789012:stream/payments',
        'fanoutConfig.consumerArn': ARN,
      }),
    ).toHaveLength(1);
  });

  it('asks for fanoutConfig.consumerName when the application name cannot be a consumer name', () => {
    const application = { applicationName: 'b'.repeat(129), tableName: 'billing' };
    expect(problemsOf(application)).toEqual([
      `fanoutConfig.consumerName is needed for enhanced fan-out: applicationName "${'b'.repeat(129)}" is not a stream consumer name (1–128 of A–Z a–z 0–9 _ . -); or set retrievalMode = POLLING`,
    ]);
    expect(problemsOf({ ...application, 'fanoutConfig.consumerName': 'billing' })).toEqual([]);
    expect(problemsOf({ ...application, 'fanoutConfig.consumerArn': ARN })).toEqual([]);
    expect(problemsOf({ ...application, retrievalMode: 'POLLING' })).toEqual([]);
  });

  it('warns that the fan-out keys have no effect when polling, and names the retry keys as accepted', () => {
    const { warnings } = resolve({
      retrievalMode: 'POLLING',
      'fanoutConfig.consumerName': 'billing-efo',
      'fanoutConfig.retryBackoffMillis': '500',
      'fanoutConfig.consumerNmae': 'typo',
    });
    expect(warnings).toEqual([
      'property fanoutConfig.retryBackoffMillis has no effect in kcl-multilang: the stream consumer is registered and waited for with backoff (0.5 s growing to 5 s, with jitter) until it is ACTIVE, for up to 5 minutes',
      'unknown property fanoutConfig.consumerNmae is ignored (did you mean fanoutConfig.consumerName? keys are case-sensitive)',
      'property fanoutConfig.consumerName has no effect: records are read by polling (retrievalMode = POLLING)',
    ]);
    expect(resolve({ maxRecords: '10', 'fanoutConfig.consumerArn': ARN }).warnings).toEqual([
      'property fanoutConfig.consumerArn has no effect: records are read by polling (retrievalMode is DEFAULT and maxRecords is set)',
    ]);
  });

  it('gives the consumer options it accepts', () => {
    const options = (retrieval: RetrievalConfiguration) =>
      resolveConsumerOptions({
        streamName: 'orders',
        applicationName: 'billing',
        kinesis: { region: 'eu-west-1' },
        leaseStore: createMemoryLeaseStore({ applicationName: 'billing', table: new MemoryLeaseTable() }),
        processor: () => ({ processRecords: async () => {} }),
        retrieval: retrievalOptions(retrieval),
      }).retrieval;
    expect(
      options(resolve({ 'fanoutConfig.consumerName': `a-${'x'.repeat(126)}` }).configuration.retrieval),
    ).toMatchObject({
      mode: 'fanout',
      consumerName: `a-${'x'.repeat(126)}`,
      consumerArn: null,
    });
    expect(options(resolve({ 'fanoutConfig.consumerArn': ARN }).configuration.retrieval)).toMatchObject({
      mode: 'fanout',
      consumerName: 'billing',
      consumerArn: ARN,
    });
    expect(options(resolve({ retrievalMode: 'POLLING' }).configuration.retrieval)).toEqual({
      mode: 'polling',
    });
  });
});

describe('describeRetrieval', () => {
  const rule =
    'With retrievalMode DEFAULT (also when it is not set) records are read by enhanced fan-out unless a polling key (maxRecords, idleTimeBetweenReadsInMillis, retryGetRecordsInSeconds, maxGetRecordsThreadPool, millisBehindLatestThresholdForReducedTps) is set, as in the Java daemon';

  it('says which mode was chosen and why, with the DEFAULT rule, in one line', () => {
    const cases: [Record<string, string>, string, boolean][] = [
      [
        {},
        `records are read by enhanced fan-out (SubscribeToShard) with stream consumer billing: retrievalMode is DEFAULT and no polling key is set; set retrievalMode = POLLING to poll instead. ${rule}`,
        false,
      ],
      [
        { retrievalMode: 'FANOUT', 'fanoutConfig.consumerArn': ARN },
        `records are read by enhanced fan-out (SubscribeToShard) with stream consumer ${ARN}: retrievalMode = FANOUT. ${rule}`,
        false,
      ],
      [
        { retrievalMode: 'POLLING' },
        `records are read by polling (GetRecords): retrievalMode = POLLING. ${rule}`,
        false,
      ],
      // Java warns here too: the file may mean fan-out and get polling.
      [
        { maxRecords: '100', idleTimeBetweenReadsInMillis: '200', maxGetRecordsThreadPool: '2' },
        `records are read by polling (GetRecords): retrievalMode is DEFAULT and maxRecords, idleTimeBetweenReadsInMillis and maxGetRecordsThreadPool are set; set retrievalMode = FANOUT for fan-out. ${rule}`,
        true,
      ],
    ];
    for (const [values, message, warn] of cases) {
      const described = describeRetrieval(resolve(values).configuration.retrieval);
      expect(described).toEqual({ message, warn });
      expect(described.message).not.toContain('\n');
    }
  });
});
