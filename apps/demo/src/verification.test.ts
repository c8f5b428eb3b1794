import { describe, expect, it } from 'vitest';
import { partitionKeyOf, recordDataOf } from './producer.js';
import { describeVerification, verificationPassed, verifyRun, verifyStreams } from './verification.js';
import type { ProcessedLine } from './worker-protocol.js';

const KEYS = 3;

/** A processed line for record `index`, read from `shard` at sequence `1000 + index`. */
function line(
  index: number,
  worker: string,
  t: number,
  shard = 'shard-a',
  sequence = 1000 + index,
): ProcessedLine {
  return {
    w: worker,
    s: shard,
    q: String(sequence),
    k: partitionKeyOf(index, KEYS),
    d: recordDataOf(index),
    t,
  };
}

const NO_FAULTS = { killed: null, leaseLosses: [] } as const;

describe('verifyRun', () => {
  it('passes a run where every record was processed once, in order', () => {
    const lines = [0, 1, 2, 3, 4, 5].map((index) => line(index, 'w1', 10 + index));
    const result = verifyRun({ produced: 6, keys: KEYS, lines, ...NO_FAULTS });
    expect(result).toMatchObject({ produced: 6, processed: 6, lost: 0, orderViolations: 0, duplicates: 0 });
    expect(verificationPassed(result)).toBe(true);
  });

  it('counts records nobody processed as lost', () => {
    const lines = [0, 2, 4].map((index) => line(index, 'w1', 10 + index));
    const result = verifyRun({ produced: 6, keys: KEYS, lines, ...NO_FAULTS });
    expect(result).toMatchObject({ processed: 3, lost: 3, examples: { lost: ['r-1', 'r-3', 'r-5'] } });
    expect(verificationPassed(result)).toBe(false);
  });

  it('counts a key whose later record was first processed before an earlier one as an order violation', () => {
    // Records 0 and 3 share key-0; records 1 and 4 share key-1. Record 3 is processed before record 0.
    const lines = [line(3, 'w1', 10), line(0, 'w2', 11), line(1, 'w1', 12), line(4, 'w1', 13)];
    const result = verifyRun({ produced: 5, keys: KEYS, lines: [...lines, line(2, 'w1', 14)], ...NO_FAULTS });
    expect(result.orderViolations).toBe(1);
    expect(result.examples.orderViolations).toEqual([
      'key-0: r-0 was processed after r-3 (by w2 on shard-a)',
    ]);
    expect(verificationPassed(result)).toBe(false);
  });

  it('judges order by the first processing: replaying older records later is not a violation', () => {
    const lines = [0, 1, 2, 3].map((index) => line(index, 'w1', 10 + index));
    // w2 replays 2 and 3 after the fact, as after a crash.
    lines.push(line(2, 'w2', 20), line(3, 'w2', 21));
    const result = verifyRun({ produced: 4, keys: KEYS, lines, ...NO_FAULTS });
    expect(result).toMatchObject({ orderViolations: 0, duplicates: 2, lost: 0 });
  });

  it('attributes repeats of records the killed worker had not checkpointed to the kill', () => {
    const lines = [0, 1, 2, 3].map((index) => line(index, 'w2', 10 + index));
    lines.push(line(2, 'w3', 40), line(3, 'w3', 41));
    const result = verifyRun({
      produced: 4,
      keys: KEYS,
      lines,
      killed: { workerId: 'w2', at: 30, checkpoints: new Map([['shard-a', String(1001)]]) },
      leaseLosses: [],
    });
    expect(result.duplicates).toBe(2);
    expect(result.duplicateCauses).toEqual({
      killedBeforeCheckpoint: 2,
      killedAfterCheckpoint: 0,
      leaseMoved: 0,
      writtenTwice: 0,
      other: 0,
    });
  });

  it('flags repeats of records the killed worker had checkpointed', () => {
    const lines = [line(0, 'w2', 10), line(1, 'w2', 11), line(1, 'w3', 40)];
    const result = verifyRun({
      produced: 2,
      keys: KEYS,
      lines,
      killed: { workerId: 'w2', at: 30, checkpoints: new Map([['shard-a', String(1001)]]) },
      leaseLosses: [],
    });
    expect(result.duplicateCauses).toMatchObject({ killedBeforeCheckpoint: 0, killedAfterCheckpoint: 1 });
  });

  it('attributes repeats after a lost lease to the lease moving, whichever worker got there first', () => {
    const lines = [
      line(0, 'w1', 10),
      line(0, 'w4', 20), // w1 lost the lease after processing record 0
      line(1, 'w4', 21),
      line(1, 'w1', 22), // the thief got to record 1 before w1 noticed the loss
    ];
    const result = verifyRun({
      produced: 2,
      keys: KEYS,
      lines,
      killed: null,
      leaseLosses: [{ workerId: 'w1', leaseKey: 'shard-a', at: 25, reason: 'taken-by-other' }],
    });
    expect(result.duplicateCauses).toMatchObject({ leaseMoved: 2, other: 0 });
  });

  it('tells records written to the stream twice apart from records processed twice', () => {
    const lines = [line(0, 'w1', 10, 'shard-a', 1000), line(0, 'w1', 11, 'shard-a', 2000)];
    const result = verifyRun({ produced: 1, keys: KEYS, lines, ...NO_FAULTS });
    expect(result.duplicateCauses).toMatchObject({ writtenTwice: 1, other: 0 });
  });

  it('counts repeats it cannot explain as other, with examples', () => {
    const lines = [line(0, 'w1', 10), line(0, 'w2', 11)];
    const result = verifyRun({ produced: 1, keys: KEYS, lines, ...NO_FAULTS });
    expect(result.duplicateCauses.other).toBe(1);
    expect(result.examples.unexplainedDuplicates).toEqual([
      'r-0 on shard-a: by w1 at 10.0, again by w2 at 11.0',
    ]);
  });

  it('counts lines the demo did not write as unexpected, and fails on them', () => {
    const lines = [
      line(0, 'w1', 10),
      { ...line(0, 'w1', 11), d: 'hello' },
      { ...line(0, 'w1', 12), k: 'key-2' },
      line(5, 'w1', 13),
    ];
    const result = verifyRun({ produced: 1, keys: KEYS, lines, ...NO_FAULTS });
    expect(result).toMatchObject({ processed: 1, unexpected: 3, duplicates: 0 });
    expect(verificationPassed(result)).toBe(false);
  });
});

