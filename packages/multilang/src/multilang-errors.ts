import { KclError, LeaseLostError } from '@kcl/core';

/** Why a child process was given up on. */
export type ChildFailureReason =
  /** The executable could not be started. */
  | 'start-failed'
  /** The child closed its stdout (exited or crashed) while a reply was awaited. */
  | 'exited'
  /** The child answered an action with a status for another action. */
  | 'wrong-status'
  /** No message within `timeoutInSeconds`. */
  | 'timeout'
  /** A message could not be written to the child's stdin. */
  | 'write-failed'
  /**
   * The child died holding more unacknowledged records than the replay buffer keeps, in `shardEnded`
   * (elsewhere the lease is given up instead: `MultiLangShardGivenUpError`).
   */
  | 'replay-incomplete';

/**
 * A child process failed. Only its own shard is affected: the child is ended, and the action is
 * retried with a new child (unless `kcl.exitOnChildFailure` asks for the Java daemon's behaviour).
 */
export class MultiLangChildError extends KclError {
  readonly reason: ChildFailureReason;
  readonly shardId: string;

  constructor(
    shardId: string,
    reason: ChildFailureReason,
    detail: string,
    options: { readonly cause?: unknown } = {},
  ) {
    // There is no child-process code in @kcl/core's list; SHUTDOWN is the closest: the child is shut down.
    super('SHUTDOWN', `@kcl/multilang: the child process of shard ${shardId} ${detail}`, {
      retryable: reason !== 'replay-incomplete',
      ...(options.cause === undefined ? {} : { cause: options.cause }),
    });
    this.reason = reason;
    this.shardId = shardId;
  }
}

/** Why a shard's lease was given up. */
export type ShardGiveUpReason =
  /** `kcl.childFailureLimit` child failures in a row without progress. */
  | 'failure-limit'
  /** A child died holding more unacknowledged records than the replay buffer kept. */
  | 'replay-incomplete';

/**
 * This worker gives a shard's lease up because its children cannot process it. Thrown from
 * `processRecords`: it is a `LeaseLostError` because that is what makes the consumer end delivery at
 * once (no retry, no skip) and release the lease, which it still holds, so that another worker — or
 * this one, later, with a fresh budget — resumes from the last checkpoint.
 */
export class MultiLangShardGivenUpError extends LeaseLostError {
  readonly shardId: string;
  readonly reason: ShardGiveUpReason;
  /** Child failures without progress when it was given up. */
  readonly failures: number;

  constructor(
    leaseKey: string,
    shardId: string,
    reason: ShardGiveUpReason,
    detail: string,
    options: { readonly failures: number; readonly cause?: unknown },
  ) {
    super(leaseKey, detail);
    this.message = `@kcl/multilang: giving up shard ${shardId}: ${detail}`;
    this.shardId = shardId;
    this.reason = reason;
    this.failures = options.failures;
    if (options.cause !== undefined) this.cause = options.cause;
  }
}
