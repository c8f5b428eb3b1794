import { OptionProblems } from '@kcl/core';
import type { ConsumedStream } from '../streams/stream-options.js';
import type { PipelineMessage } from './pipeline-message.js';

/** What `handleFailed` decides for failed messages: try them again (after a backoff) or give up on them. */
export type FailureAction = 'retry' | 'skip';

/** Who is handling: the lease incarnation the pipeline serves. */
export interface PipelineContext {
  readonly shardId: string;
  readonly leaseKey: string;
  readonly workerId: string;
  /** The shard's stream: its name, and its identifier when the application reads several streams. */
  readonly stream: ConsumedStream;
}

/** Why a batch was handed to `handleBatch`. */
export type BatchTrigger =
  /** It reached `batchers.batchSize`. */
  | 'size'
  /** `batchers.batchTimeoutMs` passed since its first message arrived. */
  | 'timeout'
  /** The pipeline is draining (`shutdownRequested` or `shardEnded`): partial batches go at once. */
  | 'drain'
  /** The failed messages of an earlier attempt, handed over again. */
  | 'retry'
  /**
   * A later message of one of its keys failed in `handleMessage` (with `partitionBy`): the batch goes
   * at once, so that the failure is decided after the batch, in key order, without waiting for the
   * batch to fill or time out.
   */
  | 'ordering';

export interface BatchInfo {
  readonly batchKey: string;
  readonly size: number;
  readonly trigger: BatchTrigger;
  /** 1 for the first attempt; a retry of failed messages counts up. */
  readonly attempt: number;
  /**
   * Exactly-once (ARCHITECTURE §6), on a store with transactional checkpoints (`@kcl/store-sql`; set
   * the consumer option `exactlyOnce`): runs `work` in a transaction on the store's database and
   * commits it with the checkpoint at the position the watermark reaches once this batch's messages
   * are acknowledged — as `checkpointer.transaction` does for a `RecordProcessor`. Throw from `work` to
   * roll the transaction back and fail the whole batch. Once the transaction committed, its messages
   * are done: they are never handed over again, even when the handler throws after it or the commit's
   * answer was lost (the stored checkpoint shows the commit), so nothing is written twice.
   *
   * Exactly-once holds when that position is the batch's last message, i.e. when every message before
   * it was acknowledged or is in the batch: batches handed over one at a time in shard order —
   * `batchers.concurrency` 1, one `batchKey`, and without `handleMessage` or with
   * `processors.concurrency` 1 — and no message of the batch failed on its own (`message.fail`) while
   * `work` wrote it. Otherwise the checkpoint stops at the first message not yet acknowledged, and the
   * rows written for the messages after it are written again if the lease moves before the next
   * checkpoint covers them (at-least-once for those).
   */
  transaction<Transaction = unknown, T = void>(
    work: (transaction: Transaction) => Promise<T> | T,
  ): Promise<T>;
}

export interface FailureContext extends PipelineContext {
  /** Where the messages failed: in `handleMessage` or in `handleBatch`. */
  readonly stage: 'message' | 'batch';
  readonly batchKey: string;
  /** How many attempts failed so far (1 after the first failure). */
  readonly attempt: number;
}

export interface ProcessorsOptions {
  /** How many `handleMessage` calls run at once, per shard. Default 1. */
  readonly concurrency?: number;
  /**
   * Once the pipeline is full, `processRecords` admits records again only when the in-flight count
   * has fallen by `concurrency × (maxDemand − minDemand)`. Default ⌊maxDemand / 2⌋.
   */
  readonly minDemand?: number;
  /** Messages each processor may hold; bounds the in-flight messages (see `pipelineCapacity`). Default 1 000. */
  readonly maxDemand?: number;
}

export interface BatchersOptions {
  /** How many `handleBatch` calls run at once, per shard. Default 1. */
  readonly concurrency?: number;
  /** A batch is handed over when it holds this many messages… Default 100. */
  readonly batchSize?: number;
  /** …or when this long has passed since its first message arrived. Default 1 000. */
  readonly batchTimeoutMs?: number;
}

export interface PipelineCheckpointOptions {
  /** Checkpoint at least this often while the watermark moves. Default 10 000. */
  readonly intervalMs?: number;
  /** Checkpoint as soon as the watermark has moved past this many messages since the last checkpoint. Default 10 000. */
  readonly everyMessages?: number;
}

/**
 * A Broadway-style batch pipeline, run per shard in place of a `RecordProcessor`. Every record becomes a
 * message; `handleMessage` runs per message (with `processors.concurrency`), then `handleBatch` per
 * batch (with `batchers.concurrency`). A message is acknowledged when its last stage returns without
 * failing it; the pipeline checkpoints the position below which every message is acknowledged.
 */
