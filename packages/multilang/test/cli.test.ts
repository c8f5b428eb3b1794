import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { once } from 'node:events';
import { copyFileSync, existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LOCAL_CREDENTIALS } from '@kcl/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readChildEvents, recordData } from './support/child-output.js';
import { FAST_PROPERTIES, FIXTURES, PACKAGE_DIR, propertiesText } from './support/daemon-harness.js';
import {
  createStream,
  type LocalAws,
  putRecords,
  scanTable,
  startLocalAws,
  until,
} from './support/local-aws.js';

// The commands as installed: package.json's bin, the wrappers that run the built CLIs.
const MULTILANG_BIN = join(PACKAGE_DIR, 'bin', 'kcl-multilang.js');
const BOOTSTRAP_BIN = join(PACKAGE_DIR, 'bin', 'kcl-bootstrap.js');

interface RunningCli {
  readonly process: ChildProcessWithoutNullStreams;
  readonly output: () => string;
  readonly exited: Promise<number | null>;
}

/** Starts a CLI as its own process group leader, as a shell would start it in a terminal. */
function startCli(
  bin: string,
  args: readonly string[],
  options: { cwd: string; env?: Record<string, string | undefined> },
): RunningCli {
  const child = spawn(process.execPath, [bin, ...args], {
    cwd: options.cwd,
    env: {
      ...process.env,
      AWS_ACCESS_KEY_ID: LOCAL_CREDENTIALS.accessKeyId,
      AWS_SECRET_ACCESS_KEY: LOCAL_CREDENTIALS.secretAccessKey,
      AWS_REGION: 'us-east-1',
      AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
      NODE_PATH: join(PACKAGE_DIR, 'node_modules'),
      ...options.env,
    },
    detached: true,
  });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => {
    output += chunk.toString('utf8');
  });
  child.stderr.on('data', (chunk: Buffer) => {
    output += chunk.toString('utf8');
  });
  const exited = once(child, 'exit').then(([code]) => code as number | null);
  return { process: child, output: () => output, exited };
}

/** A sample application directory: the processor and its properties file, the way aws-kcl users lay it out. */
function sampleApplication(properties: Record<string, string>): {
  directory: string;
  propertiesFile: string;
  outputFile: string;
} {
  const directory = mkdtempSync(join(tmpdir(), 'kcl-sample-'));
  copyFileSync(join(FIXTURES, 'aws-kcl-processor.cjs'), join(directory, 'sample_kcl_app.cjs'));
  const propertiesFile = join(directory, 'sample.properties');
  writeFileSync(propertiesFile, propertiesText({ executableName: 'node sample_kcl_app.cjs', ...properties }));
  return { directory, propertiesFile, outputFile: join(directory, 'events.jsonl') };
}

