import type { ExtendedSequenceNumber } from '@kcl/core';
import type { ConsumedStream } from '../streams/stream-options.js';

/** One record as the processor receives it, after KPL de-aggregation. */
export interface KinesisRecord {
  readonly sequenceNumber: string;
  /** Position inside a KPL aggregated record; 0 for records that were not aggregated. */
  readonly subSequenceNumber: number;
  readonly partitionKey: string;
  /** Set when the producer chose the hash key explicitly (KPL sub-records may carry one). */
  readonly explicitHashKey: string | null;
  readonly data: Uint8Array;
  readonly approximateArrivalTimestamp: Date;
  readonly encryptionType: string | null;
  /** True when the record came out of a KPL aggregated record. */
  readonly aggregated: boolean;
}

/** Records progress. Every call writes to the lease store, so call it per batch, not per record. */
export interface Checkpointer {
  /**
   * Checkpoints at the last record delivered so far (inside `shardEnded`: at SHARD_END), or at the
   * given sequence number (and sub-sequence number, for KPL sub-records). A checkpoint may not go
   * backwards nor past the last delivered record; an invalid one throws `InvalidCheckpointError`, and
   * one refused because the lease is no longer held throws `LeaseLostError`.
   */
  checkpoint(sequenceNumber?: string, subSequenceNumber?: number): Promise<void>;
  /** Checkpoints at a record (its sequence and sub-sequence number). */
  checkpointRecord(record: Pick<KinesisRecord, 'sequenceNumber' | 'subSequenceNumber'>): Promise<void>;
  /**
   * Two-phase checkpointing: stores a pending checkpoint beside the committed one (a new owner sees
   * it in `initialize`) and returns a handle that commits it later.
   */
  prepareCheckpoint(sequenceNumber?: string, subSequenceNumber?: number): Promise<PreparedCheckpointer>;
  /**
   * Exactly-once processing (ARCHITECTURE §6), on a store that can checkpoint in a transaction
   * (`capabilities.transactionalCheckpoint`: `@kcl/store-sql`): opens a transaction on the store's
   * database and calls `work` with it (for `@kcl/store-sql` a Kysely `Transaction`; name its type
   * with `SqlTransaction<YourDatabase>`). When `work` resolves, the checkpoint — at the end of the batch
   * being delivered, or where `work` set it with `checkpoint.checkpointRecord(record)` — is written in
   * the same transaction, conditional on the lease counter, and the transaction commits: the
   * application's writes and the checkpoint persist together or not at all. Resolves to what `work`
   * returned.
   *
   * A lease lost meanwhile rolls everything back and rejects with `LeaseLostError`; an error thrown by
   * `work` rolls everything back and rejects with that error (the batch is then retried from the last
   * committed checkpoint). Never retry a failed transaction inside `processRecords`: throw instead, and
   * the batch is delivered again after the last committed checkpoint. A transaction whose commit
   * applied but whose answer was lost is only noticed by the next one, which rejects with
   * `CHECKPOINT_TRANSACTION_SUPERSEDED`; after that, a transaction of the same delivery that does not
   * move the checkpoint past the committed one is refused with `InvalidCheckpointError`.
   *
   * Time budget: the lease is not renewed while the transaction is open, so it must commit within
   * `leaseExpiryMs − leaseRenewIntervalMs` (15 s with the defaults) of the last renewal, or the lease
   * expires and the commit is refused. Keep transactions short.
   *
   * Inside `work`, use only the transaction it is given — never the outer `db`, never the checkpointer
   * (refused at once). While `work` runs, the transaction holds its connection and its locks: on
   * SQLite the whole file is locked for writing (other workers' renewals wait in better-sqlite3's busy
   * wait) and every other store call of this worker queues behind it on the one connection, so a query
   * on the outer `db` inside `work` waits for the transaction forever (a deadlock); on PostgreSQL such
   * a query may wait for a row the transaction locked, and the store's `transactionTimeoutMs` (default
   * 15 s) ends the stalled transaction on the server; on MySQL/MariaDB it waits up to
   * `innodb_lock_wait_timeout`. On PostgreSQL and MySQL each open transaction holds one connection of
   * the pool: size the pool above the number of shards a worker processes at once, or renewals and
   * checkpoints wait for a free connection.
   *
   * On a store without the capability it rejects with a `ConfigurationError`, and the
   * worker stops with that error instead of retrying the batch (set the consumer option
   * `exactlyOnce: true` to have `createConsumer` refuse such a store at once).
   */
  transaction<Transaction = unknown, T = void>(
    work: (transaction: Transaction, checkpoint: TransactionCheckpoint) => Promise<T> | T,
  ): Promise<T>;
  /** The last committed checkpoint. */
  readonly lastCheckpoint: ExtendedSequenceNumber;
}