export interface PipelineOptions {
  /**
   * Handles one message. Throwing, or calling `message.fail(reason)`, fails it. It may set
   * `message.batchKey` to route the message to a batch. Without `handleBatch`, a message that
   * returns from here is acknowledged.
   */
  readonly handleMessage?: (message: PipelineMessage, context: PipelineContext) => Promise<void> | void;
  /**
   * Handles a batch of messages sharing one `batchKey`. Throwing fails every message of the batch;
   * `message.fail(reason)` fails one. Messages not failed are acknowledged when it returns.
   */
  readonly handleBatch?: (
    messages: readonly PipelineMessage[],
    batch: BatchInfo,
    context: PipelineContext,
  ) => Promise<void> | void;
  /**
   * Decides what happens to failed messages: `'retry'` (after an exponential backoff) or `'skip'`
   * (acknowledge them without success). Until one of the two happens, a failed message holds the
   * checkpoint back. Without `handleFailed`, and when it throws, failures are retried.
   */
  readonly handleFailed?: (
    messages: readonly PipelineMessage[],
    context: FailureContext,
  ) => FailureAction | Promise<FailureAction>;
  /**
   * The ordering key. Messages with the same key are handled one at a time, in shard order, in
   * `handleMessage` and in `handleBatch` (batches of one key and one `batchKey` are handed over in
   * order), while different keys run concurrently. A message that fails in `handleMessage` goes to
   * `handleFailed` only once the earlier messages of its key have left `handleBatch`. Without it,
   * messages are handled in any order.
   */
  readonly partitionBy?: (message: PipelineMessage) => string;
  readonly processors?: ProcessorsOptions;
  readonly batchers?: BatchersOptions;
  readonly checkpoint?: PipelineCheckpointOptions;
  /** Backoff between retries of failed messages. Default 200 ms doubling to 30 s. */
  readonly retry?: { readonly initialMs?: number; readonly maxMs?: number };
  /**
   * The longest `shutdownRequested` waits for in-flight messages before it checkpoints what is
   * acknowledged. Keep it below the consumer's `shutdownTimeoutMs`. Default 10 000.
   */
  readonly drainTimeoutMs?: number;
}

export interface ResolvedPipelineOptions {
  readonly handleMessage: NonNullable<PipelineOptions['handleMessage']> | null;
  readonly handleBatch: NonNullable<PipelineOptions['handleBatch']> | null;
  readonly handleFailed: NonNullable<PipelineOptions['handleFailed']> | null;
  readonly partitionBy: NonNullable<PipelineOptions['partitionBy']> | null;
  readonly processors: {
    readonly concurrency: number;
    readonly minDemand: number;
    readonly maxDemand: number;
  };
  readonly batchers: {
    readonly concurrency: number;
    readonly batchSize: number;
    readonly batchTimeoutMs: number;
  };
  readonly checkpoint: { readonly intervalMs: number; readonly everyMessages: number };
  readonly retry: { readonly initialMs: number; readonly maxMs: number };
  readonly drainTimeoutMs: number;
}

export const PIPELINE_DEFAULTS = {
  processors: { concurrency: 1, maxDemand: 1_000 },
  batchers: { concurrency: 1, batchSize: 100, batchTimeoutMs: 1_000 },
  checkpoint: { intervalMs: 10_000, everyMessages: 10_000 },
  retry: { initialMs: 200, maxMs: 30_000 },
  drainTimeoutMs: 10_000,
} as const;

/**
 * The most messages one shard's pipeline holds at once (admitted, not yet acknowledged):
 * `processors.concurrency × maxDemand`, plus `batchers.concurrency × batchSize` when there is a
 * `handleBatch`.
 */
export function pipelineCapacity(options: ResolvedPipelineOptions): number {
  const processing = options.processors.concurrency * options.processors.maxDemand;
  return options.handleBatch === null
    ? processing
    : processing + options.batchers.concurrency * options.batchers.batchSize;
}

/**
 * Checks pipeline options. Returns every problem found (empty when valid), each naming the option as
 * `pipeline.<path>`.
 */
export function validatePipelineOptions(options: unknown): string[] {
  const check = new OptionProblems('@kcl/consumer validatePipelineOptions');
  resolvePipelineOptions(options, check.within('pipeline'));
  return [...check.problems];
}

const KNOWN_KEYS = {
  pipeline: [
    'handleMessage',
    'handleBatch',
    'handleFailed',
    'partitionBy',
    'processors',
    'batchers',
    'checkpoint',
    'retry',
    'drainTimeoutMs',
  ],
  processors: ['concurrency', 'minDemand', 'maxDemand'],
  batchers: ['concurrency', 'batchSize', 'batchTimeoutMs'],
  checkpoint: ['intervalMs', 'everyMessages'],
  retry: ['initialMs', 'maxMs'],
} as const;

type Handler<Name extends keyof PipelineOptions> = NonNullable<PipelineOptions[Name]>;

