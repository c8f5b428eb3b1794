import type { PipelineMessage } from './pipeline-message.js';

/** What `handleFailed` decides for failed messages: try them again (after a backoff) or give up on them. */
export type FailureAction = 'retry' | 'skip';

/** Who is handling: the lease incarnation the pipeline serves. */
export interface PipelineContext {
  readonly shardId: string;
  readonly leaseKey: string;
  readonly workerId: string;
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
  | 'retry';

export interface BatchInfo {
  readonly batchKey: string;
  readonly size: number;
  readonly trigger: BatchTrigger;
  /** 1 for the first attempt; a retry of failed messages counts up. */
  readonly attempt: number;
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
   * order), while different keys run concurrently. Without it, messages are handled in any order.
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

const KNOWN_KEYS: Readonly<Record<string, readonly string[]>> = {
  '': [
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
};

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
 * `pipeline.<path>`, so `createConsumer` can list them in its one `ConfigurationError`.
 */
export function validatePipelineOptions(options: unknown): string[] {
  return resolve(options).problems;
}

/** Fills in defaults; `problems` is empty when the options are valid. */
export function resolvePipelineOptions(options: unknown): {
  readonly options: ResolvedPipelineOptions;
  readonly problems: string[];
} {
  return resolve(options);
}

function resolve(input: unknown): { options: ResolvedPipelineOptions; problems: string[] } {
  const problems: string[] = [];
  if (input === null || typeof input !== 'object') {
    problems.push(
      'pipeline must be an object { handleMessage?, handleBatch?, handleFailed?, processors?, batchers?, … }',
    );
  }
  const given = (input !== null && typeof input === 'object' ? input : {}) as Record<string, unknown>;

  const section = (name: string): Record<string, unknown> => {
    const value = given[name];
    if (value === undefined) return {};
    if (value === null || typeof value !== 'object') {
      problems.push(`pipeline.${name} must be an object`);
      return {};
    }
    return value as Record<string, unknown>;
  };
  const unknownKeys = (path: string, value: Record<string, unknown>): void => {
    const known = KNOWN_KEYS[path] ?? [];
    for (const key of Object.keys(value)) {
      if (!known.includes(key)) {
        const where = path === '' ? 'pipeline' : `pipeline.${path}`;
        problems.push(`${where}.${key} is not an option (known: ${known.join(', ')})`);
      }
    }
  };
  const expectFunction = (name: string): void => {
    if (given[name] !== undefined && typeof given[name] !== 'function') {
      problems.push(`pipeline.${name} must be a function`);
    }
  };
  const integer = (
    path: string,
    value: unknown,
    fallback: number,
    min: number,
    max = Number.MAX_SAFE_INTEGER,
  ): number => {
    if (value === undefined) return fallback;
    if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
      problems.push(
        `pipeline.${path} must be an integer from ${min} to ${max === Number.MAX_SAFE_INTEGER ? '∞' : max}, got ${JSON.stringify(value)}`,
      );
      return fallback;
    }
    return value;
  };

  unknownKeys('', given);
  expectFunction('handleMessage');
  expectFunction('handleBatch');
  expectFunction('handleFailed');
  expectFunction('partitionBy');
  const functionOption = <T>(name: string): T | null =>
    typeof given[name] === 'function' ? (given[name] as T) : null;
  const handleMessage = functionOption<NonNullable<PipelineOptions['handleMessage']>>('handleMessage');
  const handleBatch = functionOption<NonNullable<PipelineOptions['handleBatch']>>('handleBatch');
  const handleFailed = functionOption<NonNullable<PipelineOptions['handleFailed']>>('handleFailed');
  const partitionBy = functionOption<NonNullable<PipelineOptions['partitionBy']>>('partitionBy');
  if (given.handleMessage === undefined && given.handleBatch === undefined) {
    problems.push('pipeline needs handleMessage, handleBatch or both: nothing would handle the records');
  }

  const processorsGiven = section('processors');
  unknownKeys('processors', processorsGiven);
  const maxDemand = integer(
    'processors.maxDemand',
    processorsGiven.maxDemand,
    PIPELINE_DEFAULTS.processors.maxDemand,
    1,
  );
  const processors = {
    concurrency: integer(
      'processors.concurrency',
      processorsGiven.concurrency,
      PIPELINE_DEFAULTS.processors.concurrency,
      1,
      10_000,
    ),
    maxDemand,
    minDemand: integer('processors.minDemand', processorsGiven.minDemand, Math.floor(maxDemand / 2), 0),
  };
  if (processors.minDemand >= processors.maxDemand) {
    problems.push(
      `pipeline.processors.minDemand (${processors.minDemand}) must be below maxDemand (${processors.maxDemand})`,
    );
  }

  const batchersGiven = section('batchers');
  unknownKeys('batchers', batchersGiven);
  if (given.batchers !== undefined && given.handleBatch === undefined) {
    problems.push('pipeline.batchers is set but handleBatch is not: batches would never be handled');
  }
  const batchers = {
    concurrency: integer(
      'batchers.concurrency',
      batchersGiven.concurrency,
      PIPELINE_DEFAULTS.batchers.concurrency,
      1,
      10_000,
    ),
    batchSize: integer(
      'batchers.batchSize',
      batchersGiven.batchSize,
      PIPELINE_DEFAULTS.batchers.batchSize,
      1,
    ),
    batchTimeoutMs: integer(
      'batchers.batchTimeoutMs',
      batchersGiven.batchTimeoutMs,
      PIPELINE_DEFAULTS.batchers.batchTimeoutMs,
      0,
    ),
  };

  const checkpointGiven = section('checkpoint');
  unknownKeys('checkpoint', checkpointGiven);
  const checkpoint = {
    intervalMs: integer(
      'checkpoint.intervalMs',
      checkpointGiven.intervalMs,
      PIPELINE_DEFAULTS.checkpoint.intervalMs,
      1,
    ),
    everyMessages: integer(
      'checkpoint.everyMessages',
      checkpointGiven.everyMessages,
      PIPELINE_DEFAULTS.checkpoint.everyMessages,
      1,
    ),
  };

  const retryGiven = section('retry');
  unknownKeys('retry', retryGiven);
  let retry = {
    initialMs: integer('retry.initialMs', retryGiven.initialMs, PIPELINE_DEFAULTS.retry.initialMs, 1),
    maxMs: integer('retry.maxMs', retryGiven.maxMs, PIPELINE_DEFAULTS.retry.maxMs, 1),
  };
  if (retry.maxMs < retry.initialMs) {
    problems.push(
      `pipeline.retry.maxMs (${retry.maxMs}) must not be below retry.initialMs (${retry.initialMs})`,
    );
    retry = { ...PIPELINE_DEFAULTS.retry };
  }

  const drainTimeoutMs = integer('drainTimeoutMs', given.drainTimeoutMs, PIPELINE_DEFAULTS.drainTimeoutMs, 0);

  return {
    options: {
      handleMessage,
      handleBatch,
      handleFailed,
      partitionBy,
      processors,
      batchers,
      checkpoint,
      retry,
      drainTimeoutMs,
    },
    problems,
  };
}
