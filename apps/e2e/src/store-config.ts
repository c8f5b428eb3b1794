import type { LeaseStore } from '@kcl/core';
import { createMigratingLeaseStore } from '@kcl/store-migrate';
import { type LeaseStoreLocation, openLeaseStore } from '@kcl/stores';

/**
 * Which lease store a worker process uses: a location as `openLeaseStore` takes it, or a live migration
 * between two. Plain data: it crosses process boundaries.
 */
export type StoreConfig = LeaseStoreLocation | MigratingStoreConfig;

/** A worker running a live migration from one store to another (`createMigratingLeaseStore`). */
export interface MigratingStoreConfig {
  readonly kind: 'migrating';
  readonly from: LeaseStoreLocation;
  readonly to: LeaseStoreLocation;
  readonly phaseRefreshMs?: number;
  readonly mirrorTimeoutMs?: number;
}

export interface OpenedStore {
  readonly store: LeaseStore;
  /** Closes what was opened for the store: both stores of a migration. */
  close(): Promise<void>;
}

/** Opens the lease store a config names, for one application. */
export async function openStore(config: StoreConfig, applicationName: string): Promise<OpenedStore> {
  if (config.kind !== 'migrating') {
    const store = await openLeaseStore(config, { applicationName });
    return { store, close: () => store.close() };
  }
  // The migrating store leaves both stores to its caller: closing it closes neither.
  const [from, to] = await Promise.all([
    openLeaseStore(config.from, { applicationName }),
    openLeaseStore(config.to, { applicationName }),
  ]);
  const store = createMigratingLeaseStore({
    from,
    to,
    ...(config.phaseRefreshMs === undefined ? {} : { phaseRefreshMs: config.phaseRefreshMs }),
    ...(config.mirrorTimeoutMs === undefined ? {} : { mirrorTimeoutMs: config.mirrorTimeoutMs }),
  });
  return {
    store,
    close: async () => {
      await store.close();
      await Promise.all([from.close(), to.close()]);
    },
  };
}
