import type { ChildShard } from '@aws-sdk/client-kinesis';
import { KclError } from '@kcl/core';
import { Backoff } from '../backoff.js';
import type { FetchedBatch } from '../kinesis/record-fetcher.js';
import { createChildLeases, lookUpChildShards } from '../leases/child-leases.js';
import type { ProcessorRun } from './shard-run.js';

/** `shardEnded` returned without checkpointing SHARD_END. */
export class ShardEndNotCheckpointedError extends KclError {
  constructor(leaseKey: string) {
    super(
      'SHARD_END_NOT_CHECKPOINTED',
      `@kcl/consumer: shardEnded of ${leaseKey} returned without checkpointing; call await checkpointer.checkpoint() in shardEnded so the child shards can start`,
    );
  }
}

/** How a shard ended, as the fetcher saw it. */
export type ShardEndSeen = NonNullable<FetchedBatch['shardEnd']>;

/**
 * A shard's end, once every record of it was delivered (ARCHITECTURE §5): makes sure the children's
 * leases exist, then lets the processor checkpoint SHARD_END in `shardEnded` (or checkpoints it
 * itself when the processor has no `shardEnded`), retrying either with backoff. Returns the children
 * once SHARD_END is written; null when it is not — the consumer halted (a stop wins: the next owner
 * reads the end again and finishes the shard), or a merge's other parent blocks the end.
 */
export async function writeShardEnd(
  run: ProcessorRun,
  seen: ShardEndSeen,
): Promise<readonly string[] | null> {
  const childShardIds = await ensureChildLeases(run, seen);
  if (childShardIds === null) return null;
  return (await checkpointShardEnd(run)) ? childShardIds : null;
}

/** `createChildLeases`, retried until it succeeds, the consumer halts, or the end is blocked for now. */
async function ensureChildLeases(run: ProcessorRun, seen: ShardEndSeen): Promise<readonly string[] | null> {
  const { held, clock, logger, leaseKey } = run;
  const backoff = new Backoff({
    initialMs: 500,
    maxMs: run.settings.parentPollIntervalMs,
    random: run.random,
  });
  let childShards: readonly ChildShard[] = seen.childShards;
  while (!run.halted() && held.isHeld()) {
    try {
      if (childShards.length === 0 && !seen.gone) {
        childShards = await lookUpChildShards(run.stream, leaseKey, held.signal);
      }
      const outcome = await createChildLeases({
        lease: held.lease,
        childShards,
        store: run.store,
        random: run.random,
        workerId: run.workerId,
        emit: run.emit,
      });
      if (outcome.kind === 'created') return outcome.childShardIds;
      if (outcome.kind === 'invalid') {
        logger.warn('invalid shard end; looking the children up', { leaseKey, reason: outcome.message });
        childShards = [];
      } else {
        logger.info('shard end waits for the other parent of a merge', { leaseKey, reason: outcome.message });
        if (outcome.dropLease || run.stopRequested()) return null;
      }
      await clock.sleep(backoff.next(), run.haltSignal);
    } catch (error) {
      logger.warn('creating child leases failed; retrying', { leaseKey, error });
      await clock.sleep(backoff.next(), run.haltSignal);
    }
  }
  return null;
}

/** Runs `shardEnded` until SHARD_END is checkpointed or the consumer halts; true once it is written. */
async function checkpointShardEnd(run: ProcessorRun): Promise<boolean> {
  const { held, checkpointer, processor, leaseKey } = run;
  checkpointer.allowShardEnd();
  const backoff = new Backoff({ ...run.settings.processingRetry, random: run.random });
  for (let attempt = 1; !run.halted() && held.isHeld(); attempt++) {
    try {
      if (processor.shardEnded === undefined) {
        await checkpointer.checkpoint();
      } else {
        await processor.shardEnded({ shardId: run.shardId, leaseKey, checkpointer, signal: run.haltSignal });
      }
      if (!checkpointer.lastCheckpoint.isShardEnd) throw new ShardEndNotCheckpointedError(leaseKey);
    } catch (error) {
      if (checkpointer.lastCheckpoint.isShardEnd) break;
      run.emit({
        type: 'processing-error',
        workerId: run.workerId,
        leaseKey,
        error,
        attempt,
        action: 'retry',
      });
      run.logger.warn('shardEnded failed; retrying', { leaseKey, attempt, error });
      await run.clock.sleep(backoff.next(), run.haltSignal);
      continue;
    }
    break;
  }
  if (checkpointer.lastCheckpoint.isShardEnd) return true;
  checkpointer.revokeShardEnd();
  return false;
}
