import { createHash } from 'node:crypto';

/** The KPL's magic prefix of an aggregated record. */
const MAGIC = Buffer.from([0xf3, 0x89, 0x9a, 0xc2]);

function varint(value: number): Buffer {
  const bytes: number[] = [];
  let rest = value;
  while (rest >= 0x80) {
    bytes.push((rest & 0x7f) | 0x80);
    rest = Math.floor(rest / 128);
  }
  bytes.push(rest);
  return Buffer.from(bytes);
}

function lengthDelimited(field: number, payload: Buffer): Buffer {
  return Buffer.concat([varint((field << 3) | 2), varint(payload.length), payload]);
}

function varintField(field: number, value: number): Buffer {
  return Buffer.concat([varint(field << 3), varint(value)]);
}

/**
 * Encodes user records as one KPL aggregated record (magic, protobuf AggregatedRecord, MD5 of the
 * protobuf), the format the consumer de-aggregates into sub-sequence numbers.
 */
export function aggregate(
  records: readonly { readonly partitionKey: string; readonly data: Buffer }[],
): Buffer {
  const keys = [...new Set(records.map((record) => record.partitionKey))];
  const parts: Buffer[] = keys.map((key) => lengthDelimited(1, Buffer.from(key)));
  for (const record of records) {
    const inner = Buffer.concat([
      varintField(1, keys.indexOf(record.partitionKey)),
      lengthDelimited(3, record.data),
    ]);
    parts.push(lengthDelimited(3, inner));
  }
  const protobuf = Buffer.concat(parts);
  return Buffer.concat([MAGIC, protobuf, createHash('md5').update(protobuf).digest()]);
}
