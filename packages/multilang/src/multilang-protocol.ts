import type { KinesisRecord } from '@kcl/consumer';
import type { ExtendedSequenceNumber } from '@kcl/core';
import { InvalidCheckpointError, isKclError, LeaseLostError, LeaseStoreError } from '@kcl/core';

/** The actions the daemon sends that the child acknowledges with a `status` message. */
export type MultiLangAction =
  | 'initialize'
  | 'processRecords'
  | 'leaseLost'
  | 'shardEnded'
  | 'shutdownRequested';

/** One record as the child receives it (`JsonFriendlyRecord` in the Java daemon). */
export interface RecordMessage {
  readonly action: 'record';
  /** Base64. */
  readonly data: string;
  readonly partitionKey: string;
  readonly sequenceNumber: string;
  /** Epoch milliseconds. */
  readonly approximateArrivalTimestamp: number;
  readonly subSequenceNumber: number;
}

export type DaemonMessage =
  | {
      readonly action: 'initialize';
      readonly shardId: string;
      readonly sequenceNumber: string | null;
      readonly subSequenceNumber: number | null;
    }
  | {
      readonly action: 'processRecords';
      readonly records: readonly RecordMessage[];
      readonly millisBehindLatest: number | null;
    }
  | { readonly action: 'leaseLost' }
  | { readonly action: 'shardEnded' }
  | { readonly action: 'shutdownRequested' }
  | {
      readonly action: 'checkpoint';
      /** Echoed as the child sent it. */
      readonly sequenceNumber: unknown;
      readonly subSequenceNumber: unknown;
      /** The Java exception's simple class name, or null on success. */
      readonly error: CheckpointErrorName | null;
    };

/** A message that starts an exchange (every daemon message but the checkpoint reply). */
export type ActionMessage = Exclude<DaemonMessage, { readonly action: 'checkpoint' }>;

/** The exception names the children switch on (`RecordProcessorCheckpointer` in the Java KCL). */
export type CheckpointErrorName =
  | 'ThrottlingException'
  | 'ShutdownException'
  | 'InvalidStateException'
  | 'KinesisClientLibDependencyException'
  | 'IllegalArgumentException';

export function initializeMessage(shardId: string, checkpoint: ExtendedSequenceNumber): ActionMessage {
  return {
    action: 'initialize',
    shardId,
    sequenceNumber: checkpoint.sequenceNumber,
    subSequenceNumber: checkpoint.subSequenceNumber,
  };
}

export function recordMessage(record: KinesisRecord): RecordMessage {
  const data = Buffer.from(record.data.buffer, record.data.byteOffset, record.data.byteLength);
  return {
    action: 'record',
    data: data.toString('base64'),
    partitionKey: record.partitionKey,
    sequenceNumber: record.sequenceNumber,
    approximateArrivalTimestamp: record.approximateArrivalTimestamp.getTime(),
    subSequenceNumber: record.subSequenceNumber,
  };
}

export function processRecordsMessage(
  records: readonly KinesisRecord[],
  millisBehindLatest: number | null,
): ActionMessage {
  return { action: 'processRecords', records: records.map(recordMessage), millisBehindLatest };
}

/**
 * One line for the child's stdin (without the line break): every field written, nulls explicit, in
 * the Java daemon's order with `action` first. Never empty, never more than one line (JSON escapes
 * line breaks inside strings).
 */
export function encodeDaemonMessage(message: DaemonMessage): string {
  switch (message.action) {
    case 'initialize':
      return JSON.stringify({
        action: message.action,
        shardId: message.shardId,
        sequenceNumber: message.sequenceNumber,
        subSequenceNumber: message.subSequenceNumber,
      });
    case 'processRecords':
      return `{"action":"processRecords","records":[${message.records.map(encodeRecord).join(',')}],"millisBehindLatest":${JSON.stringify(message.millisBehindLatest)}}`;
    case 'checkpoint':
      return JSON.stringify({
        action: message.action,
        sequenceNumber: message.sequenceNumber ?? null,
        subSequenceNumber: message.subSequenceNumber ?? null,
        error: message.error,
      });
    default:
      return JSON.stringify({ action: message.action });
  }
}

