/** The tables one lease store uses, all named after the lease table. */
export interface SqlLeaseTableNames {
  /** One row per lease: primary key (application_name, lease_key). */
  readonly leases: string;
  /** The worker registry: primary key (application_name, worker_id). */
  readonly workers: string;
  /** Per-application state (the migration marker): primary key application_name. */
  readonly applications: string;
  /** Kysely's migration bookkeeping for these tables (never Kysely's default `kysely_migration`). */
  readonly migration: string;
  /** Kysely's migration lock for these tables. */
  readonly migrationLock: string;
}

/**
 * Longest lease table name. PostgreSQL truncates identifiers longer than 63 bytes and MySQL refuses
 * more than 64 characters; the longest derived name, `<name>_applications_pkey`, adds 18.
 */
export const MAX_TABLE_NAME_LENGTH = 45;

/**
 * A plain, lowercase identifier. Lowercase because PostgreSQL folds unquoted names to lowercase and
 * MySQL table names are case-insensitive on some file systems: a lowercase name means the same table
 * whether or not a hand-written script quotes it.
 */
export const TABLE_NAME_PATTERN = new RegExp(`^[a-z_][a-z0-9_]{0,${MAX_TABLE_NAME_LENGTH - 1}}$`);

/** The names of every table of a lease store whose lease table is `tableName`. */
export function sqlLeaseTableNames(tableName: string): SqlLeaseTableNames {
  return Object.freeze({
    leases: tableName,
    workers: `${tableName}_workers`,
    applications: `${tableName}_applications`,
    migration: `${tableName}_migration`,
    migrationLock: `${tableName}_migration_lock`,
  });
}