describe('describeVerification', () => {
  it('starts with the verification line and explains duplicates from the kill', () => {
    const lines = [0, 1, 2].map((index) => line(index, 'w2', 10 + index));
    lines.push(line(2, 'w3', 40));
    const result = verifyRun({
      produced: 3,
      keys: KEYS,
      lines,
      killed: { workerId: 'w2', at: 30, checkpoints: new Map([['shard-a', 'TRIM_HORIZON']]) },
      leaseLosses: [],
    });
    const text = describeVerification(
      { total: result, streams: [] },
      { killedWorkerId: 'w2', checkpointIntervalMs: 1_000 },
    );
    expect(text[0]).toBe('produced 3, processed 3, lost 0, per-key order violations 0, duplicates 1');
    expect(text[1]).toMatch(
      /^ {2}1 processed again after the kill -9: w2 had processed them but not yet checkpointed/,
    );
    expect(text).toHaveLength(2);
  });

  it('says so when nothing was processed twice, and names lost records', () => {
    const result = verifyRun({ produced: 2, keys: KEYS, lines: [line(0, 'w1', 1)], ...NO_FAULTS });
    const text = describeVerification(
      { total: result, streams: [] },
      { killedWorkerId: null, checkpointIntervalMs: 1_000 },
    );
    expect(text[0]).toBe('produced 2, processed 1, lost 1, per-key order violations 0, duplicates 0');
    expect(text).toContain('  LOST: 1 records were never processed, e.g. r-1');
  });

  it('speaks of the output table with --exactly-once', () => {
    const once = verifyRun({
      produced: 2,
      keys: KEYS,
      lines: [line(0, 'w1', 1), line(1, 'w2', 2)],
      ...NO_FAULTS,
    });
    expect(
      describeVerification(
        { total: once, streams: [] },
        { killedWorkerId: 'w2', checkpointIntervalMs: 1_000, exactlyOnce: true },
      )[1],
    ).toMatch(/^ {2}exactly once: the output table holds every record once/);
    const twice = verifyRun({
      produced: 1,
      keys: KEYS,
      lines: [line(0, 'w1', 1), line(0, 'w2', 2)],
      ...NO_FAULTS,
    });
    expect(
      describeVerification(
        { total: twice, streams: [] },
        { killedWorkerId: null, checkpointIntervalMs: 1_000, exactlyOnce: true },
      )[1],
    ).toMatch(/holds records twice .* unexpected/);
  });
});

