import type { Clock, LeaseStore, Logger, MigrationMarker, StoreCallOptions } from '@kcl/core';
import { startDeadline, TIMED_OUT } from './deadline.js';
import type { LiveMigrationPhase } from './migration-phase.js';
import { isSealedLease, readSourceMarker } from './migration-phase.js';
import { readMigrationMarker } from './read-lease-source.js';
import type { TargetMirror } from './target-mirror.js';
import { createTargetMirror } from './target-mirror.js';

export interface MigrationRoutingOptions {
  readonly from: LeaseStore;
  readonly to: LeaseStore;
  readonly phaseRefreshMs: number;
  readonly mirrorTimeoutMs: number;
  readonly clock: Clock;
  readonly logger: Logger;
}

/**
 * What the three roles of a migrating store share: the phase as last read from the source's marker,
 * the leases known to be sealed (moved), the mirror to the target, and calls on both stores.
 */
export interface MigrationRouting {
  readonly from: LeaseStore;
  readonly to: LeaseStore;
  readonly phaseRefreshMs: number;
  readonly mirror: TargetMirror;
  /** The phase last read. */
  phase(): LiveMigrationPhase;
  /** The source's marker when it names another store (workers must stop), else null. */
  foreignMarker(): MigrationMarker | null;
  /** Reads the phase from the source's marker now (one read at a time, shared by concurrent callers). */
  readPhase(): Promise<LiveMigrationPhase>;
  /** The phase, read again when the last reading is too old. `strict`: fail rather than use a stale one. */
  currentPhase(strict: boolean): Promise<LiveMigrationPhase>;
  isSealed(leaseKey: string): boolean;
  markSealed(leaseKey: string): void;
  /** True when the source row of `leaseKey` is sealed (its lease lives in the target). */
  learnSeal(leaseKey: string, options?: StoreCallOptions): Promise<boolean>;
  /** A call to the secondary store: its answer within `mirrorTimeoutMs`, else null (logged). */
  secondary<T>(what: string, work: Promise<T>): Promise<T | null>;
  /**
   * Runs a call on both stores (registry calls, schema); the primary's outcome is the answer, the
   * other's is best effort and is waited for only until `mirrorTimeoutMs` after the call began, so a
   * hung secondary store never holds up heartbeats or the rebalancer's worker listing.
   */
  onBoth<T>(current: LiveMigrationPhase, run: (store: LeaseStore) => Promise<T>): Promise<[T, T | null]>;
  /** The store whose registry is authoritative in `current`. */
  primary(current: LiveMigrationPhase): LeaseStore;
}

export function createMigrationRouting(options: MigrationRoutingOptions): MigrationRouting {
  const { from, to, phaseRefreshMs, mirrorTimeoutMs, clock, logger } = options;
  let phase: LiveMigrationPhase = 'mirroring';
  let foreignMarker: MigrationMarker | null = null;
  let phaseReadAt = Number.NEGATIVE_INFINITY;
  let phaseRead: Promise<LiveMigrationPhase> | null = null;
  /**
   * Leases whose source row is sealed. A seal is permanent, so this is never forgotten; and it must
   * not be: a counter read from the target can equal the seal's counter in the source, so a write
   * for a moved lease must never be sent to the source again.
   */
  const sealed = new Set<string>();

  // The read is shared by every caller waiting for it, so it carries no caller's signal: one caller
  // giving up must not fail the others' reading (each caller's own call still ends on its signal).
  const readPhase = (): Promise<LiveMigrationPhase> => {
    phaseRead ??= (async () => {
      const started = clock.monotonicNow();
      try {
        const reading = readSourceMarker(await readMigrationMarker(from), to.description);
        if (reading.kind === 'foreign') {
          foreignMarker = reading.marker;
        } else {
          foreignMarker = null;
          // `complete` is final: from then on the source is never read again.
          if (phase !== 'complete') phase = reading.phase;
        }
        phaseReadAt = started;
        return phase;
      } finally {
        phaseRead = null;
      }
    })();
    return phaseRead;
  };

  const currentPhase = async (strict: boolean): Promise<LiveMigrationPhase> => {
    if (phase === 'complete') return phase;
    if (clock.monotonicNow() - phaseReadAt < phaseRefreshMs) return phase;
    try {
      return await readPhase();
    } catch (error) {
      if (strict) throw error;
      logger.warn('could not read the migration phase from the source; using the last one read', {
        phase,
        error,
      });
      return phase;
    }
  };

  const mirror = createTargetMirror({
    to,
    clock,
    mirrorTimeoutMs,
    logger,
    mayRepair: () => phase === 'mirroring' && clock.monotonicNow() - phaseReadAt < phaseRefreshMs,
  });

  const secondary = async <T>(what: string, work: Promise<T>): Promise<T | null> => {
    const deadline = startDeadline(clock, mirrorTimeoutMs);
    try {
      const outcome = await deadline.race(work);
      if (outcome !== TIMED_OUT) return outcome;
      logger.debug('a call to the secondary store timed out', { what });
      return null;
    } catch (error) {
      logger.debug('a call to the secondary store failed', { what, error });
      return null;
    } finally {
      deadline.cancel();
    }
  };

  const primary = (current: LiveMigrationPhase): LeaseStore =>
    current === 'target' || current === 'complete' ? to : from;

  return {
    from,
    to,
    phaseRefreshMs,
    mirror,
    phase: () => phase,
    foreignMarker: () => foreignMarker,
    readPhase,
    currentPhase,
    isSealed: (leaseKey) => sealed.has(leaseKey),
    markSealed: (leaseKey) => {
      sealed.add(leaseKey);
    },
    async learnSeal(leaseKey, callOptions) {
      const row = await from.leases.get(leaseKey, callOptions);
      if (row !== null && isSealedLease(row)) {
        sealed.add(leaseKey);
        return true;
      }
      return false;
    },
    secondary,
    async onBoth(current, run) {
      if (current === 'complete') return [await run(to), null];
      const main = primary(current);
      const other = main === to ? from : to;
      return Promise.all([run(main), secondary(`a registry call on ${other.description}`, run(other))]);
    },
    primary,
  };
}
