import type { LeaseRenewal } from '@kcl/core';
import type { RawBuilder } from 'kysely';
import { MysqlAdapter, PostgresAdapter, SqliteAdapter } from 'kysely';
import type { LeaseRowValues, WorkerRowValues } from './sql-lease-row.js';
import type { SqlLeaseTableNames } from './sql-table-names.js';
import type { AnyKysely, SqlRow } from './sql-types.js';

/**
 * The SQL dialects the store speaks. `mysql` covers MySQL 8 and MariaDB (10.5 or later): it uses
 * no `RETURNING`, which MySQL lacks entirely and MariaDB lacks for `UPDATE`.
 */
export type SqlFlavorName = 'postgres' | 'mysql' | 'sqlite';

export const SQL_FLAVOR_NAMES: readonly SqlFlavorName[] = ['postgres', 'mysql', 'sqlite'];

/** One UPDATE of one lease row. */
export interface LeaseUpdate {
  readonly applicationName: string;
  readonly leaseKey: string;
  /** The counter the caller last saw (the fence), or null for an unconditional update. */
  readonly leaseCounter: number | null;
  /** The `column = expression` assignments, in an order that is safe for MySQL (see the store). */
  readonly assignments: readonly RawBuilder<unknown>[];
  /** A further condition on the row beside the counter (the hand-off calls' owner and hand-off state). */
  readonly condition?: RawBuilder<unknown>;
}

export type LeaseUpdateOutcome =
  | { readonly updated: true; readonly row: SqlRow }
  | {
      readonly updated: false;
      /** Whether the lease exists, when the flavor learned it at no extra cost; undefined otherwise. */
      readonly exists: boolean | undefined;
      /**
       * The row as it stood when the update did not apply (null: absent), when the flavor read it in
       * the same transaction; undefined otherwise.
       */
      readonly current?: SqlRow | null;
    };

export interface LeaseBatchRenewOutcome {
  /** The renewed rows, as stored after the renewal. */
  readonly renewed: readonly SqlRow[];
  /** The keys that exist, when the flavor learned them at no extra cost; undefined otherwise. */
  readonly existingKeys: ReadonlySet<string> | undefined;
}

/** Whose session locks a call is about: one application's workers in one set of lease tables. */
export interface SqlSessionScope {
  readonly tables: SqlLeaseTableNames;
  readonly applicationName: string;
}

/** A worker's session lock, held by the connection it was taken on. */
export interface SqlSessionHandle {
  /** Names the lock and the database session holding it, for messages: `advisory lock (…) of backend 123`. */
  readonly label: string;
  /** On the session's connection: whether it still holds the lock (one statement). */
  holds(): Promise<boolean>;
  /** On the session's connection: releases the lock; false when it held none. */
  unlock(): Promise<boolean>;
  /** On the session's connection: makes the server end the session (and so release the lock). */
  endSession(): Promise<void>;
}

/** Worker sessions: a lock per (tables, application, worker) that the database drops with the session. */
export interface SqlSessionFlavor {
  /**
   * Takes `workerId`'s session lock on `connection` without waiting: its handle, or null when another
   * session holds it.
   */
  lock(connection: AnyKysely, scope: SqlSessionScope, workerId: string): Promise<SqlSessionHandle | null>;
  /** Which of `workerIds` (distinct) have their lock held by some session, in one statement per chunk. */
  live(db: AnyKysely, scope: SqlSessionScope, workerIds: readonly string[]): Promise<ReadonlySet<string>>;
}

/**
 * Everything that differs between the SQL dialects, one implementation per dialect. Statements every
 * dialect writes the same way live in `sql-statements.ts`.
 */
export interface SqlFlavor {
  readonly name: SqlFlavorName;
  /** The database's name for descriptions and messages, e.g. `PostgreSQL`. */
  readonly label: string;
  /** The body of schema migration 0001: creates the three lease tables unless they exist. */
  createTables(db: AnyKysely, tables: SqlLeaseTableNames): Promise<void>;
  /** The body of schema migration 0002: adds the lease columns of contract v2 the table lacks. */
  upgradeTables(db: AnyKysely, tables: SqlLeaseTableNames): Promise<void>;
  /** Inserts the lease unless a lease with its key exists: the stored row, or null when one existed. */
  insertLease(db: AnyKysely, tables: SqlLeaseTableNames, values: LeaseRowValues): Promise<SqlRow | null>;
  /** Updates one lease, fenced by its counter unless the update is unconditional. */
  updateLease(db: AnyKysely, tables: SqlLeaseTableNames, update: LeaseUpdate): Promise<LeaseUpdateOutcome>;
  /** Increments the counters of every lease whose counter matches, in one UPDATE statement. */
  renewLeases(
    db: AnyKysely,
    tables: SqlLeaseTableNames,
    applicationName: string,
    renewals: readonly LeaseRenewal[],
  ): Promise<LeaseBatchRenewOutcome>;
  /**
   * Registers the worker or increments its heartbeat, atomically, replacing the metadata unless
   * `values.metadata` is null: the `heartbeat` and `metadata` columns as stored by this write.
   */
  heartbeatWorker(db: AnyKysely, tables: SqlLeaseTableNames, values: WorkerRowValues): Promise<SqlRow>;
  /** Session locks (null: the dialect has no sessions, as SQLite). */
  readonly sessions: SqlSessionFlavor | null;
  /** Sets the application's migration marker, creating its state row when needed. */
  setMigrationMarker(
    db: AnyKysely,
    tables: SqlLeaseTableNames,
    applicationName: string,
    migratedTo: string,
    migratedAtMs: number,
  ): Promise<void>;
}

export interface SqlFlavorDetection {
  readonly flavor: SqlFlavorName | null;
  /** The adapter's class name, for the message when detection fails. */
  readonly adapterName: string;
}

const ADAPTER_NAMES: Readonly<Record<string, SqlFlavorName>> = {
  PostgresAdapter: 'postgres',
  MysqlAdapter: 'mysql',
  SqliteAdapter: 'sqlite',
};

/**
 * The flavor of a Kysely instance, from its dialect adapter: Kysely's own Postgres, MySQL and SQLite
 * dialects, and third-party dialects built on their adapters (postgres.js, libSQL and the like).
 */
export function detectSqlFlavor(db: AnyKysely): SqlFlavorDetection {
  const adapter: unknown = db.getExecutor().adapter;
  const adapterName = (adapter as { constructor?: { name?: string } })?.constructor?.name ?? 'unknown';
  if (adapter instanceof PostgresAdapter) return { flavor: 'postgres', adapterName };
  if (adapter instanceof MysqlAdapter) return { flavor: 'mysql', adapterName };
  if (adapter instanceof SqliteAdapter) return { flavor: 'sqlite', adapterName };
  // A second copy of kysely in node_modules breaks instanceof; the class names still tell.
  let prototype: unknown =
    adapter === null || typeof adapter !== 'object' ? null : Object.getPrototypeOf(adapter);
  while (prototype !== null && prototype !== Object.prototype) {
    const name = (prototype as { constructor?: { name?: string } }).constructor?.name;
    if (name !== undefined && Object.hasOwn(ADAPTER_NAMES, name)) {
      return { flavor: ADAPTER_NAMES[name] ?? null, adapterName };
    }
    prototype = Object.getPrototypeOf(prototype);
  }
  return { flavor: null, adapterName };
}
