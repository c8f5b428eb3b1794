import type { LeaseStore } from '@kcl/core';
import { createMemoryLeaseStore, MemoryLeaseTable } from '@kcl/testkit';
import { describeLeaseStoreConformance } from '@kcl/testkit/conformance';
import type { LiveMigrationPhase } from '../src/index.js';
import { createMigratingLeaseStore, phaseMarkerText } from '../src/index.js';

// The migrating store is a LeaseStore like any other: the shared suite runs against it in every
// phase, over two memory stores (source and target).

function harnessFor(phase: LiveMigrationPhase) {
  return async () => {
    const source = new MemoryLeaseTable();
    const target = new MemoryLeaseTable();
    return {
      async createStore(applicationName: string): Promise<LeaseStore> {
        const from = createMemoryLeaseStore({ applicationName, table: source });
        const to = createMemoryLeaseStore({ applicationName, table: target });
        if (phase !== 'mirroring') {
          await from.admin.setMigrationMarker({
            migratedTo: phaseMarkerText(to.description, phase),
            migratedAt: new Date(0),
          });
        }
        return createMigratingLeaseStore({ from, to });
      },
    };
  };
}

for (const phase of ['mirroring', 'cutover', 'target', 'complete'] as const) {
  describeLeaseStoreConformance({ name: `migrating store, phase ${phase}`, setup: harnessFor(phase) });
}
