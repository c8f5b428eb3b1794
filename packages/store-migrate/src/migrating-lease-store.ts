import type {
  CheckpointUpdate,
  Clock,
  Lease,
  LeaseBatchWriteResult,
  LeaseInit,
  LeaseMetaUpdate,
  LeaseRenewal,
  LeaseStore,
  LeaseWriteResult,
  Logger,
  MigrationMarker,
  WorkerRecord,
} from '@kcl/core';
import { ConfigurationError, compareLeaseKeys, noopLogger, systemClock } from '@kcl/core';
import { startDeadline, TIMED_OUT } from './deadline.js';
import type { LiveMigrationPhase } from './migration-phase.js';
import {
  isSealedLease,
  MIGRATING_WORKER_METADATA,
  markerTag,
  PLACEHOLDER_COUNTER,
  readSourceMarker,
  SEAL_OWNER,
} from './migration-phase.js';
import { readMigrationMarker } from './read-lease-source.js';
import type { MirrorStatistics } from './target-mirror.js';
import { createTargetMirror } from './target-mirror.js';

export interface MigratingLeaseStoreOptions {
  /** The store the fleet uses now. Authoritative for every lease until that lease is moved. */
  readonly from: LeaseStore;
  /** The store the fleet moves to. Must be bound to the same application. */
  readonly to: LeaseStore;
  /**
   * The longest time a phase read from the source's marker is trusted (default 5,000 ms). Lease
   * ownership never depends on it (each lease's home is read from the source row itself); it bounds
   * how long `kcl-migrate cutover` waits between phases, and it is advertised in heartbeats so the
   * tool can see it.
   */
  readonly phaseRefreshMs?: number;
  /** How long a mirrored write to the target may take before the worker moves on (default 2,000 ms). */
  readonly mirrorTimeoutMs?: number;
  readonly clock?: Clock;
  readonly logger?: Logger;
}

/** A `LeaseStore` that moves a running fleet from one store to another; see the package README. */
export interface MigratingLeaseStore extends LeaseStore {
  readonly from: LeaseStore;
  readonly to: LeaseStore;
  /** The phase this store last read (it reads again when its reading is older than `phaseRefreshMs`). */
  phase(): LiveMigrationPhase;
  /** Reads the phase from the source's marker now. */
  refreshPhase(): Promise<LiveMigrationPhase>;
  mirrorStatistics(): MirrorStatistics;
}

const COMPONENT = '@kcl/store-migrate createMigratingLeaseStore';
const TAG_KEYS = new Set<string>(Object.values(MIGRATING_WORKER_METADATA));

type Phase = LiveMigrationPhase;

/**
 * A `LeaseStore` for a fleet that moves between stores without stopping.
 *
 * Every lease has one authoritative row: the source row until it is sealed (moved), the target row
 * after. Conditional writes go to the source unless this store already knows the row is sealed; a
 * sealed source row refuses them (its counter is one no worker was ever given), and the write is sent,
 * with the same counter, to the target, where the moved lease continues at exactly that counter. A
 * successful write on the source is mirrored to the target (best effort; the cut-over copies any lease
 * whose mirror lagged). The phase in the source's migration marker decides where new leases are
 * created and when the source is no longer read.
 */
