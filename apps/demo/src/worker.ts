#!/usr/bin/env node
// A worker of the demo's fleet, as its own OS process. It appends every record it processes to a
// JSON-lines file *before* checkpointing, so a kill -9 never hides a processed record, and prints its
// events and status as JSON lines on stdout. SIGTERM stops it gracefully; SIGKILL is a crash. With an
// output table (--exactly-once) it inserts every batch into that table in the transaction of the
// batch's checkpoint instead, and appends the lines only after the commit.
import { appendFileSync } from 'node:fs';
import { KinesisClient } from '@aws-sdk/client-kinesis';
import { createConsumer } from '@kcl/consumer';
import { createLineLogger, type KclEvent, LeaseLostError, systemClock } from '@kcl/core';
import { openLeaseStore } from '@kcl/stores';
import { NodeHttpHandler } from '@smithy/node-http-handler';
import type { Transaction } from 'kysely';
import type { OutputRow } from './output-table.js';
import {
  type DemoWorkerConfig,
  type ProcessedLine,
  preciseNow,
  type WorkerEvent,
  type WorkerMessage,
} from './worker-protocol.js';

function send(message: WorkerMessage): void {
  process.stdout.write(`${JSON.stringify(message)}\n`);
}

function toWorkerEvent(event: KclEvent): WorkerEvent {
  const { error, checkpoint, ...rest } = event as KclEvent & { error?: unknown; checkpoint?: unknown };
  return {
    ...rest,
    ...(error === undefined ? {} : { error: error instanceof Error ? error.message : String(error) }),
    ...(checkpoint === undefined ? {} : { checkpoint: String(checkpoint) }),
  };
}

