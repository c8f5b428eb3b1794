import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Checkpointer, KinesisRecord } from '@kcl/consumer';
import { ExtendedSequenceNumber, noopLogger, systemClock } from '@kcl/core';
import { describe, expect, it } from 'vitest';
import { nodeChild } from '../test/support/inline-child.js';
import type { ChildSession } from './child-session.js';
import type { MultiLangChildError } from './multilang-errors.js';
import { MultiLangShardProcessor } from './multilang-record-processor.js';

const SHARD = 'shardId-000000000003';

/**
 * A child that writes every action it gets to $OUT, checkpoints at a record whose data is "cp",
 * and dies on a record "crash" the first time it sees one.
 */
const CHILD = nodeChild(`
  const fs = require('fs');
  const log = (entry) => fs.appendFileSync(process.env.OUT, JSON.stringify({ pid: process.pid, ...entry }) + '\\n');
  for (;;) {
    const line = await next();
    if (line === null) { log({ action: 'eof' }); process.exit(0); }
    const message = JSON.parse(line);
    if (message.action === 'processRecords') {
      if (message.records.length === 0) log({ action: 'emptyBatch', millisBehindLatest: message.millisBehindLatest });
      for (const record of message.records) {
        const data = Buffer.from(record.data, 'base64').toString();
        if (data === 'crash' && !fs.existsSync(process.env.MARKER)) { fs.writeFileSync(process.env.MARKER, ''); process.exit(5); }
        log({ action: 'record', data, sequenceNumber: record.sequenceNumber });
        if (data === 'cp') { send({ action: 'checkpoint', sequenceNumber: record.sequenceNumber }); await next(); }
      }
    } else if (message.action === 'shardEnded') {
      send({ action: 'checkpoint', sequenceNumber: null }); await next();
      log({ action: 'shardEnded' });
    } else {
      log({ action: message.action, sequenceNumber: message.sequenceNumber });
    }
    send({ action: 'status', responseFor: message.action });
  }
`);

const record = (sequenceNumber: string, data: string): KinesisRecord => ({
  sequenceNumber,
  subSequenceNumber: 0,
  partitionKey: 'k',
  explicitHashKey: null,
  data: new Uint8Array(Buffer.from(data)),
  approximateArrivalTimestamp: new Date(0),
  encryptionType: null,
  aggregated: false,
});

/** A checkpointer that keeps the last checkpoint in memory, as the consumer's does (without a store). */
class MemoryCheckpointer implements Checkpointer {
  lastCheckpoint = ExtendedSequenceNumber.TRIM_HORIZON;
  largestPermitted = ExtendedSequenceNumber.TRIM_HORIZON;
  async checkpoint(sequenceNumber?: string, subSequenceNumber?: number): Promise<void> {
    this.lastCheckpoint =
      sequenceNumber === undefined
        ? this.largestPermitted
        : ExtendedSequenceNumber.of(sequenceNumber, subSequenceNumber ?? 0);
  }
  async checkpointRecord(): Promise<void> {}
  async prepareCheckpoint(): Promise<never> {
    throw new Error('not used');
  }
}

function setUp(replayBufferMaxBytes = 1_000_000) {
  const directory = mkdtempSync(join(tmpdir(), 'kcl-processor-'));
  const out = join(directory, 'out.jsonl');
  const failures: MultiLangChildError[] = [];
  const sessions = new Set<ChildSession>();
  const processor = new MultiLangShardProcessor(SHARD, {
    command: CHILD,
    workingDirectory: process.cwd(),
    environment: { ...process.env, OUT: out, MARKER: join(directory, 'marker') },
    logger: noopLogger,
    clock: systemClock,
    messageTimeoutMs: null,
    exitTimeoutMs: 5_000,
    killTimeoutMs: 2_000,
    replayBufferMaxBytes,
    onChildFailure: (error) => failures.push(error),
    sessions,
  });
  const seen = () =>
    existsSync(out)
      ? readFileSync(out, 'utf8')
          .split('\n')
          .filter((line) => line !== '')
          .map(
            (line) =>
              JSON.parse(line) as { pid: number; action: string; data?: string; sequenceNumber?: string },
          )
      : [];
  return { processor, failures, sessions, seen };
}

