import { KinesisClient } from '@aws-sdk/client-kinesis';
import { createMemoryLeaseStore, MemoryLeaseTable } from '@kcl/testkit';
import { describe, expect, it } from 'vitest';
import { isKinesisClient } from './consumer-options.js';
import { createConsumer } from './create-consumer.js';

describe('the kinesis option', () => {
  it('tells a client from settings by its send method, so a client of another SDK copy is used as given', async () => {
    expect(isKinesisClient(new KinesisClient({ region: 'eu-west-1' }))).toBe(true);
    expect(isKinesisClient({ region: 'eu-west-1', endpoint: 'http://localhost:4567' })).toBe(false);

    // A client whose class is not this package's KinesisClient: what an application's own copy of
    // @aws-sdk/client-kinesis hands over. It answers nothing; what matters is that it is called.
    const sent: string[] = [];
    const otherCopy = {
      config: {},
      send: async (command: object): Promise<never> => {
        sent.push(command.constructor.name);
        throw Object.assign(new Error('no stream here'), { name: 'ResourceNotFoundException' });
      },
      destroy: () => {},
    } as unknown as KinesisClient;
    const consumer = createConsumer({
      streamName: 'orders',
      applicationName: 'app',
      kinesis: otherCopy,
      leaseStore: createMemoryLeaseStore({ applicationName: 'app', table: new MemoryLeaseTable() }),
      processor: () => ({ processRecords: async () => {} }),
    });
    await consumer.start().catch(() => undefined);
    await consumer.stop();
    expect(sent.length).toBeGreaterThan(0);
    expect(sent.every((name) => name.endsWith('Command'))).toBe(true);
  });
});
