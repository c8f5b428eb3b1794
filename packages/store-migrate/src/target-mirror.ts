import type { Clock, Lease, LeaseBatchWriteResult, LeaseStore, LeaseWriteResult, Logger } from '@kcl/core';
import { startDeadline, TIMED_OUT } from './deadline.js';
import type { LiveMigrationPhase } from './migration-phase.js';
import { exactCopyOf } from './plan-lease-copy.js';
import type { CopyRepair } from './repair-target-copy.js';

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
  /** The phase the migrating store last read: copies are repaired only while it is `mirroring`. */
  readonly phase: () => LiveMigrationPhase;
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
  renewals(renewed: readonly Lease[]): Promise<void>;
  statistics(): MirrorStatistics;
}

/** The target side of the migrating store while the source is authoritative. */
export function createTargetMirror(options: TargetMirrorOptions): TargetMirror {
  const { to, clock, mirrorTimeoutMs, logger } = options;
  const statistics = { mirrored: 0, repaired: 0, lagging: 0, failed: 0 };

  const count = (repair: CopyRepair): void => {
    if (repair === 'in-sync') statistics.mirrored += 1;
    else if (repair === 'created' || repair === 'repaired') statistics.repaired += 1;
    else statistics.lagging += 1;
  };

  /** After the target refused a mirrored write: repair the copy (mirroring only), or count it lagging. */
  const repair = async (source: Lease | null, missing: boolean): Promise<void> => {
    if (source === null || !missing || options.phase() !== 'mirroring') {
      statistics.lagging += 1;
      return;
    }
    count((await to.createLeaseIfAbsent(exactCopyOf(source))).ok ? 'created' : 'raced');
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
        const refused = outcome === null || (outcome !== undefined && 'ok' in outcome && !outcome.ok);
        if (!refused) statistics.mirrored += 1;
        else
          await repair(
            source,
            outcome !== null &&
              outcome !== undefined &&
              'ok' in outcome &&
              !outcome.ok &&
              outcome.reason === 'not-found',
          );
      });
    },

    renewals(renewed) {
      return bounded(`renew ${renewed.length} leases`, renewed.length, async () => {
        const results: LeaseBatchWriteResult[] = await to.renewLeases(
          renewed.map((lease) => ({ leaseKey: lease.leaseKey, leaseCounter: lease.leaseCounter - 1 })),
        );
        await Promise.all(
          renewed.map(async (lease, index) => {
            const result = results[index];
            if (result?.ok === true) statistics.mirrored += 1;
            else if (result === undefined || result.reason === 'failed') statistics.failed += 1;
            else await repair(lease, result.reason === 'not-found');
          }),
        );
      });
    },

    statistics: () => ({ ...statistics }),
  };
}
