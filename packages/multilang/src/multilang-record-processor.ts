import type {
  Checkpointer,
  InitializeInput,
  KinesisRecord,
  ProcessRecordsInput,
  RecordProcessor,
  RecordProcessorFactory,
  ShardEndedInput,
  ShutdownRequestedInput,
} from '@kcl/consumer';
import type { ExtendedSequenceNumber, Logger } from '@kcl/core';
import { childLogger, KclError } from '@kcl/core';
import { answeredOrAborted } from './answered-or-aborted.js';
import { ChildCheckpointer } from './child-checkpointer.js';
import { ChildFailureBudget } from './child-failure-budget.js';
import { ChildSession } from './child-session.js';
import { MultiLangChildError, MultiLangShardGivenUpError } from './multilang-errors.js';
import type { MultiLangProcessorOptions } from './multilang-processor-options.js';
import type { ActionMessage, MultiLangAction } from './multilang-protocol.js';
import { initializeMessage, processRecordsMessage } from './multilang-protocol.js';
import { positionOf, ReplayBuffer, recordsAfter } from './replay-buffer.js';

export type { MultiLangProcessorOptions };

/** The consumer's processor factory: one `MultiLangShardProcessor` (and one child at a time) per lease. */
export function createMultiLangProcessorFactory(options: MultiLangProcessorOptions): RecordProcessorFactory {
  return (shardId) => new MultiLangShardProcessor(shardId, options);
}

/**
 * Bridges the consumer's `RecordProcessor` calls to a child process.
 *
 * Failure handling (the Java daemon exits on any of these): when the child dies, times out or answers
 * with the wrong status, only this shard is affected. The child is ended and the call throws; the
 * consumer keeps the lease and retries the call with backoff; the retry starts a new child,
 * initializes it at the last checkpoint and first replays the records the old child acknowledged but
 * did not checkpoint, then the batch that failed. Nothing is skipped: every record after the last
 * checkpoint reaches a child that acknowledges it (at-least-once, as with the Java daemon's restart).
 *
 * A child that can never work (a missing interpreter, a poison record) would keep the lease forever:
 * after `childFailureLimit` failures in a row without progress (no batch acknowledged, no checkpoint
 * moved forward) `processRecords` throws a `MultiLangShardGivenUpError`, which the consumer answers by
 * releasing the lease; the next owner starts again from the last checkpoint. `initialize` is retried
 * by the consumer for as long as it holds the lease, so there the budget running out only returns, and
 * the first batch gives the lease up.
 */
export class MultiLangShardProcessor implements RecordProcessor {
  readonly shardId: string;
  readonly #options: MultiLangProcessorOptions;
  readonly #logger: Logger;
  readonly #replay: ReplayBuffer;
  #session: ChildSession | null = null;
  /** The last record written to the running child: its checkpoints may not go further. */
  #lastSent: ExtendedSequenceNumber | null = null;
  #finished = false;
  readonly #failures: ChildFailureBudget;
  /** Set once the lease is given up: every later batch is refused with it. */
  #givenUp: MultiLangShardGivenUpError | null = null;

  constructor(shardId: string, options: MultiLangProcessorOptions) {
    this.shardId = shardId;
    this.#options = options;
    this.#logger = childLogger(options.logger, { shardId });
    this.#replay = new ReplayBuffer(options.replayBufferMaxBytes, options.replayBudget ?? null);
    this.#failures = new ChildFailureBudget(options.childFailureLimit);
  }

  /** The running child, if any (for status and tests). */
  get session(): ChildSession | null {
    return this.#session;
  }

