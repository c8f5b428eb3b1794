import type { KclErrorCode } from '@kcl/core';
import { KclError, LeaseLostError } from '@kcl/core';

/**
 * The codes of `@kcl/multilang`'s errors (`error.code`; check with `isKclError(error, code)`):
 * - `MULTILANG_CHILD_FAILED`: a child process failed (`MultiLangChildError`);
 * - `MULTILANG_SHARD_GIVEN_UP`: a shard's lease is given up (`MultiLangShardGivenUpError`);
 * - `MULTILANG_DAEMON_STOPPED`: `start()` after the daemon was stopped;
 * - `MULTILANG_SHARD_FINISHED`: a child was asked for after its shard's lease ended;
 * - `MULTILANG_EXCHANGE_IN_PROGRESS`: a second action was sent to a child before the first was answered.
 * Invalid properties are core's `ConfigurationError` (`CONFIGURATION`).
 */
export type MultiLangErrorCode =
  | 'MULTILANG_CHILD_FAILED'
  | 'MULTILANG_SHARD_GIVEN_UP'
  | 'MULTILANG_DAEMON_STOPPED'
  | 'MULTILANG_SHARD_FINISHED'
  | 'MULTILANG_EXCHANGE_IN_PROGRESS';

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
    super('MULTILANG_CHILD_FAILED', `@kcl/multilang: the child process of shard ${shardId} ${detail}`, {
      retryable: reason !== 'replay-incomplete',
      ...(options.cause === undefined ? {} : { cause: options.cause }),
    });
    this.reason = reason;
    this.shardId = shardId;
  }

  static override is(value: unknown): value is MultiLangChildError {
    return KclError.isClass(value, 'MultiLangChildError');
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
 * `processRecords`: it is a `LeaseLostError` (`LeaseLostError.is(error)` holds) because that is what
 * makes the consumer end delivery at once (no retry, no skip) and release the lease, which it still
 * holds, so that another worker — or this one, later, with a fresh budget — resumes from the last
 * checkpoint. Its code is its own, `MULTILANG_SHARD_GIVEN_UP`.
 */
export class MultiLangShardGivenUpError extends LeaseLostError {
  override readonly code: KclErrorCode = 'MULTILANG_SHARD_GIVEN_UP' satisfies MultiLangErrorCode;
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

  static override is(value: unknown): value is MultiLangShardGivenUpError {
    return KclError.isClass(value, 'MultiLangShardGivenUpError');
  }
}
