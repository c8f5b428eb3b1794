import { describe, expect, it } from 'vitest';
import { partitionKeyOf, recordDataOf } from './producer.js';
import { describeVerification, verificationPassed, verifyRun } from './verification.js';
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
    expect(result).toMatchObject({ processed: 3, lost: 3, examples: { lost: [1, 3, 5] } });
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
    const text = describeVerification(result, { killedWorkerId: 'w2', checkpointIntervalMs: 1_000 });
    expect(text[0]).toBe('produced 3, processed 3, lost 0, per-key order violations 0, duplicates 1');
    expect(text[1]).toMatch(
      /^ {2}1 processed again after the kill -9: w2 had processed them but not yet checkpointed/,
    );
    expect(text).toHaveLength(2);
  });

  it('says so when nothing was processed twice, and names lost records', () => {
    const result = verifyRun({ produced: 2, keys: KEYS, lines: [line(0, 'w1', 1)], ...NO_FAULTS });
    const text = describeVerification(result, { killedWorkerId: null, checkpointIntervalMs: 1_000 });
    expect(text[0]).toBe('produced 2, processed 1, lost 1, per-key order violations 0, duplicates 0');
    expect(text).toContain('  LOST: 1 records were never processed, e.g. r-1');
  });
});