  async initialize(input: InitializeInput): Promise<void> {
    try {
      await this.#startChild(input.checkpoint, null);
    } catch (error) {
      // The consumer retries a failing initialize for as long as it holds the lease and never gives the
      // lease up for it: once the budget is spent, return, and let the first batch give the lease up.
      if (this.#giveUpIfExhausted(input.leaseKey) === null) throw error;
    }
  }

  async processRecords(input: ProcessRecordsInput): Promise<void> {
    if (this.#givenUp !== null) throw this.#givenUp;
    try {
      const session = await this.#ensureChild(input.checkpointer, input.leaseKey);
      // On a retry the failed child may have checkpointed part of the batch: send only the rest.
      const records = recordsAfter(input.records, input.checkpointer.lastCheckpoint);
      if (records.length > 0 || input.records.length === 0) {
        await this.#run(
          session,
          processRecordsMessage(records, input.millisBehindLatest),
          input.checkpointer,
        );
        this.#keepForReplay(records, input);
      }
    } catch (error) {
      throw this.#giveUpIfExhausted(input.leaseKey) ?? error;
    }
    this.#progressed();
  }

  async shardEnded(input: ShardEndedInput): Promise<void> {
    let session: ChildSession;
    try {
      session = await this.#ensureChild(input.checkpointer, null);
      await this.#run(session, { action: 'shardEnded' }, input.checkpointer);
    } catch (error) {
      if (this.#failures.exhausted) {
        // The consumer retries shardEnded for as long as it holds the lease and offers no way to give
        // it up from here, so the budget cannot release it: say so on every attempt.
        this.#logger.error(
          `shard ${this.shardId} cannot finish: ${this.#failures.failures} child failures in a row at its end (kcl.childFailureLimit = ${this.#failures.limit}); the lease cannot be released from shardEnded, so the daemon keeps retrying. Fix the child`,
          { error },
        );
      }
      throw error;
    }
    // As in the Java daemon, the conversation ends here: EOF, then a bounded wait for the exit.
    this.#session = null;
    await session.close();
    if (input.checkpointer.lastCheckpoint.isShardEnd) {
      this.#finished = true;
      this.#replay.clear();
    } else {
      this.#logger.error(
        'the child acknowledged shardEnded without checkpointing; the shard cannot finish until it does (checkpoint with no sequence number in shardEnded). Asking a new child again',
      );
    }
  }

  async shutdownRequested(input: ShutdownRequestedInput): Promise<void> {
    const session = this.#session;
    if (session === null || !session.alive) {
      this.#logger.info(
        'no running child to send shutdownRequested to; the next owner resumes from the last checkpoint',
      );
      return;
    }
    const exchange = this.#run(session, { action: 'shutdownRequested' }, input.checkpointer);
    const signal = input.signal;
    if (signal === undefined) {
      await exchange;
      return;
    }
    // The consumer's shutdown budget is running out (its signal aborts): end a child that has not
    // answered yet, so the lease is released on time and no later call overlaps this one.
    if ((await answeredOrAborted(exchange, signal)) === 'answered') return;
    exchange.catch(() => undefined);
    this.#finished = true;
    this.#replay.clear();
    if (this.#session === session) this.#session = null;
    this.#logger.warn('the lease ended while the child was still busy; terminating the child', {
      pid: session.pid,
    });
    await session.terminate();
  }

  async leaseLost(): Promise<void> {
    this.#finished = true;
    this.#replay.clear();
    const session = this.#session;
    this.#session = null;
    if (session === null) return;
    if (!session.alive) {
      await session.terminate();
      return;
    }
    if (session.busy) {
      // Only after an unfinished shutdownRequested: there is no way to send another action now.
      this.#logger.warn('the lease ended while the child was still busy; terminating the child', {
        pid: session.pid,
      });
      await session.terminate();
      return;
    }
    try {
      await session.exchange({ action: 'leaseLost' }, null);
      await session.close();
    } catch (error) {
      await this.#fail(session, error, 'leaseLost');
    }
  }

  /**
   * A child that can take the next action: the running one, or a new one brought up to date. With a
   * `leaseKey` (processRecords), a replay that cannot be complete gives the lease up; without one
   * (shardEnded, where the consumer cannot release the lease) it stops the daemon.
   */
  async #ensureChild(checkpointer: Checkpointer, leaseKey: string | null): Promise<ChildSession> {
    const current = this.#session;
    if (current?.alive) return current;
    if (current !== null) {
      this.#session = null;
      const exit = await current.terminate();
      const error = new MultiLangChildError(
        this.shardId,
        'exited',
        `exited between actions (${exit.signal === null ? `exit code ${exit.code}` : `killed by ${exit.signal}`})`,
      );
      this.#logger.warn('child died between actions; starting a new one', { error });
      this.#childFailed(error);
    }
    if (!this.#replay.complete) {
      const limits = this.#replayLimitsText();
      if (leaseKey !== null) {
        // Releasing the lease is safe: nothing past the last checkpoint is lost, the next owner reads
        // those records again from Kinesis. Only this shard is affected.
        throw this.#giveUp(
          new MultiLangShardGivenUpError(
            leaseKey,
            this.shardId,
            'replay-incomplete',
            `its child died holding more unacknowledged records than the replay buffer keeps (${limits}), so a new child cannot be given all of them. Releasing the lease so the shard resumes from its last checkpoint; checkpoint more often or raise the limit`,
            { failures: this.#failures.failures },
          ),
        );
      }
      const error = new MultiLangChildError(
        this.shardId,
        'replay-incomplete',
        `died holding more unacknowledged records than the replay buffer keeps (${limits}); a new child cannot be given all of them. Stop the daemon so the shard resumes from its last checkpoint, checkpoint more often, or raise the limit`,
      );
      this.#logger.error('cannot restart the child without skipping records', { error });
      this.#options.onChildFailure?.(error);
      throw error;
    }
    return this.#startChild(checkpointer.lastCheckpoint, checkpointer);
  }

  async #startChild(
    checkpoint: ExtendedSequenceNumber,
    checkpointer: Checkpointer | null,
  ): Promise<ChildSession> {
    if (this.#finished) {
      throw new KclError(
        'MULTILANG_SHARD_FINISHED',
        `@kcl/multilang: shard ${this.shardId} is finished (its lease ended); no child is started for it`,
      );
    }
    const options = this.#options;
    let session: ChildSession;
    try {
      session = await ChildSession.start({
        shardId: this.shardId,
        command: options.command,
        workingDirectory: options.workingDirectory,
        environment: options.environment,
        logger: this.#logger,
        clock: options.clock,
        messageTimeoutMs: options.messageTimeoutMs,
        exitTimeoutMs: options.exitTimeoutMs,
        killTimeoutMs: options.killTimeoutMs,
        ...(options.launcher === undefined ? {} : { launcher: options.launcher }),
        ...(options.signalChild === undefined ? {} : { signal: options.signalChild }),
      });
    } catch (error) {
      if (MultiLangChildError.is(error)) {
        this.#logger.error('the child could not be started', { error });
        this.#childFailed(error);
      }
      throw error;
    }
    this.#session = session;
    this.#lastSent = null;
    const sessions = options.sessions;
    if (sessions !== undefined) {
      sessions.add(session);
      void session.exited().then(() => sessions.delete(session));
    }
    await this.#run(session, initializeMessage(this.shardId, checkpoint), null);
    if (checkpointer !== null) {
      const batches = this.#replay.batchesAfter(checkpoint);
      let replayed = 0;
      for (const batch of batches) {
        const records = recordsAfter(batch.records, checkpointer.lastCheckpoint);
        if (records.length === 0) continue;
        await this.#run(session, processRecordsMessage(records, batch.millisBehindLatest), checkpointer);
        replayed += records.length;
      }
      this.#replay.prune(checkpointer.lastCheckpoint);
      if (replayed > 0) {
        this.#logger.info('replayed unacknowledged records to the new child', {
          records: replayed,
          from: checkpoint.toString(),
        });
      }
    }
    return session;
  }

  /** One exchange; on any failure the child is ended and the error rethrown. */
  async #run(
    session: ChildSession,
    message: ActionMessage,
    checkpointer: Checkpointer | null,
  ): Promise<void> {
    if (message.action === 'processRecords') {
      const last = message.records.at(-1);
      // Batches go out in order, so the last record of this one is the furthest the child has been sent.
      if (last !== undefined) this.#lastSent = positionOf(last);
    }
    try {
      await session.exchange(
        message,
        checkpointer === null
          ? null
          : new ChildCheckpointer(checkpointer, {
              shardId: this.shardId,
              lastSent: () => this.#lastSent,
              shardEnded: message.action === 'shardEnded',
              onAdvance: () => this.#progressed(),
            }),
      );
    } catch (error) {
      await this.#fail(session, error, message.action);
      throw error;
    }
  }

  async #fail(session: ChildSession, error: unknown, action: MultiLangAction): Promise<void> {
    if (this.#session === session) this.#session = null;
    const exit = await session.terminate();
    if (this.#finished && action === 'shutdownRequested') {
      // The lease ended while shutdownRequested was still running, and the child was ended for it.
      this.#logger.info('the child was ended before it answered shutdownRequested', { pid: session.pid });
      return;
    }
    this.#logger.error(`child failed during ${action}; it was ended`, {
      pid: session.pid,
      exitCode: exit.code,
      exitSignal: exit.signal,
      error,
    });
    const failure = MultiLangChildError.is(error)
      ? error
      : new MultiLangChildError(this.shardId, 'exited', `failed during ${action}: ${String(error)}`, {
          cause: error,
        });
    this.#childFailed(failure);
  }

  #keepForReplay(records: readonly KinesisRecord[], input: ProcessRecordsInput): void {
    const wasComplete = this.#replay.complete;
    this.#replay.add({ records, millisBehindLatest: input.millisBehindLatest });
    this.#replay.prune(input.checkpointer.lastCheckpoint);
    if (wasComplete && !this.#replay.complete) {
      this.#logger.warn(
        `the replay buffer of shard ${this.shardId} is full: records are not kept for a restarted child until a checkpoint covers them. If the child dies before that, the lease is released and the shard resumes from its last checkpoint`,
        { limit: this.#replayLimitsText(), keptBytes: this.#replay.bytes },
      );
    }
  }

  #replayLimitsText(): string {
    const budget = this.#options.replayBudget;
    return this.#replay.limitReached === 'daemon' && budget !== undefined
      ? `kcl.replayBufferTotalMaxBytes = ${budget.maxBytes}, shared by every shard of this worker`
      : `kcl.replayBufferMaxBytes = ${this.#options.replayBufferMaxBytes}`;
  }

  #childFailed(error: MultiLangChildError): void {
    this.#failures.failed(error);
    this.#options.onChildFailure?.(error);
  }

  #progressed(): void {
    this.#failures.progressed();
  }

  /** Gives the lease up when the failure budget is spent; returns the error to throw, or null. */
  #giveUpIfExhausted(leaseKey: string): MultiLangShardGivenUpError | null {
    if (this.#givenUp !== null) return this.#givenUp;
    const error = this.#failures.givenUpError(leaseKey, this.shardId);
    return error === null ? null : this.#giveUp(error);
  }

  #giveUp(error: MultiLangShardGivenUpError): MultiLangShardGivenUpError {
    this.#givenUp = error;
    // Nothing more is sent to a child of this lease incarnation; the next owner reads from the checkpoint.
    this.#replay.clear();
    this.#logger.error(`giving up shard ${this.shardId}: releasing its lease`, {
      reason: error.reason,
      failures: error.failures,
      error,
    });
    this.#options.onShardGivenUp?.(error);
    return error;
  }
}
