import { partitionKeyOf, recordDataOf, recordIndexOf } from './producer.js';
import type { ProcessedLine } from './worker-protocol.js';

/** The worker the script killed, and the last checkpoint it reported per lease before it died. */
export interface KilledWorker {
  readonly workerId: string;
  readonly at: number;
  /** Lease key → sequence number of its last checkpoint (sentinels such as TRIM_HORIZON allowed). */
  readonly checkpoints: ReadonlyMap<string, string>;
}

/** A worker stopped holding a lease without releasing it (it expired, or another worker took it). */
export interface LeaseLoss {
  readonly workerId: string;
  readonly leaseKey: string;
  readonly at: number;
  readonly reason: string;
}

export interface VerificationInput {
  /** Records written: indexes 0 … produced-1, record `i` under key `partitionKeyOf(i, keys)`. */
  readonly produced: number;
  readonly keys: number;
  /**
   * The stream whose records these are when the demo writes to several (their payloads name it, see
   * `recordDataOf`); null or absent with one stream.
   */
  readonly stream?: string | null;
  /** Every line every worker appended for this stream, counting repeats, in any order. */
  readonly lines: readonly ProcessedLine[];
  readonly killed: KilledWorker | null;
  readonly leaseLosses: readonly LeaseLoss[];
}

export interface DuplicateCauses {
  /** First processed by the killed worker, which had not checkpointed them when it died. */
  readonly killedBeforeCheckpoint: number;
  /** First processed by the killed worker at or before its last reported checkpoint (should not happen). */
  readonly killedAfterCheckpoint: number;
  /** First processed by a worker that later lost the lease (stolen or expired) before checkpointing them. */
  readonly leaseMoved: number;
  /** The stream holds the record twice (a PutRecords retried after its first attempt had been written). */
  readonly writtenTwice: number;
  readonly other: number;
}

export interface Verification {
  readonly produced: number;
  /** Distinct records the demo wrote that some worker processed. */
  readonly processed: number;
  readonly lost: number;
  readonly orderViolations: number;
  /** Processing lines beyond the first per record. */
  readonly duplicates: number;
  readonly duplicateCauses: DuplicateCauses;
  /** Lines whose payload or key the demo did not write. */
  readonly unexpected: number;
  /** A few examples, for diagnosis. */
  readonly examples: {
    /** Payloads of lost records. */
    readonly lost: readonly string[];
    readonly orderViolations: readonly string[];
    readonly unexplainedDuplicates: readonly string[];
  };
}

/**
 * Compares what was written with what the workers processed.
 *
 * - lost: written records no worker processed;
 * - per-key order: taking the *first* processing of each record, in time order, each key's records
 *   must come in write order (the producer writes each key at most once per batch, so write order per
 *   key is the index order);
 * - duplicates: processings beyond the first, each attributed to a cause.
 */
export function verifyRun(input: VerificationInput): Verification {
  const stream = input.stream ?? null;
  const byRecord = new Map<number, ProcessedLine[]>();
  let unexpected = 0;
  for (const line of input.lines) {
    const index = recordIndexOf(line.d, stream);
    if (index === null || index >= input.produced || line.k !== partitionKeyOf(index, input.keys)) {
      unexpected += 1;
      continue;
    }
    const list = byRecord.get(index);
    if (list === undefined) byRecord.set(index, [line]);
    else list.push(line);
  }

  const lostExamples: string[] = [];
  let lost = 0;
  for (let index = 0; index < input.produced; index++) {
    if (byRecord.has(index)) continue;
    lost += 1;
    if (lostExamples.length < 5) lostExamples.push(recordDataOf(index, stream));
  }

  // Per key, in the order of first processing.
  const firsts: Array<{ readonly index: number; readonly line: ProcessedLine }> = [];
  for (const [index, list] of byRecord) {
    list.sort((a, b) => a.t - b.t);
    firsts.push({ index, line: list[0]! });
  }
  firsts.sort((a, b) => a.line.t - b.line.t || a.index - b.index);
  const highest = new Map<string, number>();
  const orderExamples: string[] = [];
  let orderViolations = 0;
  for (const { index, line } of firsts) {
    const before = highest.get(line.k) ?? -1;
    if (index < before) {
      orderViolations += 1;
      if (orderExamples.length < 5)
        orderExamples.push(
          `${line.k}: ${recordDataOf(index, stream)} was processed after ${recordDataOf(before, stream)} (by ${line.w} on ${line.s})`,
        );
    } else highest.set(line.k, index);
  }

  const causes = {
    killedBeforeCheckpoint: 0,
    killedAfterCheckpoint: 0,
    leaseMoved: 0,
    writtenTwice: 0,
    other: 0,
  };
  let duplicates = 0;
  const unexplained: string[] = [];
  for (const list of byRecord.values()) {
    const first = list[0]!;
    for (const again of list.slice(1)) {
      duplicates += 1;
      const cause = duplicateCause(first, again, input);
      causes[cause] += 1;
      if (cause === 'other' && unexplained.length < 5)
        unexplained.push(
          `${first.d} on ${first.s}: by ${first.w} at ${first.t.toFixed(1)}, again by ${again.w} at ${again.t.toFixed(1)}`,
        );
    }
  }

  return {
    produced: input.produced,
    processed: byRecord.size,
    lost,
    orderViolations,
    duplicates,
    duplicateCauses: causes,
    unexpected,
    examples: { lost: lostExamples, orderViolations: orderExamples, unexplainedDuplicates: unexplained },
  };
}

