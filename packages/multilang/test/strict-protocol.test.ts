import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readChildEvents } from './support/child-output.js';
import { createTestDaemon, FAST_PROPERTIES, FIXTURES, localAwsProperties } from './support/daemon-harness.js';
import { aggregate } from './support/kpl-aggregate.js';
import {
  createStream,
  type LocalAws,
  putRecords,
  scanTable,
  splitShard,
  startLocalAws,
  until,
} from './support/local-aws.js';

const STRICT_CHILD = join(FIXTURES, 'strict_child.py');

/** Feeds lines to the strict child directly (no daemon) and reports how it ended. */
async function runStrictChild(lines: readonly string[]) {
  const outputFile = join(mkdtempSync(join(tmpdir(), 'kcl-strict-')), 'events.jsonl');
  const child = spawn('python3', [STRICT_CHILD], { env: { ...process.env, KCL_TEST_OUTPUT: outputFile } });
  let stdout = '';
  child.stdout.on('data', (chunk: Buffer) => {
    stdout += chunk.toString('utf8');
  });
  child.stdin.on('error', () => undefined);
  child.stdin.end(lines.map((line) => `${line}\n`).join(''));
  const [status] = (await once(child, 'exit')) as [number | null];
  const violations = readChildEvents(outputFile).filter((event) => event.event === 'violation');
  return { status, violation: (violations[0]?.detail as string | undefined) ?? null, stdout };
}

const INITIALIZE =
  '{"action":"initialize","shardId":"shardId-000000000000","sequenceNumber":"TRIM_HORIZON","subSequenceNumber":0}';
const RECORD =
  '{"action":"record","data":"aGk=","partitionKey":"k","sequenceNumber":"1","approximateArrivalTimestamp":1700000000000,"subSequenceNumber":0}';
const PROCESS = `{"action":"processRecords","records":[${RECORD}],"millisBehindLatest":0}`;
const REPLY = '{"action":"checkpoint","sequenceNumber":"1","subSequenceNumber":0,"error":null}';
const LEASE_LOST = '{"action":"leaseLost"}';

describe.concurrent('the strict protocol checker (amazon_kclpy rules)', () => {
  it('accepts a conversation the Java daemon would have', async () => {
    const result = await runStrictChild([INITIALIZE, PROCESS, REPLY, LEASE_LOST]);
    expect(result.violation).toBeNull();
    expect(result.status).toBe(0);
    expect(result.stdout).toContain('{"action": "status", "responseFor": "processRecords"}');
  });

  it.each([
    [
      'a record without "action"',
      [INITIALIZE, PROCESS.replace('{"action":"record",', '{'), REPLY, LEASE_LOST],
      'without a known action',
    ],
    [
      'a null approximateArrivalTimestamp',
      [INITIALIZE, PROCESS.replace('1700000000000', 'null'), REPLY, LEASE_LOST],
      'int()',
    ],
    [
      'initialize without subSequenceNumber',
      [INITIALIZE.replace(',"subSequenceNumber":0', ''), LEASE_LOST],
      "'subSequenceNumber'",
    ],
    [
      'processRecords without millisBehindLatest',
      [INITIALIZE, PROCESS.replace(',"millisBehindLatest":0', ''), LEASE_LOST],
      "'millisBehindLatest'",
    ],
    ['a blank line', [INITIALIZE, '', LEASE_LOST], 'blank line'],
    [
      'a checkpoint reply without the null subSequenceNumber',
      [INITIALIZE, PROCESS, REPLY.replace('"subSequenceNumber":0,', ''), LEASE_LOST],
      "'subSequenceNumber'",
    ],
    [
      'a checkpoint reply that does not echo',
      [INITIALIZE, PROCESS, REPLY.replace('"1"', '"2"'), LEASE_LOST],
      'echo',
    ],
    [
      'another message where the checkpoint reply belongs',
      [INITIALIZE, PROCESS, LEASE_LOST],
      'not the checkpoint reply',
    ],
    ['an action after leaseLost', [INITIALIZE, LEASE_LOST, PROCESS], 'after the conversation ended'],
    ['processRecords before initialize', [PROCESS], 'not initialize'],
    [
      'data that is not base64',
      [INITIALIZE, PROCESS.replace('aGk=', 'not base64!'), REPLY, LEASE_LOST],
      'base64',
    ],
  ])('fails on %s', async (_name, lines, detail) => {
    const result = await runStrictChild(lines);
    expect(result.status).toBe(2);
    expect(result.violation).toContain(detail);
  });
});

