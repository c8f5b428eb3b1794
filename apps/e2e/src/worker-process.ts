#!/usr/bin/env node
// A consumer worker as its own OS process, for fleet tests. It appends every record it processes to a
// JSON-lines file *before* checkpointing (so a kill -9 never hides a processed record) and prints its
// events as JSON lines on stdout. SIGTERM stops it gracefully; SIGKILL is a crash.
import { appendFileSync } from 'node:fs';
import { KinesisClient } from '@aws-sdk/client-kinesis';
import { createConsumer, stopOnSignals } from '@kcl/consumer';
import { createLineLogger } from '@kcl/core';
import type { FleetTiming } from '@kcl/testkit';
import { NodeHttpHandler } from '@smithy/node-http-handler';
import { openStore, type StoreConfig } from './store-config.js';

export interface WorkerProcessConfig {
  readonly workerId: string;
  readonly applicationName: string;
  readonly streamName: string;
  readonly kinesisEndpoint: string;
  readonly store: StoreConfig;
  readonly outputFile: string;
  readonly timing: FleetTiming;
}

/** One line of the output file. */
export interface ProcessedLine {
  readonly w: string;
  readonly s: string;
  readonly q: string;
  readonly k: string;
  readonly d: string;
  readonly t: number;
}

const now = (): number => performance.timeOrigin + performance.now();

async function main(): Promise<void> {
  const config = JSON.parse(process.argv[2] ?? '{}') as WorkerProcessConfig;
  const { store, close } = await openStore(config.store, config.applicationName);
  const kinesis = new KinesisClient({
    endpoint: config.kinesisEndpoint,
    region: 'us-east-1',
    credentials: { accessKeyId: 'AKIAKCLLOCALTESTING0', secretAccessKey: 'kcl-local-secret' },
    requestHandler: new NodeHttpHandler(),
  });
  const logger = createLineLogger({
    write: (line) => process.stderr.write(`${line}\n`),
    level: 'warn',
    fields: { workerId: config.workerId },
  });
  const consumer = createConsumer({
    streamName: config.streamName,
    applicationName: config.applicationName,
    workerId: config.workerId,
    kinesis,
    leaseStore: store,
    initialPosition: 'TRIM_HORIZON',
    ...config.timing,
    logger,
    onEvent: (event) => {
      process.stdout.write(`${JSON.stringify({ ...event, at: now(), error: undefined })}\n`);
    },
    processor: (shardId) => ({
      async processRecords({ records, checkpointer }) {
        if (records.length === 0) return;
        const lines = records.map((record) =>
          JSON.stringify({
            w: config.workerId,
            s: shardId,
            q: record.sequenceNumber,
            k: record.partitionKey,
            d: Buffer.from(record.data).toString(),
            t: now(),
          } satisfies ProcessedLine),
        );
        appendFileSync(config.outputFile, `${lines.join('\n')}\n`);
        await checkpointer.checkpoint();
      },
      async shardEnded({ checkpointer }) {
        await checkpointer.checkpoint();
      },
      async shutdownRequested({ checkpointer }) {
        await checkpointer.checkpoint();
      },
    }),
  });
  stopOnSignals(consumer, { exit: false });
  await consumer.start();
  process.stdout.write(`${JSON.stringify({ type: 'ready', workerId: config.workerId, at: now() })}\n`);
  await consumer.stopped().catch((error: unknown) => {
    process.stderr.write(`worker ${config.workerId} failed: ${String(error)}\n`);
    process.exitCode = 1;
  });
  kinesis.destroy();
  await close();
}

main().catch((error: unknown) => {
  process.stderr.write(`worker failed to start: ${error instanceof Error ? error.stack : String(error)}\n`);
  process.exit(1);
});
