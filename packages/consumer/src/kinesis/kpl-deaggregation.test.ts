import { createHash } from 'node:crypto';
import { hashKeyOfPartitionKey, hashKeyRange, MAX_HASH_KEY } from '@kcl/core';
import { describe, expect, it } from 'vitest';
import { aggregateWithKpl } from '../../test/support/kpl-aggregator.js';
import { deaggregateRecords, decodeAggregatedRecord, KPL_MAGIC } from './kpl-deaggregation.js';

const arrival = new Date('2026-01-01T00:00:00Z');
const sdkRecord = (data: Uint8Array, sequenceNumber = '100', partitionKey = 'outer') => ({
  SequenceNumber: sequenceNumber,
  PartitionKey: partitionKey,
  Data: data,
  ApproximateArrivalTimestamp: arrival,
});

describe('deaggregateRecords', () => {
  it('expands a KPL aggregated record into sub-records numbered from 0', async () => {
    const [aggregated] = await aggregateWithKpl([
      { partitionKey: 'alpha', data: Buffer.from('one') },
      { partitionKey: 'beta', data: Buffer.from('two'), explicitHashKey: '12345' },
      { partitionKey: 'alpha', data: Buffer.from('three') },
    ]);
    const { records, droppedAggregates } = deaggregateRecords([sdkRecord(aggregated!.data, '4242')], null);
    expect(droppedAggregates).toBe(0);
    expect(
      records.map((record) => [
        record.sequenceNumber,
        record.subSequenceNumber,
        record.partitionKey,
        record.explicitHashKey,
        Buffer.from(record.data).toString(),
        record.aggregated,
      ]),
    ).toEqual([
      ['4242', 0, 'alpha', null, 'one', true],
      ['4242', 1, 'beta', '12345', 'two', true],
      ['4242', 2, 'alpha', null, 'three', true],
    ]);
    expect(records[0]?.approximateArrivalTimestamp).toEqual(arrival);
  });

  it('passes plain records through unchanged', () => {
    const { records } = deaggregateRecords([sdkRecord(Buffer.from('plain'), '7', 'pk')], null);
    expect(records).toEqual([
      {
        sequenceNumber: '7',
        subSequenceNumber: 0,
        partitionKey: 'pk',
        explicitHashKey: null,
        data: Buffer.from('plain'),
        approximateArrivalTimestamp: arrival,
        encryptionType: null,
        aggregated: false,
      },
    ]);
  });

  it('passes a record with the magic bytes but a wrong digest through unchanged', async () => {
    const [aggregated] = await aggregateWithKpl([{ partitionKey: 'a', data: Buffer.from('x') }]);
    const corrupt = Buffer.from(aggregated!.data);
    corrupt[corrupt.length - 1] = (corrupt[corrupt.length - 1] ?? 0) ^ 0xff;
    expect(decodeAggregatedRecord(corrupt)).toBeNull();
    const { records } = deaggregateRecords([sdkRecord(corrupt)], null);
    expect(records).toHaveLength(1);
    expect(records[0]?.aggregated).toBe(false);
    expect(Buffer.from(records[0]!.data).equals(corrupt)).toBe(true);
  });

  it('passes a record with a valid digest over an invalid protobuf through unchanged', () => {
    const message = Buffer.from([0x1a, 0xff, 0x01]); // field 3, length 255, truncated
    const digest = createHash('md5').update(message).digest();
    const data = Buffer.concat([KPL_MAGIC, message, digest]);
    const { records } = deaggregateRecords([sdkRecord(data)], null);
    expect(records).toHaveLength(1);
    expect(records[0]?.aggregated).toBe(false);
  });

  it('drops the whole aggregated record when any sub-record hashes outside the shard', async () => {
    const inside = 'key-a';
    const insideHash = hashKeyOfPartitionKey(inside);
    const range = hashKeyRange(insideHash, insideHash);
    const [mixed] = await aggregateWithKpl([
      { partitionKey: inside, data: Buffer.from('kept?') },
      { partitionKey: 'key-b', data: Buffer.from('elsewhere') },
    ]);
    const [onlyInside] = await aggregateWithKpl([{ partitionKey: inside, data: Buffer.from('kept') }]);
    const result = deaggregateRecords([sdkRecord(mixed!.data, '1'), sdkRecord(onlyInside!.data, '2')], range);
    expect(result.droppedAggregates).toBe(1);
    expect(result.records.map((record) => Buffer.from(record.data).toString())).toEqual(['kept']);
  });

  it('uses the explicit hash key, not the partition key, for the range check', async () => {
    const [aggregated] = await aggregateWithKpl([
      { partitionKey: 'anything', data: Buffer.from('x'), explicitHashKey: MAX_HASH_KEY.toString() },
    ]);
    const top = hashKeyRange(MAX_HASH_KEY, MAX_HASH_KEY);
    expect(deaggregateRecords([sdkRecord(aggregated!.data)], top).records).toHaveLength(1);
    expect(deaggregateRecords([sdkRecord(aggregated!.data)], hashKeyRange(0n, 10n)).droppedAggregates).toBe(
      1,
    );
  });

  it('keeps large aggregates intact (hundreds of sub-records)', async () => {
    const users = Array.from({ length: 500 }, (_, index) => ({
      partitionKey: `pk-${index % 7}`,
      data: Buffer.from(`payload-${index}`),
    }));
    const encoded = await aggregateWithKpl(users);
    const sdk = encoded.map((record, index) => sdkRecord(record.data, String(1000 + index)));
    const { records } = deaggregateRecords(sdk, null);
    expect(records.map((record) => Buffer.from(record.data).toString())).toEqual(
      users.map((user) => user.data.toString()),
    );
  });
});
