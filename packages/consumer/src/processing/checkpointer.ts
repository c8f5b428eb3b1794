import type {
  KclEvent,
  Lease,
  LeaseRepository,
  LeaseStore,
  LeaseWriteResult,
  TransactionalCheckpointResult,
} from '@kcl/core';
import {
  ConfigurationError,
  ExtendedSequenceNumber,
  InvalidCheckpointError,
  isKclError,
  KclError,
  LeaseLostError,
  offersTransactionalCheckpoint,
} from '@kcl/core';
import type { HeldLease } from '../leases/held-lease.js';
import type { LeaseKeeper } from '../leases/lease-keeper.js';
import { Mutex } from '../mutex.js';
import type {
  Checkpointer,
  KinesisRecord,
  PreparedCheckpointer,
  TransactionCheckpoint,
} from './record-processor.js';

export interface ShardCheckpointerOptions {
  readonly held: HeldLease;
  readonly keeper: LeaseKeeper;
  readonly store: LeaseStore;
  readonly workerId: string;
  readonly emit: (event: KclEvent) => void;
  /** Called after each checkpoint is written (metrics, status). */
  readonly onCheckpoint?: (checkpoint: ExtendedSequenceNumber) => void;
}

/**
 * The checkpointer of one lease incarnation. It enforces the Java KCL's rules: a checkpoint never goes
 * backwards, never past the last record delivered to the processor, and reaches SHARD_END only inside
 * `shardEnded`; checkpointing the current value again is free (no write).
 *
 * A checkpoint without arguments means "everything delivered": the end of the batch being delivered,
 * or of the last batch whose delivery completed. A delivery cut short (the worker stopping, the lease
 * lost, `processRecords` throwing) does not count: afterwards, a checkpoint without arguments (in
 * `shutdownRequested`, say) names the end of the last completed batch, never records the processor
 * may not have handled. Explicit positions up to the last record handed over stay allowed.
 */
export class ShardCheckpointer implements Checkpointer {
  readonly #options: ShardCheckpointerOptions;
  readonly #mutex = new Mutex();
  #lastCheckpoint: ExtendedSequenceNumber;
  #largestPermitted: ExtendedSequenceNumber;
  /** What a checkpoint without arguments names. */
  #delivered: ExtendedSequenceNumber;
  /** `#delivered` before the delivery in progress began. */
  #deliveredBefore: ExtendedSequenceNumber;
  #lastRecordAtShardEnd: ExtendedSequenceNumber | null = null;
  /** The largest position records were delivered up to (`#largestPermitted` may be past it: `allowPosition`). */
  #largestRecord: ExtendedSequenceNumber;
  /** `#largestPermitted` when the shard ended: a checkpoint from the last record up to it means SHARD_END. */
  #positionAtShardEnd: ExtendedSequenceNumber | null = null;
  /** A transaction's work is running (`transaction`): the other calls would wait for it. */
  #workRunning = false;
  /**
   * A transaction of the delivery in progress found that an earlier one, whose answer was lost,
   * committed: until the next delivery, a transaction that does not move the checkpoint past it is
   * refused (it would write the committed records again).
   */
  #superseded = false;
  /** Set once `transaction` was called on a store that cannot run it: the worker stops (never retried). */
  #misconfiguration: ConfigurationError | null = null;

  constructor(options: ShardCheckpointerOptions) {
    this.#options = options;
    this.#lastCheckpoint = options.held.lease.checkpoint;
    this.#largestPermitted = options.held.lease.checkpoint;
    this.#largestRecord = options.held.lease.checkpoint;
    this.#delivered = options.held.lease.checkpoint;
    this.#deliveredBefore = options.held.lease.checkpoint;
  }

  get lastCheckpoint(): ExtendedSequenceNumber {
    return this.#lastCheckpoint;
  }

  /**
   * The `ConfigurationError` of a `transaction` call on a store without transactional checkpoints, or
   * null. Retrying the batch cannot help, so the delivery stops the worker instead.
   */
  get misconfiguration(): ConfigurationError | null {
    return this.#misconfiguration;
  }