const input = (checkpointer: MemoryCheckpointer, records: KinesisRecord[]) => {
  checkpointer.largestPermitted = ExtendedSequenceNumber.of(records.at(-1)?.sequenceNumber ?? '0');
  return {
    shardId: SHARD,
    leaseKey: SHARD,
    records,
    millisBehindLatest: 0,
    checkpointer,
    signal: new AbortController().signal,
  };
};

describe('MultiLangShardProcessor', () => {
  it('replays what the dead child acknowledged but did not checkpoint to its replacement, then the failed batch', async () => {
    const { processor, failures, sessions, seen } = setUp();
    const checkpointer = new MemoryCheckpointer();
    await processor.initialize({
      shardId: SHARD,
      leaseKey: SHARD,
      checkpoint: ExtendedSequenceNumber.TRIM_HORIZON,
      pendingCheckpoint: null,
    });
    await processor.processRecords(input(checkpointer, [record('1', 'cp'), record('2', 'two')]));
    expect(checkpointer.lastCheckpoint.sequenceNumber).toBe('1');
    await processor.processRecords(input(checkpointer, [record('3', 'three')]));
    const failing = input(checkpointer, [record('4', 'four'), record('5', 'crash'), record('6', 'six')]);
    await expect(processor.processRecords(failing)).rejects.toMatchObject({
      reason: 'exited',
      shardId: SHARD,
    });
    expect(failures.map((failure) => failure.reason)).toEqual(['exited']);
    expect(processor.session).toBeNull();

    // The consumer retries the batch: a new child, initialized at the checkpoint, gets everything after it.
    await processor.processRecords(failing);
    const [first, second] = [...new Set(seen().map((entry) => entry.pid))];
    expect(
      seen()
        .filter((entry) => entry.pid === first)
        .map((entry) => entry.data ?? entry.action),
    ).toEqual(['initialize', 'cp', 'two', 'three', 'four']);
    const replacement = seen().filter((entry) => entry.pid === second);
    expect(replacement[0]).toMatchObject({ action: 'initialize', sequenceNumber: '1' });
    expect(replacement.slice(1).map((entry) => entry.data)).toEqual(['two', 'three', 'four', 'crash', 'six']);
    expect(sessions.size).toBe(1);

    await processor.shardEnded({
      shardId: SHARD,
      leaseKey: SHARD,
      checkpointer: Object.assign(checkpointer, { largestPermitted: ExtendedSequenceNumber.SHARD_END }),
    });
    expect(checkpointer.lastCheckpoint.isShardEnd).toBe(true);
    expect(
      seen()
        .slice(-2)
        .map((entry) => entry.action),
    ).toEqual(['shardEnded', 'eof']);
    expect(processor.session).toBeNull();
    await processor.leaseLost();
  });

  it('refuses to restart when the dead child held more than the replay buffer kept', async () => {
    const { processor, failures } = setUp(5);
    const checkpointer = new MemoryCheckpointer();
    await processor.initialize({
      shardId: SHARD,
      leaseKey: SHARD,
      checkpoint: ExtendedSequenceNumber.TRIM_HORIZON,
      pendingCheckpoint: null,
    });
    await processor.processRecords(input(checkpointer, [record('1', 'a long enough record')]));
    const failing = input(checkpointer, [record('2', 'crash')]);
    await expect(processor.processRecords(failing)).rejects.toMatchObject({ reason: 'exited' });
    await expect(processor.processRecords(failing)).rejects.toMatchObject({
      reason: 'replay-incomplete',
      retryable: false,
    });
    expect(failures.map((failure) => failure.reason)).toEqual(['exited', 'replay-incomplete']);
  });

  it('sends leaseLost, closes stdin and lets the child exit; a processor without a child does nothing', async () => {
    const { processor, seen, sessions } = setUp();
    await processor.leaseLost();
    expect(seen()).toEqual([]);
    const { processor: other, seen: otherSeen } = setUp();
    await other.initialize({
      shardId: SHARD,
      leaseKey: SHARD,
      checkpoint: ExtendedSequenceNumber.LATEST,
      pendingCheckpoint: null,
    });
    // An empty batch (callProcessRecordsEvenForEmptyRecordList) is delivered as such.
    await other.processRecords(input(new MemoryCheckpointer(), []));
    await other.leaseLost();
    expect(otherSeen().map((entry) => entry.action)).toEqual([
      'initialize',
      'emptyBatch',
      'leaseLost',
      'eof',
    ]);
    expect(sessions.size).toBe(0);
  });
});
