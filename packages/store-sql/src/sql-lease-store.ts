import type {
  CheckpointUpdate,
  ExtendedSequenceNumber,
  Lease,
  LeaseInit,
  LeaseMetaUpdate,
  LeaseRenewal,
  LeaseStore,
  LeaseWriteResult,
  MigrationMarker,
  WorkerRecord,
} from '@kcl/core';
import { KclError, leaseFromInit } from '@kcl/core';
import type { RawBuilder } from 'kysely';
import { sql } from 'kysely';
import { mysqlFlavor } from './mysql/mysql-flavor.js';
import { postgresFlavor } from './postgres/postgres-flavor.js';
import { invalidArgument, isWriteConflict, toLeaseStoreError } from './sql-errors.js';
import type { SqlFlavor, SqlFlavorName } from './sql-flavor.js';
import type { SqlRow } from './sql-lease-row.js';
import {
  leaseFromRow,
  leaseToRowValues,
  metadataToJson,
  migrationMarkerFromRow,
  shardIdsToJson,
  workerFromRow,
} from './sql-lease-row.js';
import type { SqlLeaseStoreOptions } from './sql-lease-store-options.js';
import { codePointLength, PACKAGE_NAME, resolveSqlLeaseStoreOptions } from './sql-lease-store-options.js';
import {
  ensureLeaseSchema,
  MAX_LEASE_KEY_LENGTH,
  MAX_SEQUENCE_NUMBER_LENGTH,
  MAX_WORKER_ID_LENGTH,
} from './sql-schema.js';
import { leaseColumnList, selectExistingLeaseKeys, selectLease } from './sql-statements.js';
import type { SqlLeaseTableNames } from './sql-table-names.js';
import { sqliteFlavor } from './sqlite/sqlite-flavor.js';

/** A `LeaseStore` on a SQL database, with what it runs on. */
export interface SqlLeaseStore extends LeaseStore {
  readonly flavor: SqlFlavorName;
  readonly tableNames: SqlLeaseTableNames;
}

const FLAVORS: Readonly<Record<SqlFlavorName, SqlFlavor>> = {
  postgres: postgresFlavor,
  mysql: mysqlFlavor,
  sqlite: sqliteFlavor,
};

/** Renewals per UPDATE statement in `renewLeases`; keeps the parameter count far below every limit. */
export const MAX_RENEWALS_PER_STATEMENT = 1_000;

/** A deadlock or serialization failure rolls the statement back whole; run it again this many times. */
const CONFLICT_ATTEMPTS = 3;

/**
 * A `LeaseStore` on PostgreSQL, MySQL/MariaDB or SQLite through Kysely. Many applications share the
 * tables; this store reads and writes only the rows of `applicationName`.
 *
 * Every conditional write is one UPDATE fenced by `lease_counter` (see the flavor modules for what
 * that costs per dialect); only a lost race reads again, to tell `not-found` from `counter-mismatch`.
 */
