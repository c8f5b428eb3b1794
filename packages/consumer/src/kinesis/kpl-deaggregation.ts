import { createHash } from 'node:crypto';
import type { _Record as KinesisSdkRecord } from '@aws-sdk/client-kinesis';
import type { HashKeyRange } from '@kcl/core';
import { hashKeyOfPartitionKey, hashKeyRangeContains, KclError } from '@kcl/core';
import type { KinesisRecord } from '../processing/record-processor.js';

/** The four bytes that open a KPL aggregated record. */
export const KPL_MAGIC = Uint8Array.of(0xf3, 0x89, 0x9a, 0xc2);
const DIGEST_LENGTH = 16;

export interface DeaggregationResult {
  readonly records: KinesisRecord[];
  /** Aggregated records dropped whole because a sub-record's hash key lies outside the shard. */
  readonly droppedAggregates: number;
}

/**
 * Turns GetRecords records into the records a processor sees, expanding KPL aggregated records into
 * their sub-records (sub-sequence numbers 0, 1, 2, …). An aggregated record with any sub-record whose
 * hash key falls outside the shard's range is dropped whole: after a reshard the KPL may have sent it
 * to a shard that does not own those keys, and the owning shard carries its own copy. A record that
 * only looks aggregated (bad digest, bad protobuf) passes through unchanged.
 */
export function deaggregateRecords(
  records: readonly KinesisSdkRecord[],
  shardHashKeyRange: HashKeyRange | null,
): DeaggregationResult {
  const output: KinesisRecord[] = [];
  let droppedAggregates = 0;
  for (const record of records) {
    const data = record.Data ?? new Uint8Array(0);
    const aggregate = decodeAggregatedRecord(data);
    if (aggregate === null) {
      output.push(plainRecord(record, data));
      continue;
    }
    const expanded: KinesisRecord[] = [];
    let outside = false;
    let corrupt = false;
    for (const [index, sub] of aggregate.records.entries()) {
      const partitionKey = aggregate.partitionKeys[sub.partitionKeyIndex];
      const explicitHashKey =
        sub.explicitHashKeyIndex === null
          ? null
          : (aggregate.explicitHashKeys[sub.explicitHashKeyIndex] ?? null);
      if (partitionKey === undefined || (sub.explicitHashKeyIndex !== null && explicitHashKey === null)) {
        corrupt = true;
        break;
      }
      if (shardHashKeyRange !== null) {
        const hashKey = effectiveHashKey(partitionKey, explicitHashKey);
        if (hashKey === null || !hashKeyRangeContains(shardHashKeyRange, hashKey)) {
          outside = true;
          break;
        }
      }
      expanded.push({
        sequenceNumber: record.SequenceNumber ?? '',
        subSequenceNumber: index,
        partitionKey,
        explicitHashKey,
        data: sub.data,
        approximateArrivalTimestamp: record.ApproximateArrivalTimestamp ?? new Date(0),
        encryptionType: record.EncryptionType ?? null,
        aggregated: true,
      });
    }
    if (outside) {
      droppedAggregates += 1;
      continue;
    }
    if (corrupt) {
      // Indexes pointing outside the key tables: not a record the KPL wrote. Pass it through.
      output.push(plainRecord(record, data));
      continue;
    }
    output.push(...expanded);
  }
  return { records: output, droppedAggregates };
}

function plainRecord(record: KinesisSdkRecord, data: Uint8Array): KinesisRecord {
  return {
    sequenceNumber: record.SequenceNumber ?? '',
    subSequenceNumber: 0,
    partitionKey: record.PartitionKey ?? '',
    explicitHashKey: null,
    data,
    approximateArrivalTimestamp: record.ApproximateArrivalTimestamp ?? new Date(0),
    encryptionType: record.EncryptionType ?? null,
    aggregated: false,
  };
}

function effectiveHashKey(partitionKey: string, explicitHashKey: string | null): bigint | null {
  if (explicitHashKey === null) return hashKeyOfPartitionKey(partitionKey);
  return /^[0-9]+$/.test(explicitHashKey) ? BigInt(explicitHashKey) : null;
}

/** One user record inside a KPL aggregated record. */
export interface SubRecord {
  readonly partitionKeyIndex: number;
  readonly explicitHashKeyIndex: number | null;
  readonly data: Uint8Array;
}

