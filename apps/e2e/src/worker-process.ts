#!/usr/bin/env node
// A consumer worker as its own OS process, for fleet tests. It appends every record it processes to a
// JSON-lines file *before* checkpointing (so a kill -9 never hides a processed record), each batch's
// start and end to a second one once the batch is over (checkpointed or not), and prints its events as
// JSON lines on stdout. It checkpoints in shutdownRequested, so a graceful stop or a hand-off leaves
// nothing to process again. SIGTERM stops it gracefully; SIGKILL is a crash. It reads one stream, or
// several: a fixed list, or the list in a JSON file the test rewrites while the fleet runs. With an
// output table it processes exactly once: each batch's rows and checkpoint commit in one transaction.
import { appendFileSync, readFileSync } from 'node:fs';
import { KinesisClient } from '@aws-sdk/client-kinesis';
import { type ConsumerOptions, createConsumer, stopOnSignals } from '@kcl/consumer';
import { createLineLogger, LeaseLostError } from '@kcl/core';
import type { FleetTiming } from '@kcl/testkit';
import { NodeHttpHandler } from '@smithy/node-http-handler';
import type { Transaction } from 'kysely';
import { openStore, type StoreConfig } from './store-config.js';

/** A stream of a multi-stream worker, as JSON carries it (an initial position by name). */
export type WorkerStreamConfig =
  | string
  | { readonly streamName: string; readonly initialPosition?: 'TRIM_HORIZON' | 'LATEST' };

/**
 * Several streams for one worker: a fixed list, or a JSON file holding an array of
 * `WorkerStreamConfig` that a `streamTracker` reads at every stream sync (the test rewrites it to add
 * and remove streams while the fleet runs; a rename keeps each read whole).
 */
export type WorkerMultiStream = (
  | { readonly list: readonly WorkerStreamConfig[] }
  | { readonly trackerFile: string }
) & {
  readonly streamSyncIntervalMs: number;
  readonly formerStreams:
    | { readonly strategy: 'none' }
    | { readonly strategy: 'auto'; readonly waitMs: number };
};

export interface WorkerProcessConfig {
  readonly workerId: string;
  readonly applicationName: string;
  /** The one stream the worker reads; give this or `streams`. */
  readonly streamName?: string;
  /** The streams the worker reads when it reads several. */
  readonly streams?: WorkerMultiStream;
  /** Where shards without a checkpoint start (a stream's own setting goes first). Default TRIM_HORIZON. */
  readonly initialPosition?: 'TRIM_HORIZON' | 'LATEST';
  readonly kinesisEndpoint: string;
  readonly store: StoreConfig;
  readonly outputFile: string;
  /** Where each `processRecords` call with records is written as a `BatchLine`. */
  readonly batchFile: string;
  readonly timing: FleetTiming;
  /** Consumer options beyond the timings (how many leases to steal at once, polling or fan-out, …). */
  readonly consumer?: Pick<
    ConsumerOptions,
    | 'maxLeasesToSteal'
    | 'maxLeasesForWorker'
    | 'retrieval'
    | 'sessionLiveness'
    | 'livenessCheckIntervalMs'
    | 'handoff'
  >;
  /** A wait at the start of shutdownRequested, before its checkpoint: an owner slow to hand a lease over. */
  readonly shutdownRequestedDelayMs?: number;
  /**
   * Exactly-once: the processor inserts every record into this table of the lease store's database
   * (`OutputRow` columns) through `checkpointer.transaction`, with the consumer option `exactlyOnce`;
   * the output file then gets a batch's lines only after its commit.
   */
  readonly outputTable?: string;
  /**
   * Exactly-once: a wait inside the transaction's work, after its inserts, so steals and kills land
   * while transactions are open. A transaction that fails is reported on stdout as a
   * `transaction-refused` event (whether its lease was lost, whether its work had run to its end).
   */
  readonly transactionWorkDelayMs?: number;
}

/** A row of the exactly-once output table (beside an id the database assigns in insertion order). */
export interface OutputRow {
  readonly application_name: string;
  readonly worker_id: string;
  readonly shard_id: string;
  readonly sequence_number: string;
  readonly sub_sequence_number: number;
  readonly partition_key: string;
  readonly data: string;
}

/** Rows per INSERT: far below SQLite's and PostgreSQL's parameter limits. */
const ROWS_PER_INSERT = 500;

/** One line of the output file. */
export interface ProcessedLine {
  readonly w: string;
  /** The stream's name (the processor context's `stream.name`). */
  readonly st: string;
  readonly s: string;
  readonly q: string;
  readonly k: string;
  readonly d: string;
  readonly t: number;
}