export function createMigratingLeaseStore(options: MigratingLeaseStoreOptions): MigratingLeaseStore {
  const resolved = resolveOptions(options);
  const { from, to, phaseRefreshMs, mirrorTimeoutMs, clock, logger } = resolved;

  let phase: Phase = 'mirroring';
  let foreignMarker: MigrationMarker | null = null;
  let phaseReadAt = Number.NEGATIVE_INFINITY;
  let phaseRead: Promise<Phase> | null = null;
  /**
   * Leases whose source row is sealed. A seal is permanent, so this is never forgotten; and it must
   * not be: a counter read from the target can equal the seal's counter in the source, so a write
   * for a moved lease must never be sent to the source again.
   */
  const sealed = new Set<string>();

  const readPhase = (): Promise<Phase> => {
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

  /** The phase, read again when the last reading is too old. `strict`: fail rather than use a stale one. */
  const currentPhase = async (strict: boolean): Promise<Phase> => {
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

  /** True when the source row of `leaseKey` is sealed (its lease lives in the target). */
  const learnSeal = async (leaseKey: string): Promise<boolean> => {
    const row = await from.getLease(leaseKey);
    if (row !== null && isSealedLease(row)) {
      sealed.add(leaseKey);
      return true;
    }
    return false;
  };

  /** One conditional write, sent to the lease's authoritative row. */
  const conditional = async (
    operation: string,
    leaseKey: string,
    write: (store: LeaseStore) => Promise<LeaseWriteResult>,
  ): Promise<LeaseWriteResult> => {
    const current = await currentPhase(false);
    if (current === 'complete' || sealed.has(leaseKey)) return write(to);
    const result = await write(from);
    if (result.ok) {
      await mirror.write(operation, leaseKey, () => write(to), result.lease);
      return result;
    }
    if (await redirected(leaseKey, result.reason, current)) return write(to);
    return result;
  };

  /** After a lost write on the source: does the lease live in the target (so the write goes there)? */
  const redirected = async (
    leaseKey: string,
    reason: Extract<LeaseWriteResult, { ok: false }>['reason'],
    current: Phase,
  ): Promise<boolean> => {
    if (reason === 'counter-mismatch') return learnSeal(leaseKey);
    // From the target phase on, a lease absent from the source was created in the target directly.
    return reason === 'not-found' && current === 'target';
  };

  const tagged = (metadata: Readonly<Record<string, string>>, current: Phase): Record<string, string> => ({
    ...metadata,
    [MIGRATING_WORKER_METADATA.store]: 'migrating',
    [MIGRATING_WORKER_METADATA.phase]: current,
    [MIGRATING_WORKER_METADATA.phaseRefreshMs]: String(phaseRefreshMs),
  });

  const untagged = (worker: WorkerRecord): WorkerRecord => {
    if (!Object.keys(worker.metadata).some((key) => TAG_KEYS.has(key))) return worker;
    const metadata = Object.fromEntries(
      Object.entries(worker.metadata).filter(([key]) => !TAG_KEYS.has(key)),
    );
    return { ...worker, metadata: Object.freeze(metadata) };
  };

  /**
   * Runs a call on both stores (registry calls, schema); the primary's outcome is the answer, the
   * other's is best effort and is waited for only until `mirrorTimeoutMs` after the call began, so a
   * hung secondary store never holds up heartbeats or the rebalancer's worker listing.
   */
  /** A call to the secondary store: its answer within `mirrorTimeoutMs`, else null (logged). */
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

  const onBoth = async <T>(
    current: Phase,
    run: (store: LeaseStore) => Promise<T>,
  ): Promise<[T, T | null]> => {
    if (current === 'complete') return [await run(to), null];
    const [primaryStore, secondaryStore] = current === 'target' ? [to, from] : [from, to];
    return Promise.all([
      run(primaryStore),
      secondary(`a registry call on ${secondaryStore.description}`, run(secondaryStore)),
    ]);
  };

  const store: MigratingLeaseStore = {
    specificationVersion: 'v1',
    applicationName: from.applicationName,
    capabilities: Object.freeze({
      batchRenew: from.capabilities.batchRenew || to.capabilities.batchRenew,
      consistentReads: from.capabilities.consistentReads && to.capabilities.consistentReads,
    }),
    description: `migrating from ${from.description} to ${to.description}`,
    from,
    to,

    phase: () => phase,
    refreshPhase: () => readPhase(),
    mirrorStatistics: () => mirror.statistics(),

    async ensureSchema() {
      await onBoth(await currentPhase(true), (target) => target.ensureSchema());
    },

    async createLeaseIfAbsent(init: LeaseInit): Promise<LeaseWriteResult> {
      const current = await currentPhase(true);
      if (current === 'complete') return to.createLeaseIfAbsent(init);
      if (current === 'target') {
        // Creation is still decided in one place: a sealed placeholder in the source, so a worker
        // that has not seen the target phase yet cannot create a second lease with this key there.
        const placeholder = await from.createLeaseIfAbsent({
          ...init,
          owner: SEAL_OWNER,
          leaseCounter: PLACEHOLDER_COUNTER,
        });
        if (placeholder.ok) {
          sealed.add(init.leaseKey);
        } else if (!(await learnSeal(init.leaseKey))) {
          return placeholder; // an unmoved lease with this key exists in the source
        }
        return to.createLeaseIfAbsent(init);
      }
      const result = await from.createLeaseIfAbsent(init);
      if (result.ok && current === 'mirroring') {
        await mirror.write('create', init.leaseKey, () => to.createLeaseIfAbsent(init), result.lease);
      }
      return result;
    },

    async getLease(leaseKey) {
      const current = await currentPhase(false);
      if (current === 'complete' || sealed.has(leaseKey)) return to.getLease(leaseKey);
      const row = await from.getLease(leaseKey);
      if (row === null) return current === 'target' ? to.getLease(leaseKey) : null;
      if (isSealedLease(row)) {
        sealed.add(leaseKey);
        return to.getLease(leaseKey);
      }
      return row;
    },

    async listLeases() {
      const current = await currentPhase(false);
      if (current === 'complete') return to.listLeases();
      const rows = await from.listLeases();
      let anySealed = false;
      for (const row of rows) {
        if (isSealedLease(row)) {
          sealed.add(row.leaseKey);
          anySealed = true;
        }
      }
      if (!anySealed && current !== 'target') return rows;
      const moved = new Map((await to.listLeases()).map((lease) => [lease.leaseKey, lease]));
      const leases: Lease[] = [];
      const sourceKeys = new Set<string>();
      for (const row of rows) {
        sourceKeys.add(row.leaseKey);
        if (!isSealedLease(row)) leases.push(row);
        else {
          const lease = moved.get(row.leaseKey);
          if (lease !== undefined) leases.push(lease);
        }
      }
      if (current === 'target') {
        for (const lease of moved.values()) if (!sourceKeys.has(lease.leaseKey)) leases.push(lease);
      }
      return leases.sort((a, b) => compareLeaseKeys(a.leaseKey, b.leaseKey));
    },

    renewLease(leaseKey, leaseCounter) {
      return conditional('renew', leaseKey, (target) => target.renewLease(leaseKey, leaseCounter));
    },

    async renewLeases(renewals: readonly LeaseRenewal[]): Promise<LeaseBatchWriteResult[]> {
      const current = await currentPhase(false);
      if (current === 'complete') return to.renewLeases(renewals);
      const results = new Array<LeaseBatchWriteResult>(renewals.length);
      const onSource: number[] = [];
      const onTarget: number[] = [];
      renewals.forEach((renewal, index) => {
        (sealed.has(renewal.leaseKey) ? onTarget : onSource).push(index);
      });
      const pick = (indexes: readonly number[]) => indexes.map((index) => renewals[index] as LeaseRenewal);
      // Each store's batch stands on its own: a rejected call fails only the leases it carried, never
      // renewals the other store applied (a worker that dropped those would give up live leases).
      const [sourceBatch, targetBatch] = await Promise.allSettled([
        onSource.length === 0 ? [] : from.renewLeases(pick(onSource)),
        onTarget.length === 0 ? [] : to.renewLeases(pick(onTarget)),
      ]);
      const outcomeAt = (
        batch: PromiseSettledResult<LeaseBatchWriteResult[]>,
        position: number,
      ): LeaseBatchWriteResult =>
        batch.status === 'rejected'
          ? { ok: false, reason: 'failed', error: batch.reason }
          : (batch.value[position] ?? {
              ok: false,
              reason: 'failed',
              error: new Error(`${COMPONENT}: the store returned no result for this lease`),
            });
      onTarget.forEach((index, position) => {
        results[index] = outcomeAt(targetBatch, position);
      });
      const renewed: Lease[] = [];
      await Promise.all(
        onSource.map(async (index, position) => {
          const renewal = renewals[index] as LeaseRenewal;
          const result = outcomeAt(sourceBatch, position);
          if (result.ok) {
            renewed.push(result.lease);
            results[index] = result;
          } else if (result.reason === 'failed') {
            results[index] = result;
          } else {
            try {
              results[index] = (await redirected(renewal.leaseKey, result.reason, current))
                ? await to.renewLease(renewal.leaseKey, renewal.leaseCounter)
                : result;
            } catch (error) {
              results[index] = { ok: false, reason: 'failed', error };
            }
          }
        }),
      );
      if (renewed.length > 0) await mirror.renewals(renewed);
      return results;
    },

    takeLease(leaseKey, leaseCounter, owner) {
      return conditional('take', leaseKey, (target) => target.takeLease(leaseKey, leaseCounter, owner));
    },

    releaseLease(leaseKey, leaseCounter) {
      return conditional('release', leaseKey, (target) => target.releaseLease(leaseKey, leaseCounter));
    },

    updateCheckpoint(leaseKey, leaseCounter, update: CheckpointUpdate) {
      return conditional('checkpoint', leaseKey, (target) =>
        target.updateCheckpoint(leaseKey, leaseCounter, update),
      );
    },

    async updateLeaseMeta(leaseKey, update: LeaseMetaUpdate) {
      const current = await currentPhase(false);
      if (current === 'complete' || sealed.has(leaseKey)) return to.updateLeaseMeta(leaseKey, update);
      // Unconditional: on a sealed row it changes only the seal's copy of the facts, never ownership.
      const row = await from.updateLeaseMeta(leaseKey, update);
      if (row === null) return current === 'target' ? to.updateLeaseMeta(leaseKey, update) : null;
      if (isSealedLease(row)) {
        sealed.add(leaseKey);
        return to.updateLeaseMeta(leaseKey, update);
      }
      await mirror.write('meta', leaseKey, () => to.updateLeaseMeta(leaseKey, update), row);
      return row;
    },

    async deleteLease(leaseKey) {
      const current = await currentPhase(false);
      if (current === 'complete' || sealed.has(leaseKey)) {
        await to.deleteLease(leaseKey);
        return;
      }
      const row = await from.getLease(leaseKey);
      if (row !== null && isSealedLease(row)) {
        // The seal stays: it keeps this key's creation decided in the source during the migration.
        sealed.add(leaseKey);
        await to.deleteLease(leaseKey);
        return;
      }
      if (row !== null) await from.deleteLease(leaseKey);
      await mirror.write(
        'delete',
        leaseKey,
        async () => {
          await to.deleteLease(leaseKey);
          return undefined;
        },
        null,
      );
    },

    async heartbeatWorker(workerId, metadata = {}) {
      const current = await currentPhase(false);
      const [record] = await onBoth(current, (target) =>
        target.heartbeatWorker(workerId, tagged(metadata, current)),
      );
      return untagged(record);
    },

    async listWorkers() {
      const current = await currentPhase(false);
      const [primary, secondary] = await onBoth(current, (target) => target.listWorkers());
      const byId = new Map<string, WorkerRecord>();
      for (const worker of secondary ?? []) byId.set(worker.workerId, worker);
      for (const worker of primary) byId.set(worker.workerId, worker);
      return [...byId.values()].map(untagged).sort((a, b) => compareLeaseKeys(a.workerId, b.workerId));
    },

    async removeWorker(workerId) {
      await onBoth(await currentPhase(false), (target) => target.removeWorker(workerId));
    },

    async getMigrationMarker() {
      // Once complete, the source is never read again (it may be gone).
      if (phase !== 'complete') await readPhase();
      if (foreignMarker !== null) return foreignMarker;
      // While the source is authoritative the target's marker is our own guard (or, were the target
      // migrated onward meanwhile, news that can wait): a hung target must not stall the caller.
      const marker =
        phase === 'mirroring' || phase === 'cutover'
          ? await secondary('reading the target marker', to.getMigrationMarker())
          : await to.getMigrationMarker();
      // The target's guard marker keeps plain workers off it until the cut-over; it is not for us.
      return marker !== null && markerTag(marker.migratedTo) !== null ? null : marker;
    },

    setMigrationMarker(marker) {
      return to.setMigrationMarker(marker);
    },
  };
  return store;
}

function resolveOptions(options: MigratingLeaseStoreOptions) {
  const problems: string[] = [];
  const input = (options ?? {}) as Partial<MigratingLeaseStoreOptions>;
  const isStore = (value: unknown): value is LeaseStore =>
    typeof value === 'object' &&
    value !== null &&
    (value as Partial<LeaseStore>).specificationVersion === 'v1' &&
    typeof (value as Partial<LeaseStore>).takeLease === 'function';
  if (!isStore(input.from)) problems.push('from must be a LeaseStore (specificationVersion v1)');
  if (!isStore(input.to)) problems.push('to must be a LeaseStore (specificationVersion v1)');
  if (isStore(input.from) && isStore(input.to)) {
    if (input.from === input.to) problems.push('from and to must be different stores');
    if (input.from.applicationName !== input.to.applicationName) {
      problems.push(
        `from and to must be bound to the same application (from: ${JSON.stringify(input.from.applicationName)}, to: ${JSON.stringify(input.to.applicationName)})`,
      );
    }
  }
  const phaseRefreshMs = input.phaseRefreshMs ?? 5_000;
  if (!isPositiveInteger(phaseRefreshMs)) problems.push('phaseRefreshMs must be a positive integer');
  const mirrorTimeoutMs = input.mirrorTimeoutMs ?? 2_000;
  if (!isPositiveInteger(mirrorTimeoutMs)) problems.push('mirrorTimeoutMs must be a positive integer');
  const clock = input.clock ?? systemClock;
  if (typeof clock?.monotonicNow !== 'function' || typeof clock.sleep !== 'function') {
    problems.push('clock must implement now, monotonicNow and sleep (a Clock from @kcl/core)');
  }
  if (problems.length > 0) throw new ConfigurationError(COMPONENT, problems);
  return {
    from: input.from as LeaseStore,
    to: input.to as LeaseStore,
    phaseRefreshMs,
    mirrorTimeoutMs,
    clock,
    logger: input.logger ?? noopLogger,
  };
}

function isPositiveInteger(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value > 0;
}