export function createSqlLeaseStore(options: SqlLeaseStoreOptions): SqlLeaseStore {
  const resolved = resolveSqlLeaseStoreOptions(options);
  const { applicationName, tableNames: tables, clock } = resolved;
  // The store's SQL names every column itself; a user's plugins (CamelCasePlugin, say) must not
  // rewrite it.
  const db = resolved.db.withoutPlugins();
  const flavor = FLAVORS[resolved.flavor];
  const description = `${flavor.label} table "${tables.leases}" (application ${JSON.stringify(applicationName)})`;
  const store = `${PACKAGE_NAME} (${description})`;

  const run = async <T>(operation: string, body: () => Promise<T>): Promise<T> => {
    for (let attempt = 1; ; attempt++) {
      try {
        return await body();
      } catch (error) {
        if (error instanceof KclError) throw error;
        if (attempt < CONFLICT_ATTEMPTS && isWriteConflict(error)) continue;
        throw toLeaseStoreError(error, { store, operation, tables });
      }
    }
  };

  const leaseExists = async (leaseKey: string): Promise<boolean> => {
    const { rows } = await selectExistingLeaseKeys(tables, applicationName, [leaseKey]).execute(db);
    return rows.length > 0;
  };

  const conditionalUpdate = (
    operation: string,
    leaseKey: string,
    leaseCounter: number,
    assignments: readonly RawBuilder<unknown>[],
  ): Promise<LeaseWriteResult> =>
    run(`${operation} lease ${JSON.stringify(leaseKey)}`, async () => {
      if (Number.isSafeInteger(leaseCounter)) {
        const outcome = await flavor.updateLease(db, tables, {
          applicationName,
          leaseKey,
          leaseCounter,
          assignments,
        });
        if (outcome.updated) return { ok: true, lease: leaseFromRow(outcome.row, store) };
        if (outcome.exists !== undefined) {
          return { ok: false, reason: outcome.exists ? 'counter-mismatch' : 'not-found' };
        }
      }
      return { ok: false, reason: (await leaseExists(leaseKey)) ? 'counter-mismatch' : 'not-found' };
    });

  const checkKey = (what: string, value: unknown, maxLength: number): void => {
    if (typeof value !== 'string') throw invalidArgument(store, `${what} must be a string`);
    if (codePointLength(value) > maxLength) {
      throw invalidArgument(
        store,
        `${what} ${JSON.stringify(value.slice(0, 40))}… is longer than ${maxLength} characters, the length of its column`,
      );
    }
    if (value.includes('\u0000')) throw invalidArgument(store, `${what} must not contain the NUL character`);
  };

  const checkPosition = (what: string, position: ExtendedSequenceNumber | null | undefined): void => {
    if (
      position !== null &&
      position !== undefined &&
      position.sequenceNumber.length > MAX_SEQUENCE_NUMBER_LENGTH
    ) {
      throw invalidArgument(
        store,
        `the ${what} sequence number is longer than ${MAX_SEQUENCE_NUMBER_LENGTH} digits`,
      );
    }
  };

  const checkCount = (what: string, value: number): void => {
    if (!Number.isSafeInteger(value) || value < 0) {
      throw invalidArgument(store, `${what} must be a non-negative integer, got ${String(value)}`);
    }
  };

  const positionAssignments = (update: CheckpointUpdate): RawBuilder<unknown>[] => {
    const pending = update.pendingCheckpoint ?? null;
    return [
      assign('checkpoint_sequence_number', update.checkpoint.sequenceNumber),
      assign('checkpoint_sub_sequence_number', update.checkpoint.subSequenceNumber),
      assign('pending_checkpoint_sequence_number', pending?.sequenceNumber ?? null),
      assign('pending_checkpoint_sub_sequence_number', pending?.subSequenceNumber ?? null),
    ];
  };

  const getLease = (leaseKey: string): Promise<Lease | null> =>
    run(`reading lease ${JSON.stringify(leaseKey)}`, async () => {
      const { rows } = await selectLease(tables, applicationName, leaseKey).execute(db);
      const row = rows[0];
      return row === undefined ? null : leaseFromRow(row, store);
    });

  return {
    specificationVersion: 'v1',
    applicationName,
    // MySQL needs four round trips for a batch (begin, locking read, update, commit), still one
    // UPDATE statement and a constant number of round trips for any number of leases.
    capabilities: { batchRenew: true, consistentReads: true },
    description,
    flavor: flavor.name,
    tableNames: tables,

    ensureSchema: () => ensureLeaseSchema(db, flavor, tables, store),

    async createLeaseIfAbsent(init: LeaseInit) {
      checkKey('the lease key', init.leaseKey, MAX_LEASE_KEY_LENGTH);
      if (init.owner !== undefined && init.owner !== null)
        checkKey('the owner', init.owner, MAX_WORKER_ID_LENGTH);
      checkPosition('checkpoint', init.checkpoint);
      checkPosition('pending checkpoint', init.pendingCheckpoint);
      const lease = leaseFromInit(init);
      checkCount('leaseCounter', lease.leaseCounter);
      checkCount('ownerSwitchesSinceCheckpoint', lease.ownerSwitchesSinceCheckpoint);
      return run(`creating lease ${JSON.stringify(init.leaseKey)}`, async (): Promise<LeaseWriteResult> => {
        const row = await flavor.insertLease(db, tables, leaseToRowValues(applicationName, lease));
        return row === null
          ? { ok: false, reason: 'already-exists' }
          : { ok: true, lease: leaseFromRow(row, store) };
      });
    },

    getLease,

    async listLeases() {
      return run('listing the leases', async () => {
        // The key columns use a binary collation, so the database returns UTF-8 byte order.
        const { rows } = await sql<SqlRow>`select ${leaseColumnList()} from ${sql.table(tables.leases)}
          where ${sql.ref('application_name')} = ${applicationName}
          order by ${sql.ref('lease_key')}`.execute(db);
        return rows.map((row) => leaseFromRow(row, store));
      });
    },

    async renewLease(leaseKey: string, leaseCounter: number) {
      return conditionalUpdate('renewing', leaseKey, leaseCounter, [incrementCounter()]);
    },

    async renewLeases(renewals: readonly LeaseRenewal[]) {
      const results: LeaseWriteResult[] = [];
      for (let start = 0; start < renewals.length; start += MAX_RENEWALS_PER_STATEMENT) {
        const chunk = renewals.slice(start, start + MAX_RENEWALS_PER_STATEMENT);
        results.push(...(await renewChunk(chunk)));
      }
      return results;
    },

    async takeLease(leaseKey: string, leaseCounter: number, owner: string) {
      checkKey('the owner', owner, MAX_WORKER_ID_LENGTH);
      return conditionalUpdate('taking', leaseKey, leaseCounter, [
        // Before lease_owner changes: MySQL evaluates assignments left to right, on updated values. Only
        // a change from another owner counts, as in the Java KCL: taking a free lease switches nothing.
        sql`${sql.ref('owner_switches_since_checkpoint')} = case when ${sql.ref('lease_owner')} is null or ${sql.ref('lease_owner')} = ${owner}
          then ${sql.ref('owner_switches_since_checkpoint')} else ${sql.ref('owner_switches_since_checkpoint')} + 1 end`,
        assign('lease_owner', owner),
        incrementCounter(),
      ]);
    },

    async releaseLease(leaseKey: string, leaseCounter: number) {
      return conditionalUpdate('releasing', leaseKey, leaseCounter, [
        assign('lease_owner', null),
        incrementCounter(),
      ]);
    },

    async updateCheckpoint(leaseKey: string, leaseCounter: number, update: CheckpointUpdate) {
      checkPosition('checkpoint', update.checkpoint);
      checkPosition('pending checkpoint', update.pendingCheckpoint);
      return conditionalUpdate('checkpointing', leaseKey, leaseCounter, [
        ...positionAssignments(update),
        assign('owner_switches_since_checkpoint', 0),
        incrementCounter(),
      ]);
    },

    async updateLeaseMeta(leaseKey: string, update: LeaseMetaUpdate) {
      const assignments: RawBuilder<unknown>[] = [];
      if (update.childShardIds !== undefined) {
        assignments.push(assign('child_shard_ids', shardIdsToJson(update.childShardIds)));
      }
      if (update.hashKeyRange !== undefined) {
        assignments.push(
          assign('hash_key_range_start', update.hashKeyRange.startingHashKey.toString()),
          assign('hash_key_range_end', update.hashKeyRange.endingHashKey.toString()),
        );
      }
      if (assignments.length === 0) return getLease(leaseKey);
      return run(`recording the shard lineage of lease ${JSON.stringify(leaseKey)}`, async () => {
        const outcome = await flavor.updateLease(db, tables, {
          applicationName,
          leaseKey,
          leaseCounter: null,
          assignments,
        });
        return outcome.updated ? leaseFromRow(outcome.row, store) : null;
      });
    },

    async deleteLease(leaseKey: string) {
      return run(`deleting lease ${JSON.stringify(leaseKey)}`, async () => {
        await sql`delete from ${sql.table(tables.leases)}
          where ${sql.ref('application_name')} = ${applicationName} and ${sql.ref('lease_key')} = ${leaseKey}`.execute(
          db,
        );
      });
    },

    async heartbeatWorker(workerId: string, metadata: Readonly<Record<string, string>> = {}) {
      checkKey('the worker id', workerId, MAX_WORKER_ID_LENGTH);
      if (
        metadata === null ||
        typeof metadata !== 'object' ||
        !Object.values(metadata).every((value) => typeof value === 'string')
      ) {
        throw invalidArgument(store, 'worker metadata must be an object of strings');
      }
      const copy = Object.freeze({ ...metadata });
      const lastHeartbeatAtMs = Math.trunc(clock.now());
      return run(
        `recording a heartbeat of worker ${JSON.stringify(workerId)}`,
        async (): Promise<WorkerRecord> => {
          const heartbeat = await flavor.heartbeatWorker(db, tables, {
            application_name: applicationName,
            worker_id: workerId,
            last_heartbeat_at_ms: lastHeartbeatAtMs,
            metadata: metadataToJson(copy),
          });
          if (!Number.isSafeInteger(heartbeat) || heartbeat < 1) {
            throw new Error(`the database returned the heartbeat ${String(heartbeat)}`);
          }
          return Object.freeze({
            workerId,
            heartbeat,
            lastHeartbeatAt: new Date(lastHeartbeatAtMs),
            metadata: copy,
          });
        },
      );
    },

    async listWorkers() {
      return run('listing the workers', async () => {
        const { rows } = await sql<SqlRow>`select ${sql.ref('worker_id')}, ${sql.ref('heartbeat')},
            ${sql.ref('last_heartbeat_at_ms')}, ${sql.ref('metadata')}
          from ${sql.table(tables.workers)}
          where ${sql.ref('application_name')} = ${applicationName}
          order by ${sql.ref('worker_id')}`.execute(db);
        return rows.map((row) => workerFromRow(row, store));
      });
    },

    async removeWorker(workerId: string) {
      return run(`removing worker ${JSON.stringify(workerId)}`, async () => {
        await sql`delete from ${sql.table(tables.workers)}
          where ${sql.ref('application_name')} = ${applicationName} and ${sql.ref('worker_id')} = ${workerId}`.execute(
          db,
        );
      });
    },

    async getMigrationMarker() {
      return run('reading the migration marker', async (): Promise<MigrationMarker | null> => {
        const { rows } = await sql<SqlRow>`select ${sql.ref('migrated_to')}, ${sql.ref('migrated_at_ms')}
          from ${sql.table(tables.applications)}
          where ${sql.ref('application_name')} = ${applicationName}`.execute(db);
        const row = rows[0];
        return row === undefined ? null : migrationMarkerFromRow(row, store);
      });
    },

    async setMigrationMarker(marker: MigrationMarker | null) {
      if (
        marker !== null &&
        !(marker.migratedAt instanceof Date && Number.isFinite(marker.migratedAt.getTime()))
      ) {
        throw invalidArgument(store, 'the migration marker needs a valid migratedAt date');
      }
      return run(
        marker === null ? 'clearing the migration marker' : 'setting the migration marker',
        async () => {
          if (marker === null) {
            await sql`update ${sql.table(tables.applications)}
            set ${sql.ref('migrated_to')} = ${null}, ${sql.ref('migrated_at_ms')} = ${null}
            where ${sql.ref('application_name')} = ${applicationName}`.execute(db);
          } else {
            await flavor.setMigrationMarker(
              db,
              tables,
              applicationName,
              marker.migratedTo,
              marker.migratedAt.getTime(),
            );
          }
        },
      );
    },
  };

  /** Renews up to MAX_RENEWALS_PER_STATEMENT leases with one UPDATE; reads only for the losers. */
  async function renewChunk(renewals: readonly LeaseRenewal[]): Promise<LeaseWriteResult[]> {
    const fenced = renewals.filter((renewal) => Number.isSafeInteger(renewal.leaseCounter));
    return run(`renewing ${renewals.length} lease${renewals.length === 1 ? '' : 's'}`, async () => {
      const outcome =
        fenced.length === 0
          ? { renewed: [], existingKeys: undefined }
          : await flavor.renewLeases(db, tables, applicationName, fenced);
      const renewed = new Map<string, Lease>();
      for (const row of outcome.renewed) {
        const lease = leaseFromRow(row, store);
        renewed.set(lease.leaseKey, lease);
      }
      const results: (LeaseWriteResult | null)[] = renewals.map((renewal) => {
        const lease = renewed.get(renewal.leaseKey);
        if (lease === undefined || lease.leaseCounter !== renewal.leaseCounter + 1) return null;
        // A key named twice renews once; the repeat loses, as it would have one call later.
        renewed.delete(renewal.leaseKey);
        return { ok: true, lease };
      });
      const losingKeys = [
        ...new Set(renewals.filter((_, index) => results[index] === null).map((renewal) => renewal.leaseKey)),
      ];
      if (losingKeys.length === 0) return results as LeaseWriteResult[];
      const existing =
        outcome.existingKeys ??
        new Set(
          (await selectExistingLeaseKeys(tables, applicationName, losingKeys).execute(db)).rows.map(
            (row) => row.lease_key,
          ),
        );
      return results.map(
        (result, index): LeaseWriteResult =>
          result ?? {
            ok: false,
            reason: existing.has(renewals[index]?.leaseKey ?? '') ? 'counter-mismatch' : 'not-found',
          },
      );
    });
  }
}

function assign(column: string, value: string | number | null): RawBuilder<unknown> {
  return sql`${sql.ref(column)} = ${value}`;
}

function incrementCounter(): RawBuilder<unknown> {
  return sql`${sql.ref('lease_counter')} = ${sql.ref('lease_counter')} + 1`;
}