/** One line of the batch file: one `processRecords` call with records, from its start to its end. */
export interface BatchLine {
  readonly w: string;
  /** The stream's name. */
  readonly st: string;
  readonly s: string;
  /** Records in the batch. */
  readonly n: number;
  readonly start: number;
  readonly end: number;
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
    ...streamOptions(config),
    applicationName: config.applicationName,
    workerId: config.workerId,
    kinesis,
    leaseStore: store,
    initialPosition: config.initialPosition ?? 'TRIM_HORIZON',
    ...config.timing,
    ...config.consumer,
    ...(config.outputTable === undefined ? {} : { exactlyOnce: true }),
    logger,
    onEvent: (event) => {
      process.stdout.write(`${JSON.stringify({ ...event, at: now(), error: undefined })}\n`);
    },
    processor: (shardId, { stream }) => ({
      async processRecords({ records, checkpointer }) {
        if (records.length === 0) return;
        const start = now();
        const lines = records.map((record) =>
          JSON.stringify({
            w: config.workerId,
            st: stream.name,
            s: shardId,
            q: record.sequenceNumber,
            k: record.partitionKey,
            d: Buffer.from(record.data).toString(),
            t: now(),
          } satisfies ProcessedLine),
        );
        const table = config.outputTable;
        if (table !== undefined) {
          // The work ran to its end: a refusal after it rolled its rows back.
          let workRan = false;
          try {
            // biome-ignore lint/suspicious/noExplicitAny: the output table is not part of a typed schema.
            await checkpointer.transaction<Transaction<any>>(async (transaction) => {
              const rows = records.map(
                (record): OutputRow => ({
                  application_name: config.applicationName,
                  worker_id: config.workerId,
                  shard_id: shardId,
                  sequence_number: record.sequenceNumber,
                  sub_sequence_number: record.subSequenceNumber,
                  partition_key: record.partitionKey,
                  data: Buffer.from(record.data).toString(),
                }),
              );
              for (let start = 0; start < rows.length; start += ROWS_PER_INSERT) {
                await transaction
                  .insertInto(table)
                  .values(rows.slice(start, start + ROWS_PER_INSERT))
                  .execute();
              }
              const delayMs = config.transactionWorkDelayMs ?? 0;
              if (delayMs > 0) await new Promise((resolve) => setTimeout(resolve, delayMs));
              workRan = true;
            });
            appendFileSync(config.outputFile, `${lines.join('\n')}\n`);
          } catch (error) {
            const refused = {
              type: 'transaction-refused',
              workerId: config.workerId,
              leaseKey: shardId,
              leaseLost: LeaseLostError.is(error),
              workRan,
              reason: String(error),
              at: now(),
            };
            process.stdout.write(`${JSON.stringify(refused)}\n`);
            throw error;
          } finally {
            const batch: BatchLine = {
              w: config.workerId,
              st: stream.name,
              s: shardId,
              n: records.length,
              start,
              end: now(),
            };
            appendFileSync(config.batchFile, `${JSON.stringify(batch)}\n`);
          }
          return;
        }
        appendFileSync(config.outputFile, `${lines.join('\n')}\n`);
        try {
          await checkpointer.checkpoint();
        } catch (error) {
          // The records were processed: a failed checkpoint is left to the next batch's (or to
          // shutdownRequested's) rather than thrown, which would make the runtime deliver the batch
          // again. A lost lease ends the delivery all the same.
          process.stderr.write(
            `worker ${config.workerId}: checkpoint failed on ${stream.name}/${shardId}: ${String(error)}\n`,
          );
        } finally {
          const batch: BatchLine = {
            w: config.workerId,
            st: stream.name,
            s: shardId,
            n: records.length,
            start,
            end: now(),
          };
          appendFileSync(config.batchFile, `${JSON.stringify(batch)}\n`);
        }
      },
      async shardEnded({ checkpointer }) {
        await checkpointer.checkpoint();
      },
      async shutdownRequested({ checkpointer }) {
        const delayMs = config.shutdownRequestedDelayMs ?? 0;
        if (delayMs > 0) await new Promise((resolve) => setTimeout(resolve, delayMs));
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

/** The consumer options that name what the worker reads. */
function streamOptions(
  config: WorkerProcessConfig,
): Pick<
  ConsumerOptions,
  'streamName' | 'streams' | 'streamTracker' | 'streamSyncIntervalMs' | 'formerStreams'
> {
  const multi = config.streams;
  if (multi === undefined) return { streamName: config.streamName ?? '' };
  const common = { streamSyncIntervalMs: multi.streamSyncIntervalMs, formerStreams: multi.formerStreams };
  if ('list' in multi) return { streams: multi.list, ...common };
  const file = multi.trackerFile;
  return {
    streamTracker: { streams: () => JSON.parse(readFileSync(file, 'utf8')) as WorkerStreamConfig[] },
    ...common,
  };
}

main().catch((error: unknown) => {
  process.stderr.write(`worker failed to start: ${error instanceof Error ? error.stack : String(error)}\n`);
  process.exit(1);
});
