import type { Clock, ExtendedSequenceNumber, Logger, RandomSource } from '@kcl/core';
import type { TrackedMessage } from './pipeline-message.js';
import type { FailureAction, PipelineContext, ResolvedPipelineOptions } from './pipeline-options.js';

/**
 * What the parts of one shard's pipeline (admission, processor stage, batcher stage, checkpoint
 * policy) share. The `PipelineProcessor` builds it once.
 */
export interface PipelineStage {
  readonly options: ResolvedPipelineOptions;
  readonly clock: Clock;
  readonly random: RandomSource;
  /** Tagged with the lease key. */
  readonly logger: Logger;
  readonly context: PipelineContext;
  /** Aborts when the pipeline stops (lease lost, shutdown or shard end): nothing is handled after. */
  readonly halt: AbortSignal;
  /** Runs one call of a user handler, counted, so `leaseLost` can wait for the calls in flight. */
  readonly counted: <T>(call: () => Promise<T> | T) => Promise<T>;
  /** Acknowledges a message (its last stage is done, or it was skipped). */
  readonly acknowledge: (message: TrackedMessage) => void;
  /** `BatchInfo.transaction` of a batch of `messages`. */
  readonly transaction: <Transaction, T>(
    messages: readonly TrackedMessage[],
    work: (transaction: Transaction) => Promise<T> | T,
  ) => Promise<T>;
  /**
   * The lease's checkpoint as the checkpointer knows it (null before the first call hands one over):
   * a message at or before it was committed, by a transaction whose answer may have been lost.
   */
  readonly lastCheckpoint: () => ExtendedSequenceNumber | null;
}

/**
 * What to do with failed messages: `handleFailed`'s answer, or retry — without `handleFailed`, when
 * it throws, or when it answers something else. Every decision is logged.
 */
export async function decideOnFailure(
  stage: PipelineStage,
  messages: readonly TrackedMessage[],
  where: 'message' | 'batch',
  batchKey: string,
  attempt: number,
): Promise<FailureAction> {
  const { logger } = stage;
  const fields = {
    stage: where,
    batchKey,
    attempt,
    messages: messages.length,
    firstSequenceNumber: messages[0]?.record.sequenceNumber,
    failure: messages[0]?.failure,
  };
  const handleFailed = stage.options.handleFailed;
  let action: FailureAction = 'retry';
  if (handleFailed === null) {
    logger.warn('pipeline messages failed; retrying them (no handleFailed)', fields);
  } else {
    try {
      const decided = await handleFailed(messages, { ...stage.context, stage: where, batchKey, attempt });
      if (decided === 'skip' || decided === 'retry') action = decided;
      else logger.warn('handleFailed returned neither "retry" nor "skip"; retrying', { ...fields, decided });
    } catch (error) {
      logger.warn('handleFailed threw; retrying the messages', { ...fields, error });
    }
  }
  if (action === 'skip') logger.warn('pipeline skipped failed messages', fields);
  return action;
}