async function main(): Promise<void> {
  const config = JSON.parse(process.argv[2] ?? '{}') as DemoWorkerConfig;
  const { timing } = config;
  // A DynamoDB call that hangs fails after 10 s (and is retried) instead of stalling renewals.
  const store = await openLeaseStore(config.store, {
    applicationName: config.applicationName,
    requestTimeoutMs: 10_000,
  });
  const kinesis = new KinesisClient({
    endpoint: config.kinesis.endpoint,
    region: config.kinesis.region,
    credentials: { ...config.kinesis.credentials },
    requestHandler: new NodeHttpHandler({ requestTimeout: 15_000 }),
  });
  const logger = createLineLogger({
    write: (line) => process.stderr.write(`${line}\n`),
    level: 'warn',
    fields: { workerId: config.workerId },
  });
  let processed = 0;
  const peakLag = new Map<string, number>();
  // One stream keeps the single-stream lease keys (bare shard ids); several share one lease table,
  // with keys that name their stream.
  const multiStream = config.streams.length !== 1;
  const consumer = createConsumer({
    ...(multiStream ? { streams: config.streams } : { streamName: config.streams[0]! }),
    applicationName: config.applicationName,
    workerId: config.workerId,
    kinesis,
    leaseStore: store,
    initialPosition: 'TRIM_HORIZON',
    leaseRenewIntervalMs: timing.leaseRenewIntervalMs,
    leaseExpiryMs: timing.leaseExpiryMs,
    rebalanceIntervalMs: timing.rebalanceIntervalMs,
    pollIntervalMs: timing.pollIntervalMs,
    maxRecords: timing.maxRecords,
    parentPollIntervalMs: timing.parentPollIntervalMs,
    shardSyncIntervalMs: timing.shardSyncIntervalMs,
    leaseCleanupIntervalMs: timing.leaseCleanupIntervalMs,
    // Empty batches too, so an idle shard still checkpoints on time.
    callProcessRecordsEvenForEmptyRecordList: true,
    processingRetry: timing.processingRetry,
    kinesisRetry: timing.kinesisRetry,
    exactlyOnce: config.outputTable !== undefined,
    logger,
    onEvent: (event) => send({ type: 'event', at: preciseNow(), event: toWorkerEvent(event) }),
    processor: (_shardId, { leaseKey, stream }) => {
      let lastCheckpointAt = systemClock.monotonicNow();
      return {
        async processRecords({ records, checkpointer, millisBehindLatest }) {
          peakLag.set(leaseKey, Math.max(peakLag.get(leaseKey) ?? 0, millisBehindLatest));
          const table = config.outputTable;
          if (table !== undefined && records.length > 0) {
            const handledAt = preciseNow();
            // The rows and the checkpoint at the batch's end commit together; a kill -9 before the
            // commit leaves neither, and the next owner handles the batch again, once.
            // biome-ignore lint/suspicious/noExplicitAny: the demo's table is not part of a typed schema.
            await checkpointer.transaction<Transaction<any>>(async (transaction) => {
              const rows = records.map(
                (record): OutputRow => ({
                  worker_id: config.workerId,
                  lease_key: leaseKey,
                  stream_name: multiStream ? stream.name : null,
                  sequence_number: record.sequenceNumber,
                  sub_sequence_number: record.subSequenceNumber,
                  partition_key: record.partitionKey,
                  data: Buffer.from(record.data).toString(),
                  processed_at: handledAt,
                }),
              );
              // 9 columns a row: 100 rows stay far below SQLite's limit of bound parameters.
              for (let start = 0; start < rows.length; start += 100) {
                await transaction
                  .insertInto(table)
                  .values(rows.slice(start, start + 100))
                  .execute();
              }
            });
            lastCheckpointAt = systemClock.monotonicNow();
          }
          if (records.length > 0) {
            const lines = records.map((record) =>
              JSON.stringify({
                w: config.workerId,
                s: leaseKey,
                ...(multiStream ? { n: stream.name } : {}),
                q: record.sequenceNumber,
                k: record.partitionKey,
                d: Buffer.from(record.data).toString(),
                t: preciseNow(),
              } satisfies ProcessedLine),
            );
            appendFileSync(config.outputFile, `${lines.join('\n')}\n`);
            processed += records.length;
          }
          // Checkpoint periodically rather than after every batch, as applications usually do: what
          // was processed since the last checkpoint is processed again if this worker dies.
          if (systemClock.monotonicNow() - lastCheckpointAt >= timing.checkpointIntervalMs) {
            lastCheckpointAt = systemClock.monotonicNow();
            try {
              await checkpointer.checkpoint();
            } catch (error) {
              // The records are handled; a failed checkpoint is tried again with the next batch (throwing
              // would have the batch delivered, and appended, again). A lost lease needs nothing: the
              // runtime stops delivering this shard and reports the loss as an event.
              if (!LeaseLostError.is(error))
                send({
                  type: 'event',
                  at: preciseNow(),
                  event: {
                    type: 'checkpoint-failed',
                    workerId: config.workerId,
                    leaseKey,
                    error: error instanceof Error ? error.message : String(error),
                  },
                });
            }
          }
        },
        async shardEnded({ checkpointer }) {
          await checkpointer.checkpoint();
        },
        async shutdownRequested({ checkpointer }) {
          await checkpointer.checkpoint();
        },
      };
    },
  });

  // The demo decides what happens to its workers: Ctrl-C in the terminal reaches this process too,
  // and the demo then kills it. SIGTERM is the graceful stop.
  process.on('SIGINT', () => undefined);
  process.on('SIGTERM', () => void consumer.stop({ graceful: true }));
  // The demo keeps stdin open; when it ends, the demo is gone and nobody is watching: stop at once.
  process.stdin.on('end', () => process.exit(3));
  process.stdin.resume();

  await consumer.start();
  send({ type: 'ready', workerId: config.workerId, at: preciseNow() });
  const reporting = new AbortController();
  const reporter = (async () => {
    while (!reporting.signal.aborted) {
      send({
        type: 'status',
        workerId: config.workerId,
        at: preciseNow(),
        processed,
        leases: consumer.status().leases,
        peakLagMs: Object.fromEntries(peakLag),
      });
      peakLag.clear();
      await systemClock.sleep(config.statusIntervalMs, reporting.signal);
    }
  })();
  await consumer.stopped().catch((error: unknown) => {
    process.stderr.write(`worker ${config.workerId} failed: ${String(error)}\n`);
    process.exitCode = 1;
  });
  reporting.abort();
  await reporter;
  send({ type: 'status', workerId: config.workerId, at: preciseNow(), processed, leases: [], peakLagMs: {} });
  kinesis.destroy();
  await store.close();
  process.exit();
}

main().catch((error: unknown) => {
  process.stderr.write(`worker failed to start: ${error instanceof Error ? error.stack : String(error)}\n`);
  process.exit(1);
});