  /** The largest position a checkpoint may name now. */
  get largestPermitted(): ExtendedSequenceNumber {
    return this.#largestPermitted;
  }

  /** What a checkpoint without arguments names now. */
  get delivered(): ExtendedSequenceNumber {
    return this.#delivered.isAfter(this.#lastCheckpoint) ? this.#delivered : this.#lastCheckpoint;
  }

  /** Records were delivered up to `position`: checkpoints may now go that far. */
  allowUpTo(position: ExtendedSequenceNumber): void {
    if (position.isAfter(this.#largestRecord)) this.#largestRecord = position;
    this.allowPosition(position);
  }

  /**
   * The read got to `position` without records up to it (an empty fan-out event's continuation):
   * checkpoints may name it, and at the shard's end it counts as the last record would.
   */
  allowPosition(position: ExtendedSequenceNumber): void {
    if (position.isAfter(this.#largestPermitted)) this.#largestPermitted = position;
    if (position.isAfter(this.#delivered)) this.#delivered = position;
  }

  /** A delivery up to `position` begins: during it, a checkpoint without arguments names `position`. */
  beginDelivery(position: ExtendedSequenceNumber): void {
    this.#superseded = false;
    this.#deliveredBefore = this.#delivered;
    this.allowUpTo(position);
  }

  /**
   * The delivery ended: `completed` when the processor returned normally (or the batch was skipped on
   * purpose); otherwise a checkpoint without arguments goes back to naming the last completed batch.
   */
  endDelivery(completed: boolean): void {
    if (!completed) this.#delivered = this.#deliveredBefore;
    this.#deliveredBefore = this.#delivered;
  }

  /**
   * `shardEnded` did not complete (the worker is stopping): a checkpoint without arguments names the
   * shard's last record again, not SHARD_END — only `shardEnded` finishes a shard.
   */
  revokeShardEnd(): void {
    if (!this.#largestPermitted.isShardEnd || this.#lastCheckpoint.isShardEnd) return;
    const last = this.#positionAtShardEnd ?? this.#lastRecordAtShardEnd ?? this.#lastCheckpoint;
    this.#largestPermitted = last;
    this.#delivered = last;
    this.#deliveredBefore = last;
    this.#lastRecordAtShardEnd = null;
    this.#positionAtShardEnd = null;
  }

  /** The shard has ended: from now on `checkpoint()` means SHARD_END. */
  allowShardEnd(): void {
    if (!this.#largestPermitted.isShardEnd) {
      this.#lastRecordAtShardEnd = this.#largestRecord.isSentinel ? null : this.#largestRecord;
      this.#positionAtShardEnd = this.#largestPermitted.isSentinel ? null : this.#largestPermitted;
      this.#largestPermitted = ExtendedSequenceNumber.SHARD_END;
      this.#delivered = ExtendedSequenceNumber.SHARD_END;
    }
  }

  checkpoint(sequenceNumber?: string, subSequenceNumber?: number): Promise<void> {
    const refused = this.#refuseInsideTransaction('checkpoint');
    if (refused !== null) return Promise.reject(refused);
    return this.#mutex.run(async () => {
      const target = this.#resolve(sequenceNumber, subSequenceNumber);
      if (target.equals(this.#lastCheckpoint)) return;
      // The store may be past it already: an earlier write whose answer was lost applied after all.
      const stored = this.#options.held.lease;
      if (
        stored.pendingCheckpoint === null &&
        !stored.checkpoint.isBefore(target) &&
        this.#options.held.isHeld()
      ) {
        this.#lastCheckpoint = target;
        return;
      }
      await this.#write(target, null);
      this.#lastCheckpoint = target;
    });
  }

  checkpointRecord(record: Pick<KinesisRecord, 'sequenceNumber' | 'subSequenceNumber'>): Promise<void> {
    return this.checkpoint(record.sequenceNumber, record.subSequenceNumber);
  }

  prepareCheckpoint(sequenceNumber?: string, subSequenceNumber?: number): Promise<PreparedCheckpointer> {
    const refused = this.#refuseInsideTransaction('prepareCheckpoint');
    if (refused !== null) return Promise.reject(refused);
    return this.#mutex.run(async () => {
      const target = this.#resolve(sequenceNumber, subSequenceNumber);
      if (!target.equals(this.#lastCheckpoint)) await this.#write(this.#lastCheckpoint, target);
      return {
        pendingCheckpoint: target,
        checkpoint: () => this.checkpoint(target.sequenceNumber, target.subSequenceNumber),
      };
    });
  }

  transaction<Transaction = unknown, T = void>(
    work: (transaction: Transaction, checkpoint: TransactionCheckpoint) => Promise<T> | T,
  ): Promise<T> {
    const refused = this.#refuseInsideTransaction('transaction');
    if (refused !== null) return Promise.reject(refused);
    return this.#mutex.run(() => this.#transaction(work));
  }

  /**
   * A checkpointer call made while a transaction's work runs would wait for that transaction, which
   * waits for the work: refused at once. (Calls to one processor never overlap, and the pipeline's
   * checkpoints take turns with its transactions, so such a call comes from inside the work.)
   */
  #refuseInsideTransaction(call: string): InvalidCheckpointError | null {
    if (!this.#workRunning) return null;
    return new InvalidCheckpointError(
      `@kcl/consumer: lease ${this.#options.held.leaseKey}: ${call}() was called inside checkpointer.transaction, where it would wait for the transaction forever; set the transaction's checkpoint with the second argument of its work (checkpoint.checkpointRecord(record))`,
    );
  }

  /**
   * ARCHITECTURE §6, exactly-once: the lease's write turn is taken first (renewals skip the lease
   * while the transaction is open, so none of this worker's renewals waits on it, not even on
   * SQLite's one connection), then the store runs the transaction: `work`, the fenced checkpoint
   * write, the commit. Nothing is retried inside: a transaction that may have committed is never run
   * again, except after a lost race that the stored lease shows was only an unanswered renewal of ours.
   */
  async #transaction<Transaction, T>(
    work: (transaction: Transaction, checkpoint: TransactionCheckpoint) => Promise<T> | T,
  ): Promise<T> {
    const { held, keeper, store, workerId, emit } = this.#options;
    const leaseKey = held.leaseKey;
    if (!offersTransactionalCheckpoint(store)) {
      this.#misconfiguration = new ConfigurationError('@kcl/consumer checkpointer.transaction', [
        `the lease store ${store.description} cannot checkpoint in a transaction (capabilities.transactionalCheckpoint is not set): use a @kcl/store-sql store for exactly-once processing (set the consumer option exactlyOnce: true to have createConsumer check it), or checkpoint() for at-least-once`,
      ]);
      throw this.#misconfiguration;
    }
    const leases = store.leases as Required<LeaseRepository>;
    let target = this.#resolve(undefined, undefined);
    const scope: TransactionCheckpoint = {
      checkpoint: (sequenceNumber, subSequenceNumber) => {
        target = this.#resolve(sequenceNumber, subSequenceNumber);
      },
      checkpointRecord: (record) => {
        target = this.#resolve(record.sequenceNumber, record.subSequenceNumber);
      },
    };
    const initialTarget = target;
    let failure: { readonly error: unknown } | null = null;
    let committed: { readonly value: T; readonly checkpoint: ExtendedSequenceNumber } | null = null;
    const lastCheckpoint = this.#lastCheckpoint;
    let result: LeaseWriteResult | null;
    try {
      result = await keeper.write(
        held,
        'checkpoint',
        async (lease): Promise<LeaseWriteResult> => {
          // Run again after a lost race on our own counter: when the stored checkpoint moved past ours,
          // a transaction whose answer was lost committed after all; its records must not be written
          // twice, so the batch is retried from there instead.
          if (lease.checkpoint.isAfter(lastCheckpoint) && !lease.checkpoint.isAfter(this.#largestPermitted)) {
            this.#lastCheckpoint = lease.checkpoint;
            this.#superseded = true;
            // Not retryable in place: the same transaction again would commit the records twice.
            throw new KclError(
              'CHECKPOINT_TRANSACTION_SUPERSEDED',
              `@kcl/consumer: lease ${leaseKey}: an earlier transaction whose answer was lost committed checkpoint ${lease.checkpoint}; this one was rolled back. Do not retry it inside processRecords: throw, and the batch is delivered again after that checkpoint`,
            );
          }
          target = initialTarget;
          const outcome: TransactionalCheckpointResult<T> = await leases.checkpointInTransaction<T>(
            leaseKey,
            lease.leaseCounter,
            async (transaction) => {
              let value: T;
              try {
                this.#workRunning = true;
                value = await work(transaction as Transaction, scope);
              } catch (error) {
                failure = { error };
                throw error;
              } finally {
                this.#workRunning = false;
              }
              // Never backwards, as an ordinary checkpoint.
              const checkpoint = lease.checkpoint.isAfter(target) ? lease.checkpoint : target;
              if (this.#superseded && !checkpoint.isAfter(lease.checkpoint)) {
                const refused = new InvalidCheckpointError(
                  `@kcl/consumer: lease ${leaseKey}: this delivery's records up to checkpoint ${lease.checkpoint} were committed by an earlier transaction whose answer was lost, and this transaction would not move the checkpoint past it, so it was rolled back (its writes would be duplicates); throw from processRecords instead of retrying, and the batch is delivered again after that checkpoint`,
                );
                failure = { error: refused };
                throw refused;
              }
              return { update: { checkpoint, pendingCheckpoint: null }, value };
            },
            { signal: held.signal },
          );
          if (outcome.ok) {
            committed = { value: outcome.value, checkpoint: outcome.lease.checkpoint };
            return { ok: true, lease: outcome.lease };
          }
          return outcome;
        },
        // A transaction that lost its race was rolled back: only the very write it made counts, never
        // a stored lease that merely looks like it.
        { reflects: () => false },
      );
    } catch (error) {
      if (failure !== null) throw (failure as { readonly error: unknown }).error;
      // Given up while the transaction was open: the store call was aborted (the lease's signal) or
      // its answer was lost. Either way the application hears that the lease is gone.
      if (!held.isHeld() && (!KclError.is(error) || isKclError(error, 'LEASE_STORE_CALL_ABORTED'))) {
        const done = committed as { readonly checkpoint: ExtendedSequenceNumber } | null;
        throw new LeaseLostError(
          leaseKey,
          done !== null
            ? `the transaction committed with checkpoint ${done.checkpoint}, but the lease was given up meanwhile; the next owner resumes after it`
            : `it was given up while the transaction was open, and the transaction ended without an answer (${error instanceof Error ? error.message : String(error)}): it committed together with its checkpoint or not at all, and the next owner resumes from the stored checkpoint`,
        );
      }
      throw error;
    }
    const done = committed as { readonly value: T; readonly checkpoint: ExtendedSequenceNumber } | null;
    if (result === null && done !== null) {
      // Committed, but the lease was given up meanwhile (it expired locally): the writes and their
      // checkpoint stand together, and the next owner resumes after them.
      if (done.checkpoint.isAfter(this.#lastCheckpoint)) this.#lastCheckpoint = done.checkpoint;
      throw new LeaseLostError(
        leaseKey,
        `it expired while the transaction was open; the transaction committed with checkpoint ${done.checkpoint}, from which the next owner resumes`,
      );
    }
    if (result === null || done === null) {
      throw new LeaseLostError(
        leaseKey,
        'it expired or was released before the transaction committed; nothing was written, and the new owner resumes from the last checkpoint',
      );
    }
    if (!result.ok) {
      throw new LeaseLostError(
        leaseKey,
        `another worker holds it now (${result.reason}); the transaction was rolled back`,
      );
    }
    if (done.checkpoint.isAfter(this.#lastCheckpoint)) this.#lastCheckpoint = done.checkpoint;
    emit({ type: 'checkpoint-written', workerId, leaseKey, checkpoint: done.checkpoint });
    this.#options.onCheckpoint?.(done.checkpoint);
    return done.value;
  }

  #resolve(
    sequenceNumber: string | undefined,
    subSequenceNumber: number | undefined,
  ): ExtendedSequenceNumber {
    const leaseKey = this.#options.held.leaseKey;
    let target: ExtendedSequenceNumber;
    if (sequenceNumber === undefined) {
      if (subSequenceNumber !== undefined) {
        throw new InvalidCheckpointError(
          `@kcl/consumer: lease ${leaseKey}: a sub-sequence number needs a sequence number`,
        );
      }
      target = this.delivered;
    } else {
      try {
        target = ExtendedSequenceNumber.of(sequenceNumber, subSequenceNumber ?? 0);
      } catch (error) {
        throw new InvalidCheckpointError(
          `@kcl/consumer: lease ${leaseKey}: ${KclError.is(error) ? error.message : String(error)}`,
        );
      }
    }
    if (
      this.#largestPermitted.isShardEnd &&
      this.#lastRecordAtShardEnd !== null &&
      !target.isBefore(this.#lastRecordAtShardEnd) &&
      (this.#positionAtShardEnd === null || !target.isAfter(this.#positionAtShardEnd))
    ) {
      // At shard end, checkpointing the shard's last record (or where the read got to after it)
      // means the shard is done.
      target = ExtendedSequenceNumber.SHARD_END;
    }
    if (target.isBefore(this.#lastCheckpoint)) {
      throw new InvalidCheckpointError(
        `@kcl/consumer: lease ${leaseKey}: checkpoint ${target} is before the last checkpoint ${this.#lastCheckpoint}; checkpoints never go backwards`,
      );
    }
    if (target.isAfter(this.#largestPermitted)) {
      throw new InvalidCheckpointError(
        target.isShardEnd
          ? `@kcl/consumer: lease ${leaseKey}: SHARD_END can only be checkpointed inside shardEnded`
          : `@kcl/consumer: lease ${leaseKey}: checkpoint ${target} is past the last record delivered (${this.#largestPermitted})`,
      );
    }
    return target;
  }

  async #write(
    checkpoint: ExtendedSequenceNumber,
    pendingCheckpoint: ExtendedSequenceNumber | null,
  ): Promise<void> {
    const { held, keeper, store, workerId, emit } = this.#options;
    const samePending = (stored: Lease): boolean =>
      pendingCheckpoint === null
        ? stored.pendingCheckpoint === null
        : stored.pendingCheckpoint?.equals(pendingCheckpoint) === true;
    const result = await keeper.write(
      held,
      'checkpoint',
      // Never backwards: the copy the write is based on may show a later checkpoint that an earlier
      // write, whose answer was lost, stored after all.
      (lease) =>
        store.leases.checkpoint(lease.leaseKey, lease.leaseCounter, {
          checkpoint: lease.checkpoint.isAfter(checkpoint) ? lease.checkpoint : checkpoint,
          pendingCheckpoint,
        }),
      {
        reflects: (stored) =>
          stored.owner === workerId && stored.checkpoint.equals(checkpoint) && samePending(stored),
        // An earlier write whose answer was lost may have stored a later checkpoint: never go back.
        covers: (stored) =>
          stored.owner === workerId &&
          !stored.checkpoint.isBefore(checkpoint) &&
          (pendingCheckpoint === null || samePending(stored)),
      },
    );
    if (result === null) {
      throw new LeaseLostError(
        held.leaseKey,
        'it expired or was released before the checkpoint; the new owner resumes from the last checkpoint',
      );
    }
    if (!result.ok) {
      throw new LeaseLostError(held.leaseKey, `another worker holds it now (${result.reason})`);
    }
    if (pendingCheckpoint === null) {
      emit({ type: 'checkpoint-written', workerId, leaseKey: held.leaseKey, checkpoint });
      this.#options.onCheckpoint?.(checkpoint);
    }
  }
}
