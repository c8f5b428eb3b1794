import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { recordData } from './support/child-output.js';
import {
  createTestDaemon,
  FAST_PROPERTIES,
  localAwsProperties,
  type TestDaemon,
} from './support/daemon-harness.js';
import { createStream, type LocalAws, putRecords, startLocalAws, until } from './support/local-aws.js';

// The daemon's own stop, above the worker's: a forced stop asked for while a graceful one runs takes
// over at once, and a graceful stop that outlasts shutdownGraceMillis is forced.

let aws: LocalAws;

beforeAll(async () => {
  aws = await startLocalAws();
});
afterAll(async () => {
  await aws?.stop();
});

async function runningDaemon(
  name: string,
  properties: Record<string, string>,
  environment: Record<string, string> = {},
): Promise<TestDaemon> {
  await createStream(aws.kinesis, name, 1);
  await putRecords(aws.kinesis, name, [{ partitionKey: 'k', data: `${name}-0` }]);
  const test = createTestDaemon({
    properties: {
      executableName: 'node test/fixtures/aws-kcl-processor.cjs',
      streamName: name,
      applicationName: `${name}-app`,
      initialPositionInStream: 'TRIM_HORIZON',
      ...localAwsProperties(aws),
      ...FAST_PROPERTIES,
      ...properties,
    },
    environment,
  });
  await test.daemon.start();
  await until(() => recordData(test.childEvents()).size === 1, 30_000, 'the record');
  return test;
}

const logged = (test: TestDaemon, text: string) => test.logs.some((line) => line.includes(text));

describe('stopping the daemon', () => {
  it('lets a forced stop take over a graceful one at once', async () => {
    // The child never answers shutdownRequested: the graceful stop would wait half the grace (30 s).
    const test = await runningDaemon(
      'forced-meanwhile',
      { shutdownGraceMillis: '60000' },
      { KCL_TEST_HANG_ON_SHUTDOWN: '1' },
    );
    const graceful = test.daemon.stop();
    await until(
      () => test.childEvents().some((event) => event.event === 'hang-on-shutdown'),
      10_000,
      'the child to hang in shutdownRequested',
    );
    const started = Date.now();
    await test.daemon.stop({ graceful: false });
    await graceful;
    await expect(test.daemon.stopped()).resolves.toBeUndefined();
    expect(Date.now() - started).toBeLessThan(10_000);
    expect(logged(test, 'forced stop: terminating every child')).toBe(true);
    expect(logged(test, 'took longer than shutdownGraceMillis')).toBe(false);
    expect(test.daemon.childCount).toBe(0);
  });

  it('forces every graceful stop with shutdownGraceMillis = 0, as the Java daemon does', async () => {
    const test = await runningDaemon('no-grace', { shutdownGraceMillis: '0' });
    await test.daemon.stop();
    await expect(test.daemon.stopped()).resolves.toBeUndefined();
    expect(logged(test, 'the graceful stop took longer than shutdownGraceMillis; forcing it')).toBe(true);
    expect(logged(test, 'forced stop: terminating every child')).toBe(true);
    expect(test.daemon.childCount).toBe(0);
  });

  it('refuses to start once stopped before it started, so nothing runs that no stop can end', async () => {
    const test = createTestDaemon({
      properties: {
        executableName: 'node test/fixtures/aws-kcl-processor.cjs',
        streamName: 'never-started',
        applicationName: 'never-started-app',
        ...localAwsProperties(aws),
      },
    });
    await test.daemon.stop();
    await expect(test.daemon.stopped()).resolves.toBeUndefined();
    await expect(test.daemon.start()).rejects.toMatchObject({ code: 'MULTILANG_DAEMON_STOPPED' });
    expect(test.daemon.status()).toBeNull();
  });
});
