import type { KinesisRecord } from '@kcl/consumer';
import {
  ExtendedSequenceNumber,
  InvalidCheckpointError,
  InvalidSequenceNumberError,
  LeaseLostError,
  LeaseStoreError,
} from '@kcl/core';
import { describe, expect, it } from 'vitest';
import {
  checkpointErrorName,
  decodeChildLine,
  encodeDaemonMessage,
  initializeMessage,
  processRecordsMessage,
} from './multilang-protocol.js';

const record = (overrides: Partial<KinesisRecord> = {}): KinesisRecord => ({
  sequenceNumber: '49590338271490256608559692538361571095921575989136588898',
  subSequenceNumber: 0,
  partitionKey: 'pk',
  explicitHashKey: null,
  data: new Uint8Array(Buffer.from('hello')),
  approximateArrivalTimestamp: new Date(1_700_000_000_000),
  encryptionType: null,
  aggregated: false,
  ...overrides,
});

describe('encodeDaemonMessage', () => {
  it('writes initialize with every field, from the lease checkpoint', () => {
    expect(
      encodeDaemonMessage(initializeMessage('shardId-000000000001', ExtendedSequenceNumber.TRIM_HORIZON)),
    ).toBe(
      '{"action":"initialize","shardId":"shardId-000000000001","sequenceNumber":"TRIM_HORIZON","subSequenceNumber":0}',
    );
    expect(encodeDaemonMessage(initializeMessage('s', ExtendedSequenceNumber.of('123', 4)))).toBe(
      '{"action":"initialize","shardId":"s","sequenceNumber":"123","subSequenceNumber":4}',
    );
    expect(
      encodeDaemonMessage({
        action: 'initialize',
        shardId: 's',
        sequenceNumber: null,
        subSequenceNumber: null,
      }),
    ).toBe('{"action":"initialize","shardId":"s","sequenceNumber":null,"subSequenceNumber":null}');
  });

  it('writes records with "action":"record", base64 data, numeric timestamps and sub-sequence numbers', () => {
    const message = processRecordsMessage(
      [record(), record({ subSequenceNumber: 3, aggregated: true, data: new Uint8Array([0, 255, 10]) })],
      1234,
    );
    expect(encodeDaemonMessage(message)).toBe(
      '{"action":"processRecords","records":[' +
        '{"action":"record","data":"aGVsbG8=","partitionKey":"pk","sequenceNumber":"49590338271490256608559692538361571095921575989136588898","approximateArrivalTimestamp":1700000000000,"subSequenceNumber":0},' +
        '{"action":"record","data":"AP8K","partitionKey":"pk","sequenceNumber":"49590338271490256608559692538361571095921575989136588898","approximateArrivalTimestamp":1700000000000,"subSequenceNumber":3}' +
        '],"millisBehindLatest":1234}',
    );
    expect(encodeDaemonMessage(processRecordsMessage([], null))).toBe(
      '{"action":"processRecords","records":[],"millisBehindLatest":null}',
    );
  });

  it('base64-encodes only the bytes of a record whose data is a view into a larger buffer', () => {
    const backing = Buffer.from('xxhelloxx');
    const view = new Uint8Array(backing.buffer, backing.byteOffset + 2, 5);
    expect(processRecordsMessage([record({ data: view })], 0)).toMatchObject({
      records: [{ data: 'aGVsbG8=' }],
    });
  });

  it('keeps a partition key with a line break on one line', () => {
    const line = encodeDaemonMessage(processRecordsMessage([record({ partitionKey: 'a\nb' })], 0));
    expect(line).not.toContain('\n');
    expect(JSON.parse(line).records[0].partitionKey).toBe('a\nb');
  });

  it('writes the other actions and the checkpoint reply with explicit nulls', () => {
    expect(encodeDaemonMessage({ action: 'leaseLost' })).toBe('{"action":"leaseLost"}');
    expect(encodeDaemonMessage({ action: 'shardEnded' })).toBe('{"action":"shardEnded"}');
    expect(encodeDaemonMessage({ action: 'shutdownRequested' })).toBe('{"action":"shutdownRequested"}');
    expect(
      encodeDaemonMessage({
        action: 'checkpoint',
        sequenceNumber: undefined,
        subSequenceNumber: undefined,
        error: null,
      }),
    ).toBe('{"action":"checkpoint","sequenceNumber":null,"subSequenceNumber":null,"error":null}');
    expect(
      encodeDaemonMessage({
        action: 'checkpoint',
        sequenceNumber: '12',
        subSequenceNumber: 3,
        error: 'ShutdownException',
      }),
    ).toBe('{"action":"checkpoint","sequenceNumber":"12","subSequenceNumber":3,"error":"ShutdownException"}');
  });
});

