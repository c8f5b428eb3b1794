// What README examples may use without defining it: the objects an application already has.
import type { KinesisClient } from '@aws-sdk/client-kinesis';
import type { RecordProcessorFactory } from '@kcl/consumer';
import type { LeaseStore } from '@kcl/core';

declare global {
  const kinesis: KinesisClient;
  const leaseStore: LeaseStore;
  const processor: RecordProcessorFactory;
  const database: { insertMany(batchKey: string, rows: readonly Uint8Array[]): Promise<void> };
}
