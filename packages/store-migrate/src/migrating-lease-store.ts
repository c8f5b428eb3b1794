import type { Clock, LeaseStore, LeaseStoreAdministration, Logger } from '@kcl/core';
import { noopLogger, OptionProblems, systemClock } from '@kcl/core';
import { guardedStore } from './guarded-store.js';
import { createMigratingLeases, scanMigratingLeases } from './migrating-leases.js';
import { createMigratingWorkers } from './migrating-workers.js';
import type { LiveMigrationPhase } from './migration-phase.js';
import { markerTag } from './migration-phase.js';
import type { MigrationRouting } from './migration-routing.js';
import { createMigrationRouting } from './migration-routing.js';
import type { MirrorStatistics } from './target-mirror.js';

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
  /** The source store, as given. */
  readonly from: LeaseStore;
  /** The target store, as given. */
  readonly to: LeaseStore;
  /** The phase this store last read (it reads again when its reading is older than `phaseRefreshMs`). */
  phase(): LiveMigrationPhase;
  /** Reads the phase from the source's marker now. */
  refreshPhase(): Promise<LiveMigrationPhase>;
  mirrorStatistics(): MirrorStatistics;
}

const COMPONENT = '@kcl/store-migrate createMigratingLeaseStore';

/**
 * A `LeaseStore` (contract v2) for a fleet that moves between stores without stopping: `leases` are
 * routed lease by lease to their authoritative row (see `createMigratingLeases`), `workers` heartbeat
 * in both registries (see `createMigratingWorkers`), and `admin` reads the phase from the source's
 * migration marker, which decides where new leases are created and when the source is no longer read.
 *
 * Session liveness and transactional checkpoints are off (`capabilities.sessionLiveness` and
 * `capabilities.transactionalCheckpoint` false), whatever the two stores offer.
 *
 * Both stores stay the caller's: `close()` closes neither (the caller that opened them closes them,
 * after the worker using this store has stopped).
 */
export function createMigratingLeaseStore(options: MigratingLeaseStoreOptions): MigratingLeaseStore {
  const resolved = resolveOptions(options);
  const routing = createMigrationRouting(resolved);
  const { from, to } = routing;
  return {
    specificationVersion: 'v2',
    applicationName: from.applicationName,
    capabilities: Object.freeze({
      batchRenew: from.capabilities.batchRenew || to.capabilities.batchRenew,
      consistentReads: from.capabilities.consistentReads && to.capabilities.consistentReads,
      // A worker's session would have to live in the store that is authoritative for its leases, which
      // changes during the migration: workers fall back to lease expiry until they run on the new store.
      sessionLiveness: false,
      // A lease's checkpoint lives in whichever store is authoritative for it, and the application's
      // writes in one database: no transaction spans both, so exactly-once waits for the migration's end.
      transactionalCheckpoint: false,
    }),
    description: `migrating from ${from.description} to ${to.description}`,
    from: resolved.given.from,
    to: resolved.given.to,
    leases: createMigratingLeases(routing),
    workers: createMigratingWorkers(routing),
    admin: createMigratingAdministration(routing),
    phase: () => routing.phase(),
    refreshPhase: () => routing.readPhase(),
    mirrorStatistics: () => routing.mirror.statistics(),
    async close() {},
  };
}

function createMigratingAdministration(routing: MigrationRouting): LeaseStoreAdministration {
  const { to } = routing;
  return {
    async ensureSchema(options) {
      await routing.onBoth(await routing.currentPhase(true), (store) => store.admin.ensureSchema(options));
    },

    async getMigrationMarker(options) {
      // Once complete, the source is never read again (it may be gone).
      if (routing.phase() !== 'complete') await routing.readPhase();
      const foreign = routing.foreignMarker();
      if (foreign !== null) return foreign;
      // While the source is authoritative the target's marker is our own guard (or, were the target
      // migrated onward meanwhile, news that can wait): a hung target must not stall the caller.
      const phase = routing.phase();
      const marker =
        phase === 'mirroring' || phase === 'cutover'
          ? await routing.secondary('reading the target marker', to.admin.getMigrationMarker(options))
          : await to.admin.getMigrationMarker(options);
      // The target's guard marker keeps plain workers off it until the cut-over; it is not for us.
      return marker !== null && markerTag(marker.migratedTo) !== null ? null : marker;
    },

    setMigrationMarker(marker, options) {
      return to.admin.setMigrationMarker(marker, options);
    },

    scan: (options) => scanMigratingLeases(routing, options),
  };
}

function resolveOptions(options: MigratingLeaseStoreOptions) {
  const check = new OptionProblems(COMPONENT);
  const input = (options ?? {}) as Partial<MigratingLeaseStoreOptions>;
  const from = guardedStore(check, 'from', input.from);
  const to = guardedStore(check, 'to', input.to);
  if (from !== null && to !== null) {
    if (input.from === input.to) check.add('from and to must be different stores');
    if (from.applicationName !== to.applicationName) {
      check.add(
        `from and to must be bound to the same application (from: ${JSON.stringify(from.applicationName)}, to: ${JSON.stringify(to.applicationName)})`,
      );
    }
  }
  const phaseRefreshMs = check.integer('phaseRefreshMs', input.phaseRefreshMs, 5_000, { min: 1 });
  const mirrorTimeoutMs = check.integer('mirrorTimeoutMs', input.mirrorTimeoutMs, 2_000, { min: 1 });
  const clock = check.clock('clock', input.clock, systemClock);
  const logger = check.logger('logger', input.logger, noopLogger);
  check.throwIfAny();
  return {
    from: from as LeaseStore,
    to: to as LeaseStore,
    given: { from: input.from as LeaseStore, to: input.to as LeaseStore },
    phaseRefreshMs,
    mirrorTimeoutMs,
    clock,
    logger,
  };
}