/**
 * Where the checkpoint of a `checkpointer.transaction` goes: by default the end of the batch being
 * delivered; these calls move it (the same rules as `checkpoint`: never backwards, never past the last
 * record delivered). Nothing is written until the transaction commits.
 */
export interface TransactionCheckpoint {
  checkpoint(sequenceNumber?: string, subSequenceNumber?: number): void;
  checkpointRecord(record: Pick<KinesisRecord, 'sequenceNumber' | 'subSequenceNumber'>): void;
}

export interface PreparedCheckpointer {
  readonly pendingCheckpoint: ExtendedSequenceNumber;
  /** Commits the prepared checkpoint. */
  checkpoint(): Promise<void>;
}

export interface InitializeInput {
  readonly shardId: string;
  readonly leaseKey: string;
  /** Where processing resumes: the committed checkpoint (a sentinel for a lease never checkpointed). */
  readonly checkpoint: ExtendedSequenceNumber;
  /** A checkpoint a previous owner prepared but did not commit. */
  readonly pendingCheckpoint: ExtendedSequenceNumber | null;
}

export interface ProcessRecordsInput {
  readonly shardId: string;
  readonly leaseKey: string;
  readonly records: readonly KinesisRecord[];
  /** How far the shard's newest record is ahead of this batch, as Kinesis reports it. */
  readonly millisBehindLatest: number;
  readonly checkpointer: Checkpointer;
  /**
   * Aborted when the worker stops delivering to this processor (graceful stop or lost lease). A
   * processor that waits (for room in a pipeline, say) should stop waiting when it aborts.
   */
  readonly signal: AbortSignal;
}

export interface LeaseLostInput {
  readonly shardId: string;
  readonly leaseKey: string;
}

export interface ShardEndedInput {
  readonly shardId: string;
  readonly leaseKey: string;
  /** Must be used: `await checkpointer.checkpoint()` records SHARD_END so the children can start. */
  readonly checkpointer: Checkpointer;
  /**
   * Aborted when the worker stops (or the lease is lost) before the shard end is recorded: a processor
   * that waits (for its in-flight work to drain, say) should stop waiting and throw; the shard is then
   * finished by the next owner.
   */
  readonly signal?: AbortSignal;
}

export interface ShutdownRequestedInput {
  readonly shardId: string;
  readonly leaseKey: string;
  /** The last chance to checkpoint before the lease is released to another worker. */
  readonly checkpointer: Checkpointer;
  /** Aborted when `shutdownTimeoutMs` has passed: stop waiting, the lease is given up anyway. */
  readonly signal?: AbortSignal;
}

/**
 * The KCL-style record processor. One instance per lease incarnation: a lease taken again gets a new
 * instance. Calls to one instance never overlap. Every method may be async.
 *
 * Order: `initialize` → `processRecords`* → one of `shardEnded` (the shard was read to its end),
 * or `shutdownRequested` then `leaseLost` (graceful stop), or `leaseLost` alone (the lease expired or
 * was taken by another worker; checkpointing is no longer possible).
 */
export interface RecordProcessor {
  initialize?(input: InitializeInput): Promise<void> | void;
  processRecords(input: ProcessRecordsInput): Promise<void> | void;
  leaseLost?(input: LeaseLostInput): Promise<void> | void;
  /**
   * The shard was read to its end. The processor must checkpoint (SHARD_END) here; until it does the
   * children of the shard cannot start and this call is retried. When the method is absent, kcl
   * checkpoints SHARD_END itself.
   */
  shardEnded?(input: ShardEndedInput): Promise<void> | void;
  shutdownRequested?(input: ShutdownRequestedInput): Promise<void> | void;
}

export interface ProcessorContext {
  readonly shardId: string;
  readonly leaseKey: string;
  readonly workerId: string;
  /** The shard's stream: its name, and its identifier when the application reads several streams. */
  readonly stream: ConsumedStream;
}

/** Builds the processor of one lease incarnation. */
export type RecordProcessorFactory = (shardId: string, context: ProcessorContext) => RecordProcessor;

/** What to do with a batch whose `processRecords` threw. */
export type ProcessingErrorAction = 'retry' | 'skip';

export interface ProcessingErrorContext {
  readonly shardId: string;
  readonly leaseKey: string;
  readonly records: readonly KinesisRecord[];
  /** 1 for the first failure of this batch. */
  readonly attempt: number;
}

/** Decides whether a failed batch is retried (the default) or skipped. */
export type ProcessingErrorHandler = (
  error: unknown,
  context: ProcessingErrorContext,
) => ProcessingErrorAction | Promise<ProcessingErrorAction>;