function encodeRecord(record: RecordMessage): string {
  return JSON.stringify({
    action: 'record',
    data: record.data,
    partitionKey: record.partitionKey,
    sequenceNumber: record.sequenceNumber,
    approximateArrivalTimestamp: record.approximateArrivalTimestamp,
    subSequenceNumber: record.subSequenceNumber,
  });
}

/** What one line of the child's stdout turned out to be. */
export type ChildLine =
  | { readonly kind: 'status'; readonly responseFor: string | null }
  | {
      readonly kind: 'checkpoint';
      /** As sent (absent → undefined); echoed back in the reply. */
      readonly rawSequenceNumber: unknown;
      readonly rawSubSequenceNumber: unknown;
      /** The validated request, or why it is not valid. */
      readonly request:
        | {
            readonly valid: true;
            readonly sequenceNumber: string | null;
            readonly subSequenceNumber: number | null;
          }
        | { readonly valid: false; readonly problem: string };
    }
  /** Not a message the daemon acts on: blank, not JSON, no known action. Skipped, as the Java daemon does. */
  | { readonly kind: 'skip'; readonly reason: string };

/** Reads one line the child wrote to stdout. */
export function decodeChildLine(line: string): ChildLine {
  const trimmed = line.trim();
  if (trimmed === '') return { kind: 'skip', reason: 'blank line' };
  let parsed: unknown;
  try {
    parsed = JSON.parse(trimmed);
  } catch {
    return { kind: 'skip', reason: 'not JSON' };
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
    return { kind: 'skip', reason: 'not a JSON object' };
  }
  const message = parsed as Record<string, unknown>;
  switch (message.action) {
    case 'status':
      return {
        kind: 'status',
        responseFor: typeof message.responseFor === 'string' ? message.responseFor : null,
      };
    case 'checkpoint':
      return {
        kind: 'checkpoint',
        rawSequenceNumber: message.sequenceNumber,
        rawSubSequenceNumber: message.subSequenceNumber,
        request: checkpointRequest(message.sequenceNumber, message.subSequenceNumber),
      };
    default:
      return {
        kind: 'skip',
        reason:
          typeof message.action === 'string'
            ? `unexpected action ${JSON.stringify(message.action)}`
            : 'no action',
      };
  }
}

function checkpointRequest(
  sequenceNumber: unknown,
  subSequenceNumber: unknown,
): Extract<ChildLine, { kind: 'checkpoint' }>['request'] {
  if (sequenceNumber !== undefined && sequenceNumber !== null && typeof sequenceNumber !== 'string') {
    return {
      valid: false,
      problem: `sequenceNumber must be a string, got ${JSON.stringify(sequenceNumber)}`,
    };
  }
  let sub: number | null = null;
  if (subSequenceNumber !== undefined && subSequenceNumber !== null) {
    const value =
      typeof subSequenceNumber === 'string' && /^\d+$/.test(subSequenceNumber)
        ? Number(subSequenceNumber)
        : subSequenceNumber;
    if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0) {
      return {
        valid: false,
        problem: `subSequenceNumber must be a non-negative integer, got ${JSON.stringify(subSequenceNumber)}`,
      };
    }
    sub = value;
  }
  return {
    valid: true,
    sequenceNumber: typeof sequenceNumber === 'string' ? sequenceNumber : null,
    subSequenceNumber: sub,
  };
}

/** The Java exception name a child expects for an error thrown by a checkpoint. */
export function checkpointErrorName(error: unknown): CheckpointErrorName {
  // By marker, not instanceof: the error may come from another copy of @kcl/core.
  if (LeaseLostError.is(error)) return 'ShutdownException';
  if (InvalidCheckpointError.is(error)) return 'IllegalArgumentException';
  if (LeaseStoreError.is(error)) {
    return error.code === 'LEASE_STORE_THROTTLED'
      ? 'ThrottlingException'
      : 'KinesisClientLibDependencyException';
  }
  if (isKclError(error, 'INVALID_SEQUENCE_NUMBER')) return 'IllegalArgumentException';
  return 'KinesisClientLibDependencyException';
}