/** A decoded KPL aggregated record: key tables and sub-records. */
export interface AggregatedRecord {
  readonly partitionKeys: string[];
  readonly explicitHashKeys: string[];
  readonly records: SubRecord[];
}

/** Decodes a KPL aggregated record, or returns null when `data` is not one (or is corrupt). */
export function decodeAggregatedRecord(data: Uint8Array): AggregatedRecord | null {
  if (data.length < KPL_MAGIC.length + DIGEST_LENGTH) return null;
  for (let index = 0; index < KPL_MAGIC.length; index++) {
    if (data[index] !== KPL_MAGIC[index]) return null;
  }
  const message = data.subarray(KPL_MAGIC.length, data.length - DIGEST_LENGTH);
  const digest = data.subarray(data.length - DIGEST_LENGTH);
  const expected = createHash('md5').update(message).digest();
  if (!expected.equals(digest)) return null;
  try {
    return parseAggregatedRecord(message);
  } catch {
    return null;
  }
}

const textDecoder = new TextDecoder('utf-8', { fatal: true });

function parseAggregatedRecord(message: Uint8Array): AggregatedRecord {
  const reader = new ProtobufReader(message);
  const result: AggregatedRecord = { partitionKeys: [], explicitHashKeys: [], records: [] };
  while (!reader.done) {
    const [field, wireType] = reader.tag();
    if (field === 1 && wireType === 2) result.partitionKeys.push(textDecoder.decode(reader.bytes()));
    else if (field === 2 && wireType === 2) result.explicitHashKeys.push(textDecoder.decode(reader.bytes()));
    else if (field === 3 && wireType === 2) result.records.push(parseSubRecord(reader.bytes()));
    else reader.skip(wireType);
  }
  return result;
}

function parseSubRecord(message: Uint8Array): SubRecord {
  const reader = new ProtobufReader(message);
  let partitionKeyIndex: number | null = null;
  let explicitHashKeyIndex: number | null = null;
  let data: Uint8Array | null = null;
  while (!reader.done) {
    const [field, wireType] = reader.tag();
    if (field === 1 && wireType === 0) partitionKeyIndex = reader.varint();
    else if (field === 2 && wireType === 0) explicitHashKeyIndex = reader.varint();
    else if (field === 3 && wireType === 2) data = reader.bytes();
    else reader.skip(wireType);
  }
  if (partitionKeyIndex === null || data === null)
    throw new KclError('KPL_RECORD_INVALID', 'sub-record without its required fields');
  return { partitionKeyIndex, explicitHashKeyIndex, data };
}

/** The few protobuf wire-format reads the KPL message needs. */
class ProtobufReader {
  readonly #buffer: Uint8Array;
  #offset = 0;

  constructor(buffer: Uint8Array) {
    this.#buffer = buffer;
  }

  get done(): boolean {
    return this.#offset >= this.#buffer.length;
  }

  tag(): [field: number, wireType: number] {
    const value = this.varint();
    return [Math.floor(value / 8), value % 8];
  }

  varint(): number {
    let result = 0;
    let multiplier = 1;
    for (let shift = 0; shift < 64; shift += 7) {
      const byte = this.#buffer[this.#offset++];
      if (byte === undefined) throw new KclError('KPL_RECORD_INVALID', 'truncated varint');
      result += (byte & 0x7f) * multiplier;
      if ((byte & 0x80) === 0) {
        if (!Number.isSafeInteger(result)) throw new KclError('KPL_RECORD_INVALID', 'varint too large');
        return result;
      }
      multiplier *= 128;
    }
    throw new KclError('KPL_RECORD_INVALID', 'varint too long');
  }

  bytes(): Uint8Array {
    const length = this.varint();
    const end = this.#offset + length;
    if (end > this.#buffer.length) throw new KclError('KPL_RECORD_INVALID', 'truncated field');
    const value = this.#buffer.subarray(this.#offset, end);
    this.#offset = end;
    return value;
  }

  skip(wireType: number): void {
    if (wireType === 0) this.varint();
    else if (wireType === 2) this.bytes();
    else if (wireType === 1) this.#advance(8);
    else if (wireType === 5) this.#advance(4);
    else throw new KclError('KPL_RECORD_INVALID', `unsupported wire type ${wireType}`);
  }

  #advance(count: number): void {
    if (this.#offset + count > this.#buffer.length)
      throw new KclError('KPL_RECORD_INVALID', 'truncated field');
    this.#offset += count;
  }
}
