import type { StoreCallOptions, WorkerRecord, WorkerRegistry } from '@kcl/core';
import { compareLeaseKeys } from '@kcl/core';
import type { LiveMigrationPhase } from './migration-phase.js';
import { MIGRATING_WORKER_METADATA } from './migration-phase.js';
import type { MigrationRouting } from './migration-routing.js';

type Metadata = Readonly<Record<string, string>>;

const TAG_KEYS = new Set<string>(Object.values(MIGRATING_WORKER_METADATA));

function withoutTags(metadata: Metadata): Metadata {
  if (!Object.keys(metadata).some((key) => TAG_KEYS.has(key))) return metadata;
  return Object.freeze(Object.fromEntries(Object.entries(metadata).filter(([key]) => !TAG_KEYS.has(key))));
}

function untagged(worker: WorkerRecord): WorkerRecord {
  const metadata = withoutTags(worker.metadata);
  return metadata === worker.metadata ? worker : { ...worker, metadata };
}

/**
 * The worker registry of a migrating store: heartbeats go to both registries (the primary one
 * answers; see `MigrationRouting.onBoth`), tagged so `kcl-migrate` can see which workers run the
 * migrating store, in which phase; the tags are removed from everything it returns.
 */
export function createMigratingWorkers(routing: MigrationRouting): WorkerRegistry {
  /**
   * The metadata each worker last gave (without tags). Every heartbeat must write the tags (the phase
   * changes), so a heartbeat without metadata cannot simply leave the stored metadata alone as the
   * contract's stores do; it writes the last metadata again, with fresh tags.
   */
  const given = new Map<string, Metadata>();

  /** The metadata the primary registry holds for a worker that has not given any to this store. */
  const storedMetadata = async (
    current: LiveMigrationPhase,
    workerId: string,
    options: StoreCallOptions | undefined,
  ): Promise<Metadata> => {
    const workers = await routing.primary(current).workers.list(options);
    const stored = workers.find((worker) => worker.workerId === workerId);
    return stored === undefined ? {} : withoutTags(stored.metadata);
  };

  const tagged = (metadata: Metadata, current: LiveMigrationPhase): Record<string, string> => ({
    ...metadata,
    [MIGRATING_WORKER_METADATA.store]: 'migrating',
    [MIGRATING_WORKER_METADATA.phase]: current,
    [MIGRATING_WORKER_METADATA.phaseRefreshMs]: String(routing.phaseRefreshMs),
  });

  return {
    async heartbeat(workerId, metadata, options) {
      const current = await routing.currentPhase(false);
      let base = metadata === undefined ? given.get(workerId) : withoutTags(metadata);
      if (base === undefined) base = await storedMetadata(current, workerId, options);
      given.set(workerId, base);
      const [record] = await routing.onBoth(current, (store) =>
        store.workers.heartbeat(workerId, tagged(base, current), options),
      );
      return untagged(record);
    },

    async list(options) {
      const current = await routing.currentPhase(false);
      const [primary, secondary] = await routing.onBoth(current, (store) => store.workers.list(options));
      const byId = new Map<string, WorkerRecord>();
      for (const worker of secondary ?? []) byId.set(worker.workerId, worker);
      for (const worker of primary) byId.set(worker.workerId, worker);
      return [...byId.values()].map(untagged).sort((a, b) => compareLeaseKeys(a.workerId, b.workerId));
    },

    async remove(workerId, options) {
      given.delete(workerId);
      await routing.onBoth(await routing.currentPhase(false), (store) =>
        store.workers.remove(workerId, options),
      );
    },
  };
}