describe('kcl-multilang against the strict child', () => {
  let aws: LocalAws;
  beforeAll(async () => {
    aws = await startLocalAws();
  });
  afterAll(async () => {
    await aws?.stop();
  });

  it('speaks the protocol exactly: nulls, record actions, KPL sub-sequence numbers, checkpoint replies, shard end, shutdown', async () => {
    await createStream(aws.kinesis, 'strict', 1);
    const plain = Array.from({ length: 10 }, (_, index) => ({
      partitionKey: `p${index}`,
      data: `plain-${index}`,
    }));
    const binary = {
      partitionKey: 'binary',
      data: new Uint8Array([0, 255, 10, 13, 34, 92, 0xe2, 0x82, 0xac]),
    };
    const users = Array.from({ length: 5 }, (_, index) => ({
      partitionKey: `u${index}`,
      data: Buffer.from(`user-${index}`),
    }));
    await putRecords(aws.kinesis, 'strict', [
      ...plain,
      binary,
      { partitionKey: 'aggregate', data: aggregate(users) },
    ]);

    const test = createTestDaemon({
      properties: {
        executableName: `python3 ${STRICT_CHILD}`,
        streamName: 'strict',
        applicationName: 'strict-app',
        initialPositionInStream: 'TRIM_HORIZON',
        processingLanguage: 'python/3',
        ...localAwsProperties(aws),
        ...FAST_PROPERTIES,
      },
      environment: { STRICT_PROBE_INITIALIZE_CHECKPOINT: '1', STRICT_STRAY_OUTPUT: '1' },
    });
    const seen = () => test.childEvents().filter((event) => event.event === 'record');
    await test.daemon.start();
    await until(() => seen().length === plain.length + 1 + users.length, 30_000, 'every user record');

    let events = test.childEvents();
    expect(events.filter((event) => event.event === 'violation')).toEqual([]);
    // The KPL aggregate arrives de-aggregated: one sequence number, sub-sequence numbers 0…4.
    const userRecords = seen().filter((event) => event.data?.startsWith('user-'));
    expect(userRecords.map((event) => event.data)).toEqual(users.map((user) => user.data.toString()));
    expect(userRecords.map((event) => event.subSequenceNumber)).toEqual([0, 1, 2, 3, 4]);
    expect(new Set(userRecords.map((event) => event.sequenceNumber)).size).toBe(1);
    expect(userRecords.map((event) => event.partitionKey)).toEqual(users.map((user) => user.partitionKey));
    expect(seen().find((event) => event.partitionKey === 'binary')?.bytes).toBe(binary.data.length);
    // A checkpoint during initialize has no checkpointer: InvalidStateException, as the Java daemon answers.
    expect(events.find((event) => event.event === 'checkpoint')?.error).toBe('InvalidStateException');
    expect(test.logs.some((line) => line.includes('skipping unexpected line on the child stdout'))).toBe(
      true,
    );

    // The checkpoint (sequence and sub-sequence number) is stored in the Java table's attributes.
    await until(
      async () => (await scanTable(aws.dynamo, 'strict-app'))[0]?.checkpointSubSequenceNumber?.N === '4',
      10_000,
      'the checkpoint of the last sub-record',
    );
    const [item] = await scanTable(aws.dynamo, 'strict-app');
    expect(item?.checkpoint?.S).toBe(userRecords[4]?.sequenceNumber);

    // Shard end: the child checkpoints with a null sequence number and gets EOF; the children follow.
    await splitShard(aws.kinesis, 'strict', 'shardId-000000000000');
    const after = Array.from({ length: 10 }, (_, index) => ({
      partitionKey: `after-${index}`,
      data: `after-${index}`,
    }));
    await putRecords(aws.kinesis, 'strict', after);
    await until(
      () => seen().length === plain.length + 1 + users.length + after.length,
      30_000,
      'the records after the split',
    );
    await test.daemon.stop();
    await test.daemon.stopped();

    events = test.childEvents();
    expect(events.filter((event) => event.event === 'violation')).toEqual([]);
    const parent = events
      .filter((event) => event.shardId === 'shardId-000000000000')
      .map((event) => event.event);
    expect(parent.slice(-3)).toEqual(['checkpoint', 'shardEnded', 'eof']);
    const children = [...new Set(events.map((event) => event.shardId))].filter(
      (shardId) => shardId !== 'shardId-000000000000',
    );
    expect(children).toHaveLength(2);
    for (const child of children) {
      const mine = events.filter((event) => event.shardId === child).map((event) => event.event);
      expect(mine.slice(-4)).toEqual(['checkpoint', 'shutdownRequested', 'leaseLost', 'eof']);
    }
    const stored = await scanTable(aws.dynamo, 'strict-app');
    const parentItem = stored.find((candidate) => candidate.leaseKey?.S === 'shardId-000000000000');
    if (parentItem !== undefined) expect(parentItem.checkpoint?.S).toBe('SHARD_END');
  });
});
