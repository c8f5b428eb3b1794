import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);

interface UserRecord {
  readonly partitionKey: string;
  readonly data: Buffer;
  readonly explicitHashKey?: string;
}

interface EncodedRecord {
  readonly partitionKey: string;
  readonly explicitHashKey?: string;
  readonly data: Buffer;
}

interface KinesisAggregation {
  aggregate(
    records: readonly UserRecord[],
    onEncoded: (record: EncodedRecord, done: (error?: unknown) => void) => void,
    afterAll: () => void,
    onError: (error: unknown) => void,
  ): void;
}

/** Aggregates user records with the aws-kinesis-agg library (the KPL's format), one aggregated record per call. */
export function aggregateWithKpl(records: readonly UserRecord[]): Promise<EncodedRecord[]> {
  const library = require('aws-kinesis-agg') as KinesisAggregation;
  return new Promise((resolve, reject) => {
    const encoded: EncodedRecord[] = [];
    library.aggregate(
      records,
      (record, done) => {
        encoded.push({ ...record, data: Buffer.from(record.data) });
        done();
      },
      () => resolve(encoded),
      reject,
    );
  });
}