describe('decodeChildLine', () => {
  it('reads status and checkpoint messages', () => {
    expect(decodeChildLine('{"action":"status","responseFor":"processRecords"}')).toEqual({
      kind: 'status',
      responseFor: 'processRecords',
    });
    expect(decodeChildLine('{"action":"status"}')).toEqual({ kind: 'status', responseFor: null });
    expect(decodeChildLine('{"action":"checkpoint","sequenceNumber":"12"}')).toEqual({
      kind: 'checkpoint',
      rawSequenceNumber: '12',
      rawSubSequenceNumber: undefined,
      request: { valid: true, sequenceNumber: '12', subSequenceNumber: null },
    });
    expect(
      decodeChildLine('  {"action":"checkpoint","sequenceNumber":null,"subSequenceNumber":null}  '),
    ).toMatchObject({
      request: { valid: true, sequenceNumber: null, subSequenceNumber: null },
    });
    expect(
      decodeChildLine('{"action":"checkpoint","sequenceNumber":"12","subSequenceNumber":2}'),
    ).toMatchObject({
      request: { valid: true, sequenceNumber: '12', subSequenceNumber: 2 },
    });
  });

  it('marks malformed checkpoint requests, which are answered with IllegalArgumentException', () => {
    expect(decodeChildLine('{"action":"checkpoint","sequenceNumber":12}')).toMatchObject({
      request: { valid: false },
    });
    expect(
      decodeChildLine('{"action":"checkpoint","sequenceNumber":"12","subSequenceNumber":-1}'),
    ).toMatchObject({ request: { valid: false } });
    expect(
      decodeChildLine('{"action":"checkpoint","sequenceNumber":"12","subSequenceNumber":1.5}'),
    ).toMatchObject({ request: { valid: false } });
  });

  it.each([
    ['', 'blank line'],
    ['   ', 'blank line'],
    ['hello from print()', 'not JSON'],
    ['[1,2]', 'not a JSON object'],
    ['"status"', 'not a JSON object'],
    ['{"responseFor":"initialize"}', 'no action'],
    ['{"action":"processRecords"}', 'unexpected action "processRecords"'],
  ])('skips %j (%s), as the Java daemon does', (line, reason) => {
    expect(decodeChildLine(line)).toEqual({ kind: 'skip', reason });
  });
});

describe('checkpointErrorName', () => {
  it('gives the Java exception names the children switch on', () => {
    expect(checkpointErrorName(new LeaseLostError('k', 'gone'))).toBe('ShutdownException');
    expect(checkpointErrorName(new InvalidCheckpointError('backwards'))).toBe('IllegalArgumentException');
    expect(checkpointErrorName(new InvalidSequenceNumberError('x'))).toBe('IllegalArgumentException');
    expect(
      checkpointErrorName(
        new LeaseStoreError('s', 'slow down', { code: 'LEASE_STORE_THROTTLED', retryable: true }),
      ),
    ).toBe('ThrottlingException');
    expect(
      checkpointErrorName(
        new LeaseStoreError('s', 'down', { code: 'LEASE_STORE_UNAVAILABLE', retryable: true }),
      ),
    ).toBe('KinesisClientLibDependencyException');
    expect(checkpointErrorName(new Error('anything else'))).toBe('KinesisClientLibDependencyException');
  });
});
