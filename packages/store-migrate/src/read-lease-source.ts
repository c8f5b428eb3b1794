import type { Lease, LeaseStore, MigrationMarker } from '@kcl/core';
import { LeaseStoreSchemaMissingError } from '@kcl/core';

/** A lease row the source could not read (only stores that can report such rows do). */
export interface UnreadableLeaseRow {
  readonly leaseKey: string;
  readonly problem: string;
}

/** What one read of a source found. */
export interface LeaseSourceSnapshot {
  /** The application's leases, in lease-key order. */
  readonly leases: Lease[];
  /** Rows that are not leases (KCL 3.x worker metrics, leader, migration state…), counted by type. */
  readonly skippedRowsByEntityType: Readonly<Record<string, number>>;
  readonly skippedRowCount: number;
  /** Lease rows that cannot be read. Copying them is impossible; they are reported instead. */
  readonly unreadableRows: readonly UnreadableLeaseRow[];
}

/**
 * The optional reading a store may offer beyond `LeaseStore` (as `@kcl/store-dynamo` does for Java KCL
 * tables): the leases together with the rows it skipped and the rows it could not read.
 */
interface SummarizingStore {
  scanSummary(options: { readonly invalidRows: 'collect' }): Promise<{
    readonly leases: Lease[];
    readonly skippedRowCount: number;
    readonly skippedRowsByEntityType: Readonly<Record<string, number>>;
    readonly invalidRows: readonly UnreadableLeaseRow[];
  }>;
}

function canSummarize(store: LeaseStore): store is LeaseStore & SummarizingStore {
  return typeof (store as Partial<SummarizingStore>).scanSummary === 'function';
}

/**
 * Reads every lease of the source. A store that can summarize its table (a DynamoDB table the Java KCL
 * 2.x or 3.x wrote) also reports the non-lease rows it skipped and the lease rows it cannot read;
 * any other store reports none.
 */
export async function readLeaseSource(store: LeaseStore): Promise<LeaseSourceSnapshot> {
  if (canSummarize(store)) {
    const summary = await store.scanSummary({ invalidRows: 'collect' });
    return {
      leases: summary.leases,
      skippedRowsByEntityType: summary.skippedRowsByEntityType,
      skippedRowCount: summary.skippedRowCount,
      unreadableRows: summary.invalidRows,
    };
  }
  return {
    leases: await store.listLeases(),
    skippedRowsByEntityType: {},
    skippedRowCount: 0,
    unreadableRows: [],
  };
}

/** The store's migration marker; null also when the store's tables do not exist yet. */
export async function readMigrationMarker(store: LeaseStore): Promise<MigrationMarker | null> {
  try {
    return await store.getMigrationMarker();
  } catch (error) {
    if (error instanceof LeaseStoreSchemaMissingError) return null;
    throw error;
  }
}

/** The store's leases; empty when its tables do not exist yet (`schemaMissing` says so). */
export async function readLeasesIfPresent(
  store: LeaseStore,
): Promise<{ readonly leases: Lease[]; readonly schemaMissing: boolean }> {
  try {
    return { leases: await store.listLeases(), schemaMissing: false };
  } catch (error) {
    if (error instanceof LeaseStoreSchemaMissingError) return { leases: [], schemaMissing: true };
    throw error;
  }
}
