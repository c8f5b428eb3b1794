import type { KinesisClient } from '@aws-sdk/client-kinesis';
import { ManualClock } from '@kcl/testkit';
import { describe, expect, it } from 'vitest';
import { Producer, partitionKeyOf, recordDataOf, recordIndexOf } from './producer.js';

interface SentRecord {
  readonly PartitionKey: string;
  readonly Data: Uint8Array;
}

/** A stand-in for Kinesis that records each PutRecords call and rejects what `reject` says. */
function fakeClient(reject: (call: number, position: number) => boolean) {
  const calls: SentRecord[][] = [];
  const client = {
    async send(command: { input: { Records: SentRecord[] } }) {
      const call = calls.length;
      calls.push(command.input.Records);
      return {
        Records: command.input.Records.map((_, position) =>
          reject(call, position)
            ? { ErrorCode: 'ProvisionedThroughputExceededException' }
            : { SequenceNumber: '1' },
        ),
      };
    },
  } as unknown as KinesisClient;
  return { client, calls };
}

describe('Producer', () => {
  it('writes at the rate, each key at most once per batch, retrying rejected records before the next batch', async () => {
    const clock = new ManualClock();
    // The second call rejects its first two records.
    const { client, calls } = fakeClient((call, position) => call === 1 && position < 2);
    const retries: string[] = [];
    const producer = new Producer({
      client,
      streamName: 's',
      rate: 300,
      keys: 100,
      clock,
      onRetry: (message) => retries.push(message),
    });
    producer.start();
    await clock.advance(1_000);
    const written = await producer.stop();

    expect(written).toBe(300);
    for (const batch of calls) {
      const keys = batch.map((record) => record.PartitionKey);
      expect(new Set(keys).size).toBe(keys.length);
      expect(keys.length).toBeLessThanOrEqual(100);
    }
    // The rejected two were sent again on their own, before anything newer.
    expect(calls[2]?.map((record) => Buffer.from(record.Data).toString())).toEqual(
      calls[1]?.slice(0, 2).map((record) => Buffer.from(record.Data).toString()),
    );
    expect(retries).toEqual([`2 of ${calls[1]?.length} records rejected; retrying them`]);
    // Every record 0 … 299 reached the stream, under its key.
    const accepted = calls
      .flatMap((batch, call) => batch.filter((_, position) => !(call === 1 && position < 2)))
      .map((record) => ({
        key: record.PartitionKey,
        index: recordIndexOf(Buffer.from(record.Data).toString()),
      }));
    expect(accepted.map((record) => record.index).sort((a, b) => (a ?? 0) - (b ?? 0))).toEqual(
      Array.from({ length: 300 }, (_, index) => index),
    );
    for (const record of accepted) expect(record.key).toBe(partitionKeyOf(record.index ?? -1, 100));
  });

  it('names records so verification can read the index back', () => {
    expect(recordDataOf(42)).toBe('r-42');
    expect(recordIndexOf('r-42')).toBe(42);
    expect(recordIndexOf('x-42')).toBeNull();
    expect(partitionKeyOf(205, 200)).toBe('key-5');
  });

  it('names the stream in each payload when the demo writes to several', () => {
    expect(recordDataOf(42, 'kcl-demo-2')).toBe('kcl-demo-2/r-42');
    expect(recordIndexOf('kcl-demo-2/r-42', 'kcl-demo-2')).toBe(42);
    // A record of another stream, or one without a stream, is not one of this stream's.
    expect(recordIndexOf('kcl-demo-1/r-42', 'kcl-demo-2')).toBeNull();
    expect(recordIndexOf('r-42', 'kcl-demo-2')).toBeNull();
    expect(recordIndexOf('kcl-demo-2/r-42')).toBeNull();
  });

  it('writes payloads that name its stream when asked to', async () => {
    const clock = new ManualClock();
    const { client, calls } = fakeClient(() => false);
    const producer = new Producer({
      client,
      streamName: 'kcl-demo-2',
      streamInPayload: true,
      rate: 100,
      keys: 100,
      clock,
    });
    producer.start();
    await clock.advance(100);
    expect(await producer.stop()).toBe(10);
    expect(calls.flat().map((record) => Buffer.from(record.Data).toString())).toEqual(
      Array.from({ length: 10 }, (_, index) => `kcl-demo-2/r-${index}`),
    );
  });
});
