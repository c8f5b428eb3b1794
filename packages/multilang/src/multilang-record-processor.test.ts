import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Checkpointer, KinesisRecord } from '@kcl/consumer';
import {
  ExtendedSequenceNumber,
  InvalidCheckpointError,
  LeaseLostError,
  noopLogger,
  systemClock,
} from '@kcl/core';
import { describe, expect, it } from 'vitest';
import { nodeChild } from '../test/support/inline-child.js';
import type { ChildSession } from './child-session.js';
import type { ExecutableCommand } from './executable-command.js';
import { MultiLangChildError } from './multilang-errors.js';
import { type MultiLangProcessorOptions, MultiLangShardProcessor } from './multilang-record-processor.js';
import { ReplayMemoryBudget } from './replay-buffer.js';

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

/**
 * A protocol-faithful child for the restart tests. The first process dies on a record "crash" (mid-batch)
 * or right after acknowledging a batch holding "exit-after" (between actions). Every process dies on
 * the record $POISON, and on a record "once-…" the first time any process sees it. With
 * $CHECKPOINT_EACH set, every process checkpoints each record it processes. Its replacement (the
 * marker file exists when it starts) sends one checkpoint after the first record it gets: with no
 * sequence number ("everything delivered so far", as Go's CheckpointBatch and aws-kcl's
 * checkpoint(callback) send it), or at $REPLACEMENT_CHECKPOINT.
 */
