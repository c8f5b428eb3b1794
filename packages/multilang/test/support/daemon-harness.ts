import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createLineLogger, type KclEvent, type Logger } from '@kcl/core';
import { LOCAL_CREDENTIALS } from '@kcl/testkit';
import { onTestFailed } from 'vitest';
import {
  createMultiLangDaemon,
  type MultiLangDaemon,
  type MultiLangDaemonOptions,
  parseProperties,
  type ResolvedMultiLangConfiguration,
  resolveMultiLangConfiguration,
} from '../../src/index.js';
import { type ChildEvent, readChildEvents } from './child-output.js';
import type { LocalAws } from './local-aws.js';

export const FIXTURES = join(dirname(fileURLToPath(import.meta.url)), '..', 'fixtures');
export const PACKAGE_DIR = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

/**
 * Timings that keep a test run short: leases renew every ~670 ms and expire after 2 s. Records are
 * polled every 50 ms, said explicitly: `retrievalMode` DEFAULT would poll too (a polling key is set),
 * but these suites are about the protocol and the leases, where kinesis-local's fan-out would only
 * add its waits (about 1 s per event, a few seconds before a moved lease's shard can be subscribed
 * again). test/fanout.test.ts reads with fan-out.
 */
export const FAST_PROPERTIES: Readonly<Record<string, string>> = {
  retrievalMode: 'POLLING',
  failoverTimeMillis: '2000',
  idleTimeBetweenReadsInMillis: '50',
  parentShardPollIntervalMillis: '100',
  shardSyncIntervalMillis: '1000',
  shutdownGraceMillis: '10000',
  taskBackoffTimeMillis: '100',
  'kcl.childRestartMaxBackoffMillis': '1000',
  'kcl.childExitTimeoutMillis': '2000',
  'kcl.childKillTimeoutMillis': '1000',
};

/** A properties file's text, written the way users write them (comments, `key = value`). */
export function propertiesText(values: Readonly<Record<string, string>>): string {
  return [
    '# The properties file of a test application',
    ...Object.entries(values).map(([key, value]) => `${key} = ${value}`),
    '',
  ].join('\n');
}

export function localAwsProperties(aws: LocalAws): Record<string, string> {
  return {
    regionName: aws.kinesisEmulator.region,
    kinesisEndpoint: aws.kinesisEmulator.endpoint,
    dynamoDBEndpoint: aws.dynamoEmulator.endpoint,
    AwsCredentialsProvider: 'EnvironmentVariableCredentialsProvider',
  };
}

export interface TestDaemon {
  readonly daemon: MultiLangDaemon;
  readonly resolved: ResolvedMultiLangConfiguration;
  /** Where the children write their events. */
  readonly outputFile: string;
  readonly directory: string;
  readonly logs: string[];
  readonly events: KclEvent[];
  childEvents(): ChildEvent[];
}

export interface TestDaemonOptions {
  readonly properties: Readonly<Record<string, string>>;
  /** Extra environment for the children (test knobs). */
  readonly environment?: Readonly<Record<string, string>>;
  readonly daemonOptions?: Partial<MultiLangDaemonOptions>;
}

/** Builds a daemon from a properties text, as the CLI does, with children that log to a temp file. */
export function createTestDaemon(options: TestDaemonOptions): TestDaemon {
  const directory = mkdtempSync(join(tmpdir(), 'kcl-multilang-'));
  const outputFile = join(directory, 'events.jsonl');
  const environment = {
    ...process.env,
    AWS_ACCESS_KEY_ID: LOCAL_CREDENTIALS.accessKeyId,
    AWS_SECRET_ACCESS_KEY: LOCAL_CREDENTIALS.secretAccessKey,
    KCL_TEST_OUTPUT: outputFile,
    KCL_TEST_MARKER: join(directory, 'marker'),
    ...options.environment,
  };
  const resolved = resolveMultiLangConfiguration(parseProperties(propertiesText(options.properties)), {
    environment,
    workingDirectory: PACKAGE_DIR,
  });
  const logs: string[] = [];
  const logger: Logger = createLineLogger({
    level: 'debug',
    write: (line) => {
      logs.push(line);
      if (process.env.KCL_TEST_LOG === '1') process.stderr.write(`${line}\n`);
    },
  });
  const events: KclEvent[] = [];
  onTestFailed(() => {
    process.stderr.write(
      `\n--- daemon log ---\n${logs.join('\n')}\n--- child events ---\n${readChildEvents(outputFile)
        .map((event) => JSON.stringify(event))
        .join('\n')}\n`,
    );
  });
  const daemon = createMultiLangDaemon({
    configuration: resolved.configuration,
    environment,
    workingDirectory: PACKAGE_DIR,
    logger,
    onEvent: (event) => events.push(event),
    ...options.daemonOptions,
  });
  return {
    daemon,
    resolved,
    outputFile,
    directory,
    logs,
    events,
    childEvents: () => readChildEvents(outputFile),
  };
}