/** What the demo wrote to one stream. */
export interface ProducedStream {
  /** The stream's name when the demo writes to several; null for its only stream. */
  readonly name: string | null;
  /** Records written to it. */
  readonly produced: number;
}

/** The verification of a whole run: in total and, when the demo wrote to several streams, per stream. */
export interface RunVerification {
  /** Every stream together: the sums of the per-stream figures. */
  readonly total: Verification;
  /** Per stream, in the order given; empty when the demo wrote to one stream. */
  readonly streams: readonly { readonly name: string; readonly verification: Verification }[];
}

/**
 * Verifies each stream on its own (record indexes and partition keys repeat from stream to stream)
 * and sums the results. A line of a stream the demo did not write to, or without a stream when it
 * wrote to several, is unexpected.
 */
export function verifyStreams(
  input: Omit<VerificationInput, 'produced' | 'stream'> & { readonly streams: readonly ProducedStream[] },
): RunVerification {
  const { streams, lines, ...shared } = input;
  const [only] = streams;
  if (streams.length === 1 && only !== undefined && only.name === null)
    return { total: verifyRun({ ...shared, produced: only.produced, lines }), streams: [] };
  const linesOf = new Map<string, ProcessedLine[]>(streams.map((stream) => [stream.name ?? '', []]));
  let stray = 0;
  for (const line of lines) {
    const list = line.n === undefined ? undefined : linesOf.get(line.n);
    if (list === undefined) stray += 1;
    else list.push(line);
  }
  const perStream = streams.map((stream) => ({
    name: stream.name ?? '',
    verification: verifyRun({
      ...shared,
      produced: stream.produced,
      stream: stream.name,
      lines: linesOf.get(stream.name ?? '') ?? [],
    }),
  }));
  return {
    total: sumVerifications(
      perStream.map((each) => each.verification),
      stray,
    ),
    streams: perStream,
  };
}

/** Several verifications as one: counts added up, examples kept up to five of each kind. */
function sumVerifications(parts: readonly Verification[], extraUnexpected: number): Verification {
  const sum = (pick: (part: Verification) => number): number =>
    parts.reduce((total, part) => total + pick(part), 0);
  const first5 = (pick: (part: Verification) => readonly string[]): string[] =>
    parts.flatMap(pick).slice(0, 5);
  return {
    produced: sum((part) => part.produced),
    processed: sum((part) => part.processed),
    lost: sum((part) => part.lost),
    orderViolations: sum((part) => part.orderViolations),
    duplicates: sum((part) => part.duplicates),
    duplicateCauses: {
      killedBeforeCheckpoint: sum((part) => part.duplicateCauses.killedBeforeCheckpoint),
      killedAfterCheckpoint: sum((part) => part.duplicateCauses.killedAfterCheckpoint),
      leaseMoved: sum((part) => part.duplicateCauses.leaseMoved),
      writtenTwice: sum((part) => part.duplicateCauses.writtenTwice),
      other: sum((part) => part.duplicateCauses.other),
    },
    unexpected: sum((part) => part.unexpected) + extraUnexpected,
    examples: {
      lost: first5((part) => part.examples.lost),
      orderViolations: first5((part) => part.examples.orderViolations),
      unexplainedDuplicates: first5((part) => part.examples.unexplainedDuplicates),
    },
  };
}