const RESTARTING_CHILD = nodeChild(`
  const fs = require('fs');
  const log = (entry) => fs.appendFileSync(process.env.OUT, JSON.stringify({ pid: process.pid, ...entry }) + '\\n');
  const replacement = fs.existsSync(process.env.MARKER);
  let checkpointed = false;
  const checkpoint = async (sequenceNumber) => {
    send({ action: 'checkpoint', sequenceNumber });
    const reply = JSON.parse(await next());
    log({ action: 'checkpointReply', sequenceNumber, error: reply.error });
  };
  for (;;) {
    const line = await next();
    if (line === null) { log({ action: 'eof' }); process.exit(0); }
    const message = JSON.parse(line);
    if (message.action === 'processRecords') {
      let exitAfter = false;
      for (const record of message.records) {
        const data = Buffer.from(record.data, 'base64').toString();
        if (!replacement && data === 'crash') { fs.writeFileSync(process.env.MARKER, ''); process.exit(5); }
        if (data === process.env.POISON) process.exit(6);
        if (data.startsWith('once-') && !fs.existsSync(process.env.MARKER + data)) { fs.writeFileSync(process.env.MARKER + data, ''); process.exit(7); }
        if (!replacement && data === 'exit-after') exitAfter = true;
        log({ action: 'record', data, sequenceNumber: record.sequenceNumber });
        if (process.env.CHECKPOINT_EACH) await checkpoint(record.sequenceNumber);
        if (replacement && !checkpointed) {
          checkpointed = true;
          await checkpoint(process.env.REPLACEMENT_CHECKPOINT ?? null);
        }
      }
      send({ action: 'status', responseFor: 'processRecords' });
      if (exitAfter) { fs.writeFileSync(process.env.MARKER, ''); process.stdout.write('', () => process.exit(0)); return; }
      continue;
    }
    if (message.action === 'shardEnded') {
      await checkpoint(null);
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

/**
 * A checkpointer that keeps the last checkpoint in memory and enforces the consumer's rules (without a
 * store): no argument means the largest permitted position; never backwards, never past it.
 */
class MemoryCheckpointer implements Checkpointer {
  lastCheckpoint = ExtendedSequenceNumber.TRIM_HORIZON;
  largestPermitted = ExtendedSequenceNumber.TRIM_HORIZON;
  readonly written: string[] = [];
  async checkpoint(sequenceNumber?: string, subSequenceNumber?: number): Promise<void> {
    const target =
      sequenceNumber === undefined
        ? this.largestPermitted
        : ExtendedSequenceNumber.of(sequenceNumber, subSequenceNumber ?? 0);
    if (target.isBefore(this.lastCheckpoint) || target.isAfter(this.largestPermitted)) {
      throw new InvalidCheckpointError(`checkpoint ${target} out of range`);
    }
    this.lastCheckpoint = target;
    this.written.push(target.toString());
  }
  async checkpointRecord(): Promise<void> {}
  async prepareCheckpoint(): Promise<never> {
    throw new Error('not used');
  }
  async transaction(): Promise<never> {
    throw new Error('not used');
  }
}

interface SetUpOptions {
  readonly command?: ExecutableCommand;
  readonly environment?: Readonly<Record<string, string>>;
  readonly processor?: Partial<MultiLangProcessorOptions>;
}

function setUp(overrides: SetUpOptions = {}) {
  const directory = mkdtempSync(join(tmpdir(), 'kcl-processor-'));
  const out = join(directory, 'out.jsonl');
  const failures: MultiLangChildError[] = [];
  const sessions = new Set<ChildSession>();
  const processor = new MultiLangShardProcessor(SHARD, {
    command: overrides.command ?? CHILD,
    workingDirectory: process.cwd(),
    environment: { ...process.env, OUT: out, MARKER: join(directory, 'marker'), ...overrides.environment },
    logger: noopLogger,
    clock: systemClock,
    messageTimeoutMs: null,
    exitTimeoutMs: 5_000,
    killTimeoutMs: 2_000,
    replayBufferMaxBytes: 1_000_000,
    onChildFailure: (error) => failures.push(error),
    sessions,
    ...overrides.processor,
  });
  const seen = () =>
    existsSync(out)
      ? readFileSync(out, 'utf8')
          .split('\n')
          .filter((line) => line !== '')
          .map(
            (line) =>
              JSON.parse(line) as {
                pid: number;
                action: string;
                data?: string;
                sequenceNumber?: string;
                error?: string | null;
              },
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

const initializeInput = (checkpoint = ExtendedSequenceNumber.TRIM_HORIZON) => ({
  shardId: SHARD,
  leaseKey: SHARD,
  checkpoint,
  pendingCheckpoint: null,
});

async function until(condition: () => boolean, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

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

  it('gives the lease up instead of restarting when the dead child held more than the replay buffer kept', async () => {
    const givenUp: unknown[] = [];
    const { processor, failures } = setUp({
      processor: { replayBufferMaxBytes: 5, onShardGivenUp: (error: unknown) => givenUp.push(error) },
    });
    const checkpointer = new MemoryCheckpointer();
    await processor.initialize(initializeInput());
    await processor.processRecords(input(checkpointer, [record('1', 'a long enough record')]));
    const failing = input(checkpointer, [record('2', 'crash')]);
    await expect(processor.processRecords(failing)).rejects.toMatchObject({ reason: 'exited' });
    // A replacement could not be given record 1: the lease is released, so the shard is read again
    // from its checkpoint (by whichever worker takes it) and nothing is skipped.
    const thrown = await processor.processRecords(failing).then(
      () => null,
      (error: unknown) => error,
    );
    expect(thrown).toBeInstanceOf(LeaseLostError);
    expect(thrown).toMatchObject({ reason: 'replay-incomplete' });
    expect(givenUp).toEqual([thrown]);
    expect(failures.map((failure) => failure.reason)).toEqual(['exited']);
    await processor.leaseLost();
  });

  it('bounds the replay memory of all shards together (kcl.replayBufferTotalMaxBytes)', async () => {
    const replayBudget = new ReplayMemoryBudget(30);
    const givenUp: unknown[] = [];
    const busy = setUp({ processor: { replayBudget } });
    const crashing = setUp({
      processor: { replayBudget, onShardGivenUp: (error: unknown) => givenUp.push(error) },
    });
    const busyCheckpointer = new MemoryCheckpointer();
    const checkpointer = new MemoryCheckpointer();
    await busy.processor.initialize(initializeInput());
    await crashing.processor.initialize(initializeInput());
    // The first shard holds 20-odd bytes unacknowledged; each shard alone is far below its own limit.
    await busy.processor.processRecords(input(busyCheckpointer, [record('1', 'twenty bytes of data')]));
    expect(replayBudget.usedBytes).toBeGreaterThan(20);
    // The second shard's batch is delivered, but there is no room left to keep it for a replay.
    await crashing.processor.processRecords(input(checkpointer, [record('1', 'twenty bytes, again')]));
    expect(replayBudget.usedBytes).toBeLessThanOrEqual(30);
    const failing = input(checkpointer, [record('2', 'crash')]);
    await expect(crashing.processor.processRecords(failing)).rejects.toMatchObject({ reason: 'exited' });
    // Its replacement could not be given record 1: the lease is given up rather than skipping it.
    await expect(crashing.processor.processRecords(failing)).rejects.toMatchObject({
      reason: 'replay-incomplete',
    });
    expect(givenUp).toHaveLength(1);
    // A lost or released lease gives its bytes back.
    await busy.processor.leaseLost();
    await crashing.processor.leaseLost();
    expect(replayBudget.usedBytes).toBe(0);
  });

  it("translates a replacement child's no-argument checkpoint to the last record sent to it, so the failed batch still reaches it", async () => {
    const { processor, seen } = setUp({ command: RESTARTING_CHILD });
    const checkpointer = new MemoryCheckpointer();
    await processor.initialize(initializeInput());
    await processor.processRecords(
      input(checkpointer, [
        record('1', 'one'),
        record('2', 'two'),
        record('3', 'three'),
        record('4', 'four'),
      ]),
    );
    const failing = input(checkpointer, [record('5', 'crash'), record('6', 'six')]);
    await expect(processor.processRecords(failing)).rejects.toMatchObject({ reason: 'exited' });
    // The consumer raised the largest permitted checkpoint to 6 when it delivered the failed batch.
    expect(checkpointer.largestPermitted.sequenceNumber).toBe('6');

    // The retry: the new child gets 1..4 again and checkpoints "everything so far" after record 1.
    await processor.processRecords(failing);
    const pids = [...new Set(seen().map((entry) => entry.pid))];
    const replacement = seen().filter((entry) => entry.pid === pids[1]);
    expect(replacement.find((entry) => entry.action === 'checkpointReply')).toMatchObject({ error: null });
    // It had been sent 1..4, not 5 and 6: the checkpoint lands at 4, and 5 and 6 are delivered to it.
    expect(checkpointer.written).toEqual(['4']);
    expect(replacement.filter((entry) => entry.action === 'record').map((entry) => entry.data)).toEqual([
      'one',
      'two',
      'three',
      'four',
      'crash',
      'six',
    ]);
    await processor.leaseLost();
  });

  it("refuses a replacement child's checkpoint past the last record sent to it", async () => {
    const { processor, seen } = setUp({
      command: RESTARTING_CHILD,
      environment: { REPLACEMENT_CHECKPOINT: '6' },
    });
    const checkpointer = new MemoryCheckpointer();
    await processor.initialize(initializeInput());
    await processor.processRecords(input(checkpointer, [record('1', 'one'), record('2', 'two')]));
    const failing = input(checkpointer, [record('5', 'crash'), record('6', 'six')]);
    await expect(processor.processRecords(failing)).rejects.toMatchObject({ reason: 'exited' });
    await processor.processRecords(failing);
    // Asked for 6 while it had only been sent 1 and 2: refused as the Java checkpointer refuses a
    // sequence number it never delivered.
    expect(seen().find((entry) => entry.action === 'checkpointReply')).toMatchObject({
      sequenceNumber: '6',
      error: 'IllegalArgumentException',
    });
    expect(checkpointer.written).toEqual([]);
    expect(
      seen()
        .filter((entry) => entry.action === 'record')
        .map((entry) => entry.data),
    ).toEqual(['one', 'two', 'one', 'two', 'crash', 'six']);
    await processor.leaseLost();
  });

  it('checkpoints SHARD_END only in shardEnded, after the replacement child was sent every buffered record', async () => {
    const { processor, seen } = setUp({ command: RESTARTING_CHILD });
    const checkpointer = new MemoryCheckpointer();
    await processor.initialize(initializeInput());
    await processor.processRecords(input(checkpointer, [record('1', 'one'), record('2', 'two')]));
    // The child acknowledges 3 and 4 (without checkpointing) and exits: it dies between actions.
    await processor.processRecords(input(checkpointer, [record('3', 'exit-after'), record('4', 'four')]));
    await until(() => processor.session?.alive === false);

    checkpointer.largestPermitted = ExtendedSequenceNumber.SHARD_END;
    await processor.shardEnded({ shardId: SHARD, leaseKey: SHARD, checkpointer });
    const pids = [...new Set(seen().map((entry) => entry.pid))];
    const replacement = seen().filter((entry) => entry.pid === pids[1]);
    // Its checkpoint after record 1 stops at what it had been sent (2); 3 and 4 are replayed, then shardEnded.
    expect(checkpointer.written).toEqual(['2', 'SHARD_END']);
    expect(replacement.map((entry) => entry.data ?? entry.action)).toEqual([
      'initialize',
      'one',
      'checkpointReply',
      'two',
      'exit-after',
      'four',
      'checkpointReply',
      'shardEnded',
      'eof',
    ]);
    await processor.leaseLost();
  });

  it('gives the lease up after kcl.childFailureLimit child failures without progress (a poison record)', async () => {
    const givenUp: unknown[] = [];
    const { processor, failures, sessions, seen } = setUp({
      command: RESTARTING_CHILD,
      environment: { POISON: 'poison' },
      processor: { childFailureLimit: 3, onShardGivenUp: (error: unknown) => givenUp.push(error) },
    });
    const checkpointer = new MemoryCheckpointer();
    await processor.initialize(initializeInput());
    await processor.processRecords(input(checkpointer, [record('1', 'one')]));
    const poisoned = input(checkpointer, [record('2', 'two'), record('3', 'poison')]);
    // The consumer retries a batch that throws; each attempt is a new child dying on the same record.
    await expect(processor.processRecords(poisoned)).rejects.toBeInstanceOf(MultiLangChildError);
    await expect(processor.processRecords(poisoned)).rejects.toBeInstanceOf(MultiLangChildError);
    // The third failure without progress: an error the consumer treats as the end of the lease, so it
    // stops delivering and releases the lease for another worker (or a later attempt) to try.
    const thrown = await processor.processRecords(poisoned).then(
      () => null,
      (error: unknown) => error,
    );
    expect(thrown).toBeInstanceOf(LeaseLostError);
    expect((thrown as Error).message).toMatch(
      /shardId-000000000003.*3 child failures.*kcl\.childFailureLimit/,
    );
    expect(givenUp).toEqual([thrown]);
    expect(failures.map((failure) => failure.reason)).toEqual(['exited', 'exited', 'exited']);
    expect(sessions.size).toBe(0);
    // Asked again (it should not be), it starts no child.
    const children = new Set(seen().map((entry) => entry.pid)).size;
    await expect(processor.processRecords(poisoned)).rejects.toBe(thrown);
    expect(new Set(seen().map((entry) => entry.pid)).size).toBe(children);
    await processor.leaseLost();
  });

  it('gives up a child that cannot even start: initialize returns, and the first batch gives the lease up', async () => {
    const givenUp: unknown[] = [];
    const { processor, failures } = setUp({
      command: {
        executable: '/nonexistent/interpreter',
        args: ['app.py'],
        text: '/nonexistent/interpreter app.py',
      },
      processor: { childFailureLimit: 2, onShardGivenUp: (error: unknown) => givenUp.push(error) },
    });
    // The consumer retries initialize until it returns; it never releases the lease for a failure there.
    await expect(processor.initialize(initializeInput())).rejects.toMatchObject({ reason: 'start-failed' });
    await processor.initialize(initializeInput());
    expect(givenUp).toHaveLength(1);
    expect(failures.map((failure) => failure.reason)).toEqual(['start-failed', 'start-failed']);
    await expect(
      processor.processRecords(input(new MemoryCheckpointer(), [record('1', 'one')])),
    ).rejects.toBeInstanceOf(LeaseLostError);
    expect(failures).toHaveLength(2);
    await processor.leaseLost();
  });

  it('counts only failures without progress: a batch acknowledged or a checkpoint written starts the count again', async () => {
    const givenUp: unknown[] = [];
    const { processor } = setUp({
      command: RESTARTING_CHILD,
      environment: { POISON: 'poison', CHECKPOINT_EACH: '1' },
      processor: { childFailureLimit: 2, onShardGivenUp: (error: unknown) => givenUp.push(error) },
    });
    const checkpointer = new MemoryCheckpointer();
    await processor.initialize(initializeInput());
    // Dies once, then the batch goes through: acknowledged, the count starts again.
    const first = input(checkpointer, [record('1', 'one'), record('2', 'once-a')]);
    await expect(processor.processRecords(first)).rejects.toBeInstanceOf(MultiLangChildError);
    await processor.processRecords(first);
    // Dies before any checkpoint (1), then checkpoints 4 and 5 before dying on the poison (progress,
    // so 1 again), then dies with nothing new (2 = the limit).
    const second = input(checkpointer, [record('4', 'once-b'), record('5', 'five'), record('6', 'poison')]);
    await expect(processor.processRecords(second)).rejects.toBeInstanceOf(MultiLangChildError);
    await expect(processor.processRecords(second)).rejects.toBeInstanceOf(MultiLangChildError);
    expect(checkpointer.lastCheckpoint.sequenceNumber).toBe('5');
    expect(givenUp).toEqual([]);
    await expect(processor.processRecords(second)).rejects.toBeInstanceOf(LeaseLostError);
    expect(givenUp).toHaveLength(1);
    await processor.leaseLost();
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
