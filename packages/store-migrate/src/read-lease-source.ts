import type { Lease, LeaseStore, MigrationMarker, StoreCallOptions, UnreadableLeaseRow } from '@kcl/core';
import { isKclError } from '@kcl/core';

/** A lease row the source could not read (`admin.scan()` reports them). */
export type { UnreadableLeaseRow } from '@kcl/core';

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
 * Reads every lease of the source with `admin.scan()`, so rows that cannot be read are reported
 * instead of silently missing (`leases.list()` skips them), and the rows that are not leases at all (a
 * DynamoDB table the Java KCL 3.x wrote) are counted, in the same one scan.
 */
export async function readLeaseSource(
  store: LeaseStore,
  options?: StoreCallOptions,
): Promise<LeaseSourceSnapshot> {
  const scan = await store.admin.scan(options);
  const otherRows = scan.otherRows ?? {};
  return {
    leases: [...scan.leases],
    skippedRowsByEntityType: otherRows,
    skippedRowCount: Object.values(otherRows).reduce((sum, count) => sum + count, 0),
    unreadableRows: scan.unreadable,
  };
}

/** True for the error a store raises when its tables do not exist yet. */
export function isSchemaMissing(error: unknown): boolean {
  return isKclError(error, 'LEASE_STORE_SCHEMA_MISSING');
}

/** The store's migration marker; null also when the store's tables do not exist yet. */
export async function readMigrationMarker(
  store: LeaseStore,
  options?: StoreCallOptions,
): Promise<MigrationMarker | null> {
  try {
    return await store.admin.getMigrationMarker(options);
  } catch (error) {
    if (isSchemaMissing(error)) return null;
    throw error;
  }
}

/**
 * The store's leases, read with `admin.scan()`; empty when its tables do not exist yet
 * (`schemaMissing` says so). `unreadable` lists the rows that exist but cannot be read.
 */
export async function readLeasesIfPresent(
  store: LeaseStore,
  options?: StoreCallOptions,
): Promise<{
  readonly leases: Lease[];
  readonly unreadable: readonly UnreadableLeaseRow[];
  readonly schemaMissing: boolean;
}> {
  try {
    const scan = await store.admin.scan(options);
    return { leases: [...scan.leases], unreadable: scan.unreadable, schemaMissing: false };
  } catch (error) {
    if (isSchemaMissing(error)) return { leases: [], unreadable: [], schemaMissing: true };
    throw error;
  }
}
