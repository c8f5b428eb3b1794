import type {
  Clock,
  Lease,
  LeaseBatchWriteResult,
  LeaseStore,
  LeaseWriteResult,
  Logger,
  StoreCallOptions,
} from '@kcl/core';
import { leaseFromInit, leasesEqual } from '@kcl/core';
import { startDeadline, TIMED_OUT } from './deadline.js';
import { exactCopyOf } from './plan-lease-copy.js';
import type { CopyRepair } from './repair-target-copy.js';
import { createRepairLockWatch, repairTargetCopy } from './repair-target-copy.js';

/** What mirroring did so far, for logs and tests. */
export interface MirrorStatistics {
  /** Writes repeated on the target (or copies that already held their outcome). */
  readonly mirrored: number;
  /** Copies that were missing or behind and were brought in sync from the source (mirroring phase). */
  readonly repaired: number;
  /** Writes the target did not take and could not be repaired now; a later write or the cut-over does. */
  readonly lagging: number;
  /** Writes that failed or timed out on the target. */
  readonly failed: number;
}

export interface TargetMirrorOptions {
  readonly to: LeaseStore;
  readonly clock: Clock;
  readonly mirrorTimeoutMs: number;
  readonly logger: Logger;
  /**
   * Whether a copy may be repaired now: only while the source is in the `mirroring` phase, as read
   * within the last `phaseRefreshMs` (a stale reading, e.g. after failed reads, does not count). The
   * cut-over waits that long (and a margin) after leaving the phase before it moves any lease.
   */
  readonly mayRepair: () => boolean;
}

/** How a mirrored write reports: a lease write result, or (meta, delete) the lease or nothing. */
type MirroredOutcome = LeaseWriteResult | Lease | null | undefined;

export interface TargetMirror {
  /**
   * Repeats a write that succeeded on the source on the target. `source` is the source lease after
   * the write (null for a delete): when the copy did not take the write (missing, or behind because an
   * earlier mirror was lost or a plain worker wrote the source), it is repaired from it. Takes at most
   * `mirrorTimeoutMs`, repair included, and never throws: the source's outcome is the answer.
   */
  write(
    operation: string,
    leaseKey: string,
    write: () => Promise<MirroredOutcome>,
    source: Lease | null,
  ): Promise<void>;
  /** Mirrors a batch of renewals, given as the renewed source leases, in one call; as `write`. */
  renewals(renewed: readonly Lease[], options?: StoreCallOptions): Promise<void>;
  statistics(): MirrorStatistics;
}

/** The target row a mirrored write left, when it says (null: refused, or the write returns no lease). */
function copyAfter(outcome: MirroredOutcome): Lease | null {
  if (outcome === null || outcome === undefined) return null;
  if ('ok' in outcome) return outcome.ok ? outcome.lease : null;
  return outcome;
}

/**
 * True when the target took the write and its row is now exactly the source's. A write the target
 * took can still leave a copy that differs (its counter matched but it was not an exact copy, e.g. a
 * repair lock left by a repair that died, or a lost unconditional meta update): that copy is repaired.
 */
function isExactCopy(copy: Lease | null, source: Lease): boolean {
  return copy !== null && leasesEqual(copy, leaseFromInit(exactCopyOf(source)));
}

/** The target side of the migrating store while the source is authoritative. */
export function createTargetMirror(options: TargetMirrorOptions): TargetMirror {
  const { to, clock, mirrorTimeoutMs, logger } = options;
  const statistics = { mirrored: 0, repaired: 0, lagging: 0, failed: 0 };
  // A lock left by a repair that died is broken once it has been seen unchanged for this long: far
  // longer than a live repair takes (its calls answer within the mirror deadline).
  const locks = createRepairLockWatch(clock, mirrorTimeoutMs * 5);

  const count = (repair: CopyRepair): void => {
    if (repair === 'in-sync') statistics.mirrored += 1;
    else if (repair === 'created' || repair === 'repaired') statistics.repaired += 1;
    else statistics.lagging += 1;
  };

  /**
   * After the target refused a mirrored write (its copy is missing, or behind because an earlier
   * mirror was lost or a plain worker wrote the source): repair the copy from the source's new state.
   * Only while mirroring; later the cut-over owns the copies (it moves each lease exactly). A repair is
   * this store's own work, not the caller's: it is not given the caller's signal, so a caller that
   * gives up does not leave a copy half replaced (locked, or deleted and not yet created again).
   */
  const repair = async (source: Lease | null): Promise<void> => {
    if (source === null || !options.mayRepair()) {
      statistics.lagging += 1;
      return;
    }
    count(await repairTargetCopy(to, source, { locks }));
  };

  /** Runs `work` within the mirror deadline; counts `size` failures when it times out or throws. */
  const bounded = async (what: string, size: number, work: () => Promise<void>): Promise<void> => {
    const deadline = startDeadline(clock, mirrorTimeoutMs);
    try {
      if ((await deadline.race(work())) === TIMED_OUT) {
        statistics.failed += size;
        logger.debug('mirroring to the target timed out', { what });
      }
    } catch (error) {
      statistics.failed += size;
      logger.debug('mirroring to the target failed', { what, error });
    } finally {
      deadline.cancel();
    }
  };

  return {
    write(operation, leaseKey, write, source) {
      return bounded(`${operation} ${leaseKey}`, 1, async () => {
        const outcome = await write();
        if (source === null || isExactCopy(copyAfter(outcome), source)) statistics.mirrored += 1;
        else await repair(source);
      });
    },

    renewals(renewed, callOptions) {
      return bounded(`renew ${renewed.length} leases`, renewed.length, async () => {
        const results: LeaseBatchWriteResult[] = await to.leases.renewMany(
          renewed.map((lease) => ({ leaseKey: lease.leaseKey, leaseCounter: lease.leaseCounter - 1 })),
          callOptions,
        );
        await Promise.all(
          renewed.map(async (lease, index) => {
            const result = results[index];
            if (result === undefined || (!result.ok && result.reason === 'failed')) statistics.failed += 1;
            else if (result.ok && isExactCopy(result.lease, lease)) statistics.mirrored += 1;
            else await repair(lease);
          }),
        );
      });
    },

    statistics: () => ({ ...statistics }),
  };
}
