import type { Clock, Logger } from '@kcl/core';
import type { Checkpointer, RecordProcessor } from './record-processor.js';

export interface ProcessorShutdown {
  readonly processor: RecordProcessor;
  readonly checkpointer: Checkpointer;
  readonly shardId: string;
  readonly leaseKey: string;
  /** How long `shutdownRequested` may take. */
  readonly budgetMs: number;
  /** The consumer's `shutdownTimeoutMs`, for the warning. */
  readonly shutdownTimeoutMs: number;
  readonly clock: Clock;
  readonly logger: Logger;
}

/**
 * Calls `shutdownRequested` (the processor's last checkpoint before a graceful release) within its
 * budget. Its signal aborts a little before the budget ends, so a processor that stops waiting then
 * can still write its checkpoint before the lease is released. A call still running when the budget
 * ends is returned as `overrunning` (wrapped, so that nothing waits for it here), for `leaseLost` to
 * follow it once it returns: the processor's calls never overlap. A failing call is logged.
 */
export async function requestProcessorShutdown(
  shutdown: ProcessorShutdown,
): Promise<{ readonly overrunning: Promise<unknown> | null }> {
  const { processor, clock, budgetMs } = shutdown;
  const hurry = new AbortController();
  const timers = new AbortController();
  void clock.sleep(Math.floor(budgetMs * 0.8), timers.signal).then(() => hurry.abort());
  const timer = clock.sleep(budgetMs, timers.signal).then(() => 'timeout' as const);
  const call = Promise.resolve().then(() =>
    processor.shutdownRequested?.({
      shardId: shutdown.shardId,
      leaseKey: shutdown.leaseKey,
      checkpointer: shutdown.checkpointer,
      signal: hurry.signal,
    }),
  );
  try {
    const outcome = await Promise.race([call.then(() => 'done' as const), timer]);
    if (outcome === 'timeout') {
      shutdown.logger.warn('shutdownRequested did not finish in time', {
        leaseKey: shutdown.leaseKey,
        shutdownTimeoutMs: shutdown.shutdownTimeoutMs,
      });
      return { overrunning: call };
    }
  } catch (error) {
    shutdown.logger.warn('shutdownRequested failed', { leaseKey: shutdown.leaseKey, error });
  } finally {
    timers.abort();
  }
  return { overrunning: null };
}