/**
 * Fills in the defaults of pipeline options, recording every problem in `check` (made `within` the
 * option's name, `pipeline`); the caller throws them. The options are checked here once, and passed on
 * resolved.
 */
export function resolvePipelineOptions(input: unknown, check: OptionProblems): ResolvedPipelineOptions {
  if (input === null || typeof input !== 'object') {
    check.add(
      'pipeline must be an object { handleMessage?, handleBatch?, handleFailed?, processors?, batchers?, … }',
    );
  }
  const given = (input !== null && typeof input === 'object' ? input : {}) as Record<string, unknown>;
  const section = (name: keyof typeof KNOWN_KEYS): Record<string, unknown> => {
    const value = given[name];
    if (value === undefined) return {};
    if (value === null || typeof value !== 'object') {
      check.add(`pipeline.${name} must be an object`);
      return {};
    }
    check.unknownKeys(name, value, KNOWN_KEYS[name]);
    return value as Record<string, unknown>;
  };

  check.unknownKeys('', given, KNOWN_KEYS.pipeline);
  const handleMessage = check.optionalFunction<Handler<'handleMessage'>>(
    'handleMessage',
    given.handleMessage,
    '(message, context) => void',
  );
  const handleBatch = check.optionalFunction<Handler<'handleBatch'>>(
    'handleBatch',
    given.handleBatch,
    '(messages, batch, context) => void',
  );
  const handleFailed = check.optionalFunction<Handler<'handleFailed'>>(
    'handleFailed',
    given.handleFailed,
    "(messages, context) => 'retry' | 'skip'",
  );
  const partitionBy = check.optionalFunction<Handler<'partitionBy'>>(
    'partitionBy',
    given.partitionBy,
    '(message) => string',
  );
  if (given.handleMessage === undefined && given.handleBatch === undefined) {
    check.add('pipeline needs handleMessage, handleBatch or both: nothing would handle the records');
  }

  const processorsGiven = section('processors');
  const processorsCheck = check.within('processors');
  const maxDemand = processorsCheck.integer(
    'maxDemand',
    processorsGiven.maxDemand,
    PIPELINE_DEFAULTS.processors.maxDemand,
    { min: 1 },
  );
  const processors = {
    concurrency: processorsCheck.integer(
      'concurrency',
      processorsGiven.concurrency,
      PIPELINE_DEFAULTS.processors.concurrency,
      { min: 1, max: 10_000 },
    ),
    maxDemand,
    minDemand: processorsCheck.integer('minDemand', processorsGiven.minDemand, Math.floor(maxDemand / 2)),
  };
  if (processors.minDemand >= processors.maxDemand) {
    check.add(
      `pipeline.processors.minDemand (${processors.minDemand}) must be below maxDemand (${processors.maxDemand})`,
    );
  }

  const batchersGiven = section('batchers');
  if (given.batchers !== undefined && given.handleBatch === undefined) {
    check.add('pipeline.batchers is set but handleBatch is not: batches would never be handled');
  }
  const batchersCheck = check.within('batchers');
  const batchers = {
    concurrency: batchersCheck.integer(
      'concurrency',
      batchersGiven.concurrency,
      PIPELINE_DEFAULTS.batchers.concurrency,
      { min: 1, max: 10_000 },
    ),
    batchSize: batchersCheck.integer(
      'batchSize',
      batchersGiven.batchSize,
      PIPELINE_DEFAULTS.batchers.batchSize,
      {
        min: 1,
      },
    ),
    batchTimeoutMs: batchersCheck.integer(
      'batchTimeoutMs',
      batchersGiven.batchTimeoutMs,
      PIPELINE_DEFAULTS.batchers.batchTimeoutMs,
    ),
  };

  const checkpointGiven = section('checkpoint');
  const checkpointCheck = check.within('checkpoint');
  const checkpoint = {
    intervalMs: checkpointCheck.integer(
      'intervalMs',
      checkpointGiven.intervalMs,
      PIPELINE_DEFAULTS.checkpoint.intervalMs,
      { min: 1 },
    ),
    everyMessages: checkpointCheck.integer(
      'everyMessages',
      checkpointGiven.everyMessages,
      PIPELINE_DEFAULTS.checkpoint.everyMessages,
      { min: 1 },
    ),
  };

  section('retry');
  const retry = check.retryDelays('retry', given.retry, PIPELINE_DEFAULTS.retry);
  const drainTimeoutMs = check.integer(
    'drainTimeoutMs',
    given.drainTimeoutMs,
    PIPELINE_DEFAULTS.drainTimeoutMs,
  );

  return {
    handleMessage: handleMessage ?? null,
    handleBatch: handleBatch ?? null,
    handleFailed: handleFailed ?? null,
    partitionBy: partitionBy ?? null,
    processors,
    batchers,
    checkpoint,
    retry,
    drainTimeoutMs,
  };
}
