import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { Socket } from 'node:net';
import {
  CreateTableCommand,
  DescribeTableCommand,
  DynamoDBClient,
  GetItemCommand,
  PutItemCommand,
} from '@aws-sdk/client-dynamodb';
import {
  CreateStreamCommand,
  DescribeStreamSummaryCommand,
  GetRecordsCommand,
  GetShardIteratorCommand,
  KinesisClient,
  ListShardsCommand,
  PutRecordCommand,
} from '@aws-sdk/client-kinesis';
import { NodeHttpHandler } from '@smithy/node-http-handler';
import { describe, expect, it } from 'vitest';
import { startDynalite, startKinesisLocal } from '../src/index.js';

describe('startKinesisLocal', () => {
  it('starts on a free port; a stream can be created, written and read back', async () => {
    const emulator = await startKinesisLocal();
    const kinesis = new KinesisClient({
      endpoint: emulator.endpoint,
      region: emulator.region,
      credentials: emulator.credentials,
      requestHandler: new NodeHttpHandler(),
    });
    try {
      await kinesis.send(new CreateStreamCommand({ StreamName: 'smoke', ShardCount: 1 }));
      for (let attempt = 0; attempt < 100; attempt++) {
        const summary = await kinesis.send(new DescribeStreamSummaryCommand({ StreamName: 'smoke' }));
        if (summary.StreamDescriptionSummary?.StreamStatus === 'ACTIVE') break;
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      const put = await kinesis.send(
        new PutRecordCommand({ StreamName: 'smoke', PartitionKey: 'k', Data: Buffer.from('hello') }),
      );
      const shards = await kinesis.send(new ListShardsCommand({ StreamName: 'smoke' }));
      const iterator = await kinesis.send(
        new GetShardIteratorCommand({
          StreamName: 'smoke',
          ShardId: shards.Shards?.[0]?.ShardId,
          ShardIteratorType: 'TRIM_HORIZON',
        }),
      );
      const records = await kinesis.send(new GetRecordsCommand({ ShardIterator: iterator.ShardIterator }));
      expect(records.Records?.map((record) => Buffer.from(record.Data ?? []).toString())).toEqual(['hello']);
      expect(records.Records?.[0]?.SequenceNumber).toBe(put.SequenceNumber);
    } finally {
      kinesis.destroy();
      await emulator.stop();
      await emulator.stop();
    }
  });

  it('runs two emulators side by side on different ports', async () => {
    const [a, b] = await Promise.all([startKinesisLocal(), startKinesisLocal()]);
    try {
      expect(a.port).not.toBe(b.port);
    } finally {
      await Promise.all([a.stop(), b.stop()]);
    }
  });
});

describe('startDynalite', () => {
  it.each([
    ['in this process', false],
    ['in a child process', true],
  ])(
    'starts %s on a free port; a table can be created, written and read back',
    async (_where, separateProcess) => {
      const emulator = await startDynalite({ separateProcess });
      const dynamo = new DynamoDBClient({
        endpoint: emulator.endpoint,
        region: emulator.region,
        credentials: emulator.credentials,
      });
      try {
        await dynamo.send(
          new CreateTableCommand({
            TableName: 'smoke',
            KeySchema: [{ AttributeName: 'leaseKey', KeyType: 'HASH' }],
            AttributeDefinitions: [{ AttributeName: 'leaseKey', AttributeType: 'S' }],
            BillingMode: 'PAY_PER_REQUEST',
          }),
        );
        for (let attempt = 0; attempt < 100; attempt++) {
          const table = await dynamo.send(new DescribeTableCommand({ TableName: 'smoke' }));
          if (table.Table?.TableStatus === 'ACTIVE') break;
          await new Promise((resolve) => setTimeout(resolve, 20));
        }
        await dynamo.send(
          new PutItemCommand({
            TableName: 'smoke',
            Item: { leaseKey: { S: 'shardId-0' }, leaseCounter: { N: '3' } },
          }),
        );
        const item = await dynamo.send(
          new GetItemCommand({
            TableName: 'smoke',
            Key: { leaseKey: { S: 'shardId-0' } },
            ConsistentRead: true,
          }),
        );
        expect(item.Item?.leaseCounter).toEqual({ N: '3' });
      } finally {
        dynamo.destroy();
        await emulator.stop();
      }
    },
  );
});

describe('an emulator child process', () => {
  it.each([
    ['kinesis-local', 'startKinesisLocal()'],
    ['dynalite in a child process', 'startDynalite({ separateProcess: true })'],
  ])('%s ends when the process that started it is killed with -9', async (_name, start) => {
    // A parent process that starts the emulator from the built package, prints its port and waits.
    const entry = new URL('../dist/index.js', import.meta.url).href;
    const parent = spawn(
      process.execPath,
      [
        '--input-type=module',
        '-e',
        `const kit = await import(${JSON.stringify(entry)});
         const emulator = await kit.${start};
         console.log(emulator.port);
         setInterval(() => undefined, 60_000);`,
      ],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    try {
      const [line] = (await once(parent.stdout, 'data')) as [Buffer];
      const port = Number(line.toString().trim());
      expect(await accepts(port)).toBe(true);

      parent.kill('SIGKILL');
      await once(parent, 'exit');
      let open = true;
      for (let attempt = 0; attempt < 150 && open; attempt++) {
        await new Promise((resolve) => setTimeout(resolve, 100));
        open = await accepts(port);
      }
      expect(open).toBe(false);
    } finally {
      parent.kill('SIGKILL');
    }
  });
});

function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = new Socket();
    const done = (result: boolean): void => {
      socket.destroy();
      resolve(result);
    };
    socket.setTimeout(1_000, () => done(false));
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
    socket.connect(port, '127.0.0.1');
  });
}