/** Lease keys as a multi-stream application writes them. */
const KEY_A = '000000000000:kcl-demo-1:1700000000:shardId-000000000000';
const KEY_B = '000000000000:kcl-demo-2:1700000001:shardId-000000000000';

/** A processed line of record `index` of `stream`, as a worker of a multi-stream fleet writes it. */
function streamLine(
  stream: string,
  index: number,
  worker: string,
  t: number,
  leaseKey: string,
): ProcessedLine {
  return { ...line(index, worker, t, leaseKey), d: recordDataOf(index, stream), n: stream };
}

describe('verifyStreams', () => {
  it('with one stream is verifyRun, with no per-stream results', () => {
    const lines = [0, 1, 2].map((index) => line(index, 'w1', 10 + index));
    const input = { keys: KEYS, lines, ...NO_FAULTS };
    expect(verifyStreams({ ...input, streams: [{ name: null, produced: 4 }] })).toEqual({
      total: verifyRun({ ...input, produced: 4 }),
      streams: [],
    });
  });

  it('verifies each stream on its own and sums them: the same index and key in two streams are two records', () => {
    const lines = [
      // kcl-demo-1: 0 … 3 in order, 2 processed twice.
      ...[0, 1, 2, 3].map((index) => streamLine('kcl-demo-1', index, 'w1', 10 + index, KEY_A)),
      streamLine('kcl-demo-1', 2, 'w2', 30, KEY_A),
      // kcl-demo-2: 1 lost, 3 before 0 on key-0.
      streamLine('kcl-demo-2', 3, 'w2', 10, KEY_B),
      streamLine('kcl-demo-2', 0, 'w2', 11, KEY_B),
      streamLine('kcl-demo-2', 2, 'w2', 12, KEY_B),
    ];
    const result = verifyStreams({
      streams: [
        { name: 'kcl-demo-1', produced: 4 },
        { name: 'kcl-demo-2', produced: 4 },
      ],
      keys: KEYS,
      lines,
      ...NO_FAULTS,
    });
    expect(result.streams.map((stream) => stream.name)).toEqual(['kcl-demo-1', 'kcl-demo-2']);
    expect(result.streams[0]?.verification).toMatchObject({
      produced: 4,
      processed: 4,
      lost: 0,
      orderViolations: 0,
      duplicates: 1,
    });
    expect(result.streams[1]?.verification).toMatchObject({
      produced: 4,
      processed: 3,
      lost: 1,
      orderViolations: 1,
      duplicates: 0,
      examples: {
        lost: ['kcl-demo-2/r-1'],
        orderViolations: [`key-0: kcl-demo-2/r-0 was processed after kcl-demo-2/r-3 (by w2 on ${KEY_B})`],
      },
    });
    expect(result.total).toMatchObject({
      produced: 8,
      processed: 7,
      lost: 1,
      orderViolations: 1,
      duplicates: 1,
      unexpected: 0,
      duplicateCauses: { other: 1 },
      examples: { lost: ['kcl-demo-2/r-1'] },
    });
    expect(verificationPassed(result.total)).toBe(false);
  });

  it('counts a record read under the wrong stream, or a line without a stream, as unexpected', () => {
    const lines = [
      streamLine('kcl-demo-1', 0, 'w1', 10, KEY_A),
      // A payload of kcl-demo-2 reported as read from kcl-demo-1.
      { ...streamLine('kcl-demo-1', 1, 'w1', 11, KEY_A), d: recordDataOf(1, 'kcl-demo-2') },
      streamLine('kcl-demo-2', 0, 'w1', 12, KEY_B),
      streamLine('kcl-demo-2', 1, 'w1', 13, KEY_B),
      // No stream, and a stream the demo did not write to.
      line(1, 'w1', 14),
      streamLine('kcl-demo-3', 0, 'w1', 15, KEY_B),
    ];
    const result = verifyStreams({
      streams: [
        { name: 'kcl-demo-1', produced: 2 },
        { name: 'kcl-demo-2', produced: 2 },
      ],
      keys: KEYS,
      lines,
      ...NO_FAULTS,
    });
    expect(result.streams[0]?.verification).toMatchObject({ processed: 1, lost: 1, unexpected: 1 });
    expect(result.streams[1]?.verification).toMatchObject({ processed: 2, lost: 0, unexpected: 0 });
    expect(result.total).toMatchObject({ processed: 3, lost: 1, unexpected: 3 });
  });

  it('attributes repeats after a kill and a lost lease by lease key, in each stream', () => {
    const lines = [
      streamLine('kcl-demo-1', 0, 'w1', 10, KEY_A),
      streamLine('kcl-demo-1', 0, 'w2', 40, KEY_A),
      streamLine('kcl-demo-2', 0, 'w3', 10, KEY_B),
      streamLine('kcl-demo-2', 0, 'w2', 41, KEY_B),
    ];
    const result = verifyStreams({
      streams: [
        { name: 'kcl-demo-1', produced: 1 },
        { name: 'kcl-demo-2', produced: 1 },
      ],
      keys: KEYS,
      lines,
      killed: { workerId: 'w1', at: 30, checkpoints: new Map([[KEY_A, 'TRIM_HORIZON']]) },
      leaseLosses: [{ workerId: 'w3', leaseKey: KEY_B, at: 35, reason: 'taken-by-other' }],
    });
    expect(result.total.duplicateCauses).toEqual({
      killedBeforeCheckpoint: 1,
      killedAfterCheckpoint: 0,
      leaseMoved: 1,
      writtenTwice: 0,
      other: 0,
    });
  });
});

describe('describeVerification with several streams', () => {
  it('reports the total, then each stream', () => {
    const lines = [
      streamLine('kcl-demo-1', 0, 'w1', 10, KEY_A),
      streamLine('kcl-demo-1', 1, 'w1', 11, KEY_A),
      streamLine('kcl-demo-2', 0, 'w1', 12, KEY_B),
    ];
    const result = verifyStreams({
      streams: [
        { name: 'kcl-demo-1', produced: 2 },
        { name: 'kcl-demo-2', produced: 2 },
      ],
      keys: KEYS,
      lines,
      ...NO_FAULTS,
    });
    expect(describeVerification(result, { killedWorkerId: null, checkpointIntervalMs: 1_000 })).toEqual([
      '2 streams: produced 4, processed 3, lost 1, per-key order violations 0, duplicates 0',
      '  kcl-demo-1: produced 2, processed 2, lost 0, per-key order violations 0, duplicates 0',
      '  kcl-demo-2: produced 2, processed 1, lost 1, per-key order violations 0, duplicates 0',
      '  no record was processed twice: every lease changed hands after its last checkpoint',
      '  LOST: 1 records were never processed, e.g. kcl-demo-2/r-1',
    ]);
  });
});