describe('kcl-multilang and kcl-bootstrap, the commands', () => {
  let aws: LocalAws;
  beforeAll(async () => {
    const built = join(PACKAGE_DIR, 'dist', 'cli', 'kcl-multilang.js');
    if (!existsSync(built)) throw new Error(`build the package first (tsc -b): ${built} is missing`);
    aws = await startLocalAws();
  });
  afterAll(async () => {
    await aws?.stop();
  });

  const awsProperties = (): Record<string, string> => ({
    regionName: aws.kinesisEmulator.region,
    kinesisEndpoint: aws.kinesisEmulator.endpoint,
    dynamoDBEndpoint: aws.dynamoEmulator.endpoint,
    AWSCredentialsProvider: 'DefaultAWSCredentialsProviderChain',
  });

  it('runs an aws-kcl application; Ctrl-C reaches only the daemon, which checkpoints, releases and exits 0', async () => {
    await createStream(aws.kinesis, 'cli-stream', 2);
    const written = Array.from({ length: 50 }, (_, index) => ({
      partitionKey: `k${index}`,
      data: `cli-${index}`,
    }));
    await putRecords(aws.kinesis, 'cli-stream', written);
    const app = sampleApplication({
      streamName: 'cli-stream',
      applicationName: 'cli-app',
      initialPositionInStream: 'TRIM_HORIZON',
      ...awsProperties(),
      ...FAST_PROPERTIES,
      streamNmae: 'typo',
      metricsLevel: 'NONE',
    });
    const cli = startCli(MULTILANG_BIN, ['--properties', app.propertiesFile], {
      cwd: app.directory,
      env: { KCL_TEST_OUTPUT: app.outputFile, KCL_TEST_MARKER: join(app.directory, 'marker') },
    });
    await until(
      () => recordData(readChildEvents(app.outputFile)).size === written.length,
      30_000,
      'every record',
    );
    // Ctrl-C in a terminal signals the whole foreground process group.
    process.kill(-(cli.process.pid as number), 'SIGINT');
    expect(await cli.exited).toBe(0);

    const events = readChildEvents(app.outputFile);
    expect(events.filter((event) => event.event === 'signal')).toEqual([]);
    for (const shardId of ['shardId-000000000000', 'shardId-000000000001']) {
      const mine = events.filter((event) => event.shardId === shardId).map((event) => event.event);
      expect(mine.slice(-2)).toEqual(['shutdownRequested', 'leaseLost']);
    }
    const items = await scanTable(aws.dynamo, 'cli-app');
    expect(items).toHaveLength(2);
    for (const item of items) {
      expect(item.leaseOwner).toBeUndefined();
      expect(item.checkpoint?.S).toMatch(/^\d+$/);
    }
    expect(cli.output()).toContain('unknown property streamNmae is ignored (did you mean streamName?');
    expect(cli.output()).toContain('SIGINT received: stopping gracefully');
  });

  it('kcl-bootstrap prints the command without -e, and runs the application with -e (ignoring -j and -c)', async () => {
    await createStream(aws.kinesis, 'bootstrap-stream', 1);
    await putRecords(aws.kinesis, 'bootstrap-stream', [{ partitionKey: 'a', data: 'bootstrap-1' }]);
    const app = sampleApplication({
      streamName: 'bootstrap-stream',
      applicationName: 'bootstrap-app',
      initialPositionInStream: 'TRIM_HORIZON',
      ...awsProperties(),
      ...FAST_PROPERTIES,
    });
    const env = { KCL_TEST_OUTPUT: app.outputFile, KCL_TEST_MARKER: join(app.directory, 'marker') };

    const dryRun = startCli(BOOTSTRAP_BIN, ['-p', app.propertiesFile], { cwd: app.directory, env });
    expect(await dryRun.exited).toBe(0);
    expect(dryRun.output()).toContain(`kcl-multilang --properties ${app.propertiesFile}`);

    // Started from another directory: the script next to the properties file is still found. And with
    // no AWS credentials at all: against emulators on this machine, placeholder credentials are used.
    const cli = startCli(
      BOOTSTRAP_BIN,
      ['-p', app.propertiesFile, '-e', '-j', '/usr/bin/java', '-c', '/tmp/jars'],
      {
        cwd: PACKAGE_DIR,
        env: {
          ...env,
          AWS_ACCESS_KEY_ID: undefined,
          AWS_SECRET_ACCESS_KEY: undefined,
          AWS_EC2_METADATA_DISABLED: 'true',
        },
      },
    );
    await until(() => recordData(readChildEvents(app.outputFile)).has('bootstrap-1'), 30_000, 'the record');
    // A pod's SIGTERM goes to the daemon alone.
    cli.process.kill('SIGTERM');
    expect(await cli.exited).toBe(0);
    expect(cli.output()).toContain('--java is ignored');
    expect(cli.output()).toContain('--jar-path is ignored');
    expect(cli.output()).toContain(
      'no AWS credentials found; using placeholder credentials for the local endpoint',
    );
    const events = readChildEvents(app.outputFile);
    expect(events.map((event) => event.event).slice(-2)).toEqual(['shutdownRequested', 'leaseLost']);
  });

  it('refuses a bad properties file at start, listing every problem, and exits 1', async () => {
    const app = sampleApplication({
      streamName: 'not a stream name',
      maxRecords: 'lots',
      initialPositionInStream: 'AT_TIMESTAMP',
      callProcessRecordsEvenForEmptyRecordList: 'maybe',
      AwsCredentialsProvider: 'StsAssumeRoleCredentialsProvider|arn:aws:iam::123456789012:role/x|session',
    });
    const cli = startCli(MULTILANG_BIN, [app.propertiesFile], { cwd: app.directory });
    expect(await cli.exited).toBe(1);
    const output = cli.output();
    expect(output).toContain('invalid configuration (6 problems)');
    for (const expected of [
      'applicationName is required',
      'streamName "not a stream name" is not a valid stream name',
      'maxRecords must be an integer',
      'initialPositionInStream = AT_TIMESTAMP is not accepted',
      'callProcessRecordsEvenForEmptyRecordList must be true or false',
      'StsAssumeRoleCredentialsProvider is not supported',
    ]) {
      expect(output).toContain(expected);
    }
  });

  it('exits 2 with the usage when no properties file is given, and 1 when it does not exist', async () => {
    const none = startCli(MULTILANG_BIN, [], { cwd: PACKAGE_DIR });
    expect(await none.exited).toBe(2);
    expect(none.output()).toContain('properties file missing');
    const missing = startCli(MULTILANG_BIN, ['-p', '/nonexistent/app.properties'], { cwd: PACKAGE_DIR });
    expect(await missing.exited).toBe(1);
    expect(missing.output()).toContain(
      'properties file /nonexistent/app.properties cannot be read: it does not exist',
    );
  });
});