function duplicateCause(
  first: ProcessedLine,
  again: ProcessedLine,
  input: VerificationInput,
): keyof DuplicateCauses {
  if (again.q !== first.q) return 'writtenTwice';
  const lostAfter = (line: ProcessedLine): boolean =>
    input.leaseLosses.some(
      (loss) => loss.workerId === line.w && loss.leaseKey === line.s && loss.at >= line.t,
    );
  // The first worker lost the lease (it was stolen or expired) before it checkpointed the record.
  if (lostAfter(first)) return 'leaseMoved';
  const { killed } = input;
  if (killed !== null && first.w === killed.workerId && first.t <= killed.at) {
    const checkpoint = killed.checkpoints.get(first.s);
    return checkpoint === undefined || isAfter(first.q, checkpoint)
      ? 'killedBeforeCheckpoint'
      : 'killedAfterCheckpoint';
  }
  // A stolen lease: until the old owner notices (at its next renewal) both read the shard, and the
  // new owner, starting from the checkpoint, may get to a record first.
  if (lostAfter(again)) return 'leaseMoved';
  return 'other';
}

/** Whether sequence number `sequence` comes after `checkpoint` (a sentinel such as TRIM_HORIZON comes before everything). */
function isAfter(sequence: string, checkpoint: string): boolean {
  const [number] = checkpoint.split('/');
  if (number === undefined || !/^\d+$/.test(number)) return checkpoint !== 'SHARD_END';
  return BigInt(sequence) > BigInt(number);
}

/** The counts of a verification, as the verification line shows them. */
function countsOf(verification: Verification): string {
  return (
    `produced ${verification.produced}, processed ${verification.processed}, lost ${verification.lost}, ` +
    `per-key order violations ${verification.orderViolations}, duplicates ${verification.duplicates}`
  );
}

/**
 * The verification line (in total, then a line per stream when there are several), then why any
 * duplicates happened, then anything that went wrong.
 */
export function describeVerification(
  run: RunVerification,
  context: {
    readonly killedWorkerId: string | null;
    readonly checkpointIntervalMs: number;
    /** The counts are of the output table the workers committed with their checkpoints (--exactly-once). */
    readonly exactlyOnce?: boolean;
  },
): string[] {
  const verification = run.total;
  const { duplicateCauses: causes } = verification;
  const lines =
    run.streams.length === 0
      ? [countsOf(verification)]
      : [
          `${run.streams.length} streams: ${countsOf(verification)}`,
          ...run.streams.map((stream) => `  ${stream.name}: ${countsOf(stream.verification)}`),
        ];
  if (context.exactlyOnce === true) {
    lines.push(
      verification.duplicates === 0
        ? `  exactly once: the output table holds every record once — each batch's rows and its checkpoint committed in one transaction, so the batches cut short by the kill -9 or a lost lease left nothing behind`
        : '  the output table holds records twice although every batch committed with its checkpoint — unexpected',
    );
  } else if (verification.duplicates === 0) {
    lines.push('  no record was processed twice: every lease changed hands after its last checkpoint');
  }
  const seconds = `${context.checkpointIntervalMs / 1000} s`;
  if (causes.killedBeforeCheckpoint > 0)
    lines.push(
      `  ${causes.killedBeforeCheckpoint} processed again after the kill -9: ${context.killedWorkerId} had processed ` +
        `them but not yet checkpointed them (it checkpoints every ${seconds}) when it died, so the next owner ` +
        'resumed from its last checkpoint — at-least-once, as designed',
    );
  if (causes.leaseMoved > 0)
    lines.push(
      `  ${causes.leaseMoved} processed again after a lease moved to another worker (stolen to even out the fleet, ` +
        'or expired): its previous owner had processed them but not yet checkpointed them',
    );
  if (causes.writtenTwice > 0)
    lines.push(
      `  ${causes.writtenTwice} are in the stream twice: a PutRecords call was retried after its first attempt had been written`,
    );
  if (causes.killedAfterCheckpoint > 0)
    lines.push(
      `  ${causes.killedAfterCheckpoint} processed again although the killed worker had checkpointed them — unexpected`,
    );
  if (causes.other > 0) {
    lines.push(`  ${causes.other} processed again for no reason the demo can name — unexpected, e.g.`);
    for (const example of verification.examples.unexplainedDuplicates) lines.push(`    ${example}`);
  }
  if (verification.lost > 0)
    lines.push(
      `  LOST: ${verification.lost} records were never processed, e.g. ${verification.examples.lost.join(', ')}`,
    );
  for (const example of verification.examples.orderViolations) lines.push(`  ORDER: ${example}`);
  if (verification.unexpected > 0)
    lines.push(
      `  ${verification.unexpected} processed lines carry a record the demo did not write — unexpected`,
    );
  return lines;
}

/** The demo passes when nothing was lost and every key stayed in order. */
export function verificationPassed(verification: Verification): boolean {
  return verification.lost === 0 && verification.orderViolations === 0 && verification.unexpected === 0;
}
