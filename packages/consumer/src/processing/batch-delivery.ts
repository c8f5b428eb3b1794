import { ExtendedSequenceNumber, isKclError, LeaseLostError } from '@kcl/core';
import { Backoff } from '../backoff.js';
import { deaggregateRecords } from '../kinesis/kpl-deaggregation.js';
import type { FetchedBatch } from '../kinesis/record-fetcher.js';
import type { KinesisRecord, ProcessingErrorAction } from './record-processor.js';
import type { ProcessorRun } from './shard-run.js';

/** Figures the worker collects per batch (status, metrics). */
export interface BatchReport {
  readonly leaseKey: string;
  readonly shardId: string;
  readonly records: number;
  readonly bytes: number;
  readonly millisBehindLatest: number;
  readonly processingMs: number;
  readonly droppedAggregates: number;
}

/** A run with its processor, and where a delivery reports to. */
export interface BatchDelivery extends ProcessorRun {
  readonly onBatch?: (report: BatchReport) => void;
  /** Counts records `processRecords` returned from. */
  readonly onProcessed: (records: number) => void;
}

/**
 * Delivers one batch (ARCHITECTURE §6): de-aggregates KPL records, drops the ones at or below the
 * checkpoint — on every attempt, so a processor that checkpointed in the middle of a batch and then
 * threw gets only the rest again — and calls `processRecords` until it returns, `onProcessingError`
 * says skip, or the consumer halts. Returns false when the delivery did not complete because the
 * consumer is halting (stopping, or the lease is lost): the processor may not have handled every
 * record.
 */
export async function deliverBatch(delivery: BatchDelivery, batch: FetchedBatch): Promise<boolean> {
  const { held, checkpointer, processor, clock, settings } = delivery;
  // A pipeline calls the checkpointer from its own stages, after processRecords returned: its
  // failed transaction is seen at the next batch.
  if (stoppedByMisconfiguration(delivery)) return false;
  const { records: expanded, droppedAggregates } = deaggregateRecords(batch.records, held.lease.hashKeyRange);
  const pending = (): KinesisRecord[] => {
    const last = checkpointer.lastCheckpoint;
    return expanded.filter((record) =>
      ExtendedSequenceNumber.of(record.sequenceNumber, record.subSequenceNumber).isAfter(last),
    );
  };
  // An empty fan-out event still says where the read got to: a checkpoint may name it, so an idle
  // shard's checkpoint moves on (as Kinesis advises for its continuation sequence number).
  if (batch.records.length === 0 && batch.position !== undefined) {
    const reached = positionOf(batch.position);
    if (reached !== null) checkpointer.allowPosition(reached);
  }
  let records = pending();
  if (records.length === 0 && !settings.callProcessRecordsEvenForEmptyRecordList) {
    report(delivery, records, batch, 0, droppedAggregates);
    return true;
  }
  const lastRecord = records.at(-1);
  if (lastRecord !== undefined) {
    checkpointer.beginDelivery(
      ExtendedSequenceNumber.of(lastRecord.sequenceNumber, lastRecord.subSequenceNumber),
    );
  }
  let completed = false;
  try {
    const backoff = new Backoff({ ...settings.processingRetry, random: delivery.random });
    for (let attempt = 1; ; attempt++) {
      if (delivery.halted() || !held.isHeld()) return false;
      if (attempt > 1) {
        records = pending();
        if (records.length === 0) {
          completed = true;
          report(delivery, records, batch, 0, droppedAggregates);
          return true;
        }
      }
      const started = clock.monotonicNow();
      try {
        await processor.processRecords({
          shardId: delivery.shardId,
          leaseKey: delivery.leaseKey,
          records,
          millisBehindLatest: batch.millisBehindLatest,
          checkpointer,
          signal: delivery.haltSignal,
        });
        delivery.onProcessed(records.length);
        report(delivery, records, batch, clock.monotonicNow() - started, droppedAggregates);
        // Returned, but after the stop (or the loss) began: it may have handled only part of the
        // batch, so this is not a completed delivery.
        if (delivery.halted()) return false;
        completed = true;
        return true;
      } catch (error) {
        // A checkpoint refused because the lease is gone ends delivery: there is nothing to retry.
        if (isLeaseLost(error) || !held.isHeld()) return false;
        // checkpointer.transaction on a store that cannot run it: every retry would fail alike.
        if (stoppedByMisconfiguration(delivery)) return false;
        const action = await decide(delivery, error, records, attempt);
        delivery.emit({
          type: 'processing-error',
          workerId: delivery.workerId,
          leaseKey: delivery.leaseKey,
          error,
          attempt,
          action,
        });
        delivery.logger.warn('processRecords failed', {
          leaseKey: delivery.leaseKey,
          attempt,
          action,
          error,
        });
        if (action === 'skip') {
          completed = true;
          return true;
        }
        if (delivery.halted()) return false;
        await clock.sleep(backoff.next(), delivery.haltSignal);
      }
    }
  } finally {
    checkpointer.endDelivery(completed);
  }
}

/**
 * `checkpointer.transaction` was called on a store that cannot run it: no retry can succeed, so the
 * worker stops with that `ConfigurationError` (when the host can stop it). True when it was told to.
 */
function stoppedByMisconfiguration(delivery: BatchDelivery): boolean {
  const misconfiguration = delivery.checkpointer.misconfiguration;
  const onFatal = delivery.settings.onFatal;
  if (misconfiguration === null || onFatal === undefined) return false;
  delivery.logger.error(
    'checkpointer.transaction was called, which this lease store cannot run; stopping the worker',
    { leaseKey: delivery.leaseKey, error: misconfiguration },
  );
  onFatal(misconfiguration);
  return true;
}

function isLeaseLost(error: unknown): boolean {
  return LeaseLostError.is(error) || isKclError(error, 'CHECKPOINT_LEASE_LOST');
}

/** What `onProcessingError` decides; retry without one, or when it throws or answers something else. */
async function decide(
  delivery: BatchDelivery,
  error: unknown,
  records: readonly KinesisRecord[],
  attempt: number,
): Promise<ProcessingErrorAction> {
  const handler = delivery.settings.onProcessingError;
  if (handler === null) return 'retry';
  try {
    const action = await handler(error, {
      shardId: delivery.shardId,
      leaseKey: delivery.leaseKey,
      records,
      attempt,
    });
    return action === 'skip' ? 'skip' : 'retry';
  } catch {
    return 'retry';
  }
}

function report(
  delivery: BatchDelivery,
  records: readonly KinesisRecord[],
  batch: FetchedBatch,
  processingMs: number,
  droppedAggregates: number,
): void {
  let bytes = 0;
  for (const record of records) bytes += record.data.byteLength;
  delivery.onBatch?.({
    leaseKey: delivery.leaseKey,
    shardId: delivery.shardId,
    records: records.length,
    bytes,
    millisBehindLatest: batch.millisBehindLatest,
    processingMs,
    droppedAggregates,
  });
}

/** A position a read reported, or null when it is not a sequence number (nothing to checkpoint). */
function positionOf(sequenceNumber: string): ExtendedSequenceNumber | null {
  try {
    return ExtendedSequenceNumber.of(sequenceNumber, 0);
  } catch {
    return null;
  }
}
