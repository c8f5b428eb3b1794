import type {
  CheckpointUpdate,
  Lease,
  LeaseBatchWriteResult,
  LeaseDataError,
  LeaseHandoff,
  LeaseInit,
  LeaseMetaUpdate,
  LeaseRenewal,
  LeaseRepository,
  LeaseTableScan,
  LeaseWriteResult,
  LostRaceReason,
  StoreCallOptions,
  TransactionalCheckpointResult,
  TransactionalCheckpointWork,
  UnreadableLeaseRow,
} from '@kcl/core';
import { ConfigurationError, handoffProblem, leaseFromInit } from '@kcl/core';
import type { RawBuilder } from 'kysely';
import { sql } from 'kysely';
import { invalidLeaseRow, unstorableLease } from './sql-errors.js';
import { leaseFromRow, leaseToRowValues, readLeaseRow, shardIdsToJson } from './sql-lease-row.js';
import { PACKAGE_NAME } from './sql-package-name.js';
import { MAX_LEASE_KEY_LENGTH, MAX_WORKER_ID_LENGTH } from './sql-schema.js';
import { leaseColumnList, leaseMatch, selectExistingLeaseKeys, selectLease } from './sql-statements.js';
import type { SqlStoreContext } from './sql-store-context.js';
import { checkCount, checkKey, checkPosition, runSql } from './sql-store-context.js';
import type { AnyKysely, SqlRow } from './sql-types.js';

/** Renewals per UPDATE statement in `renewMany`; keeps the parameter count far below every limit. */
export const MAX_RENEWALS_PER_STATEMENT = 1_000;

/**
 * The hot path on SQL: every conditional write is one UPDATE fenced by `lease_counter` (see the
 * flavor modules for what that costs per dialect); only a lost race reads again, to tell `not-found`
 * from `counter-mismatch`.
 *
 * The call options' signal is not passed on: Kysely cannot cancel a query. `guardLeaseStore` makes an
 * aborted call reject at once; the statement itself still runs to its end.
 */
export function createSqlLeaseRepository(context: SqlStoreContext): LeaseRepository {
  return {
    list: (_options?: StoreCallOptions) => listLeases(context),
    get: (leaseKey: string, _options?: StoreCallOptions) => getLease(context, leaseKey),
    create: (init: LeaseInit, _options?: StoreCallOptions) => createLease(context, init),
    renew: (leaseKey: string, leaseCounter: number, _options?: StoreCallOptions) =>
      conditionalUpdate(context, 'renewing', leaseKey, leaseCounter, [incrementCounter()]),
    renewMany: (renewals: readonly LeaseRenewal[], _options?: StoreCallOptions) =>
      renewLeases(context, renewals),
    take: (leaseKey: string, leaseCounter: number, owner: string, _options?: StoreCallOptions) =>
      takeLease(context, leaseKey, leaseCounter, owner),
    release: (leaseKey: string, leaseCounter: number, _options?: StoreCallOptions) =>
      conditionalUpdate(context, 'releasing', leaseKey, leaseCounter, [
        assign('lease_owner', null),
        ...clearHandoff(),
        incrementCounter(),
      ]),
    requestHandoff: (
      leaseKey: string,
      leaseCounter: number,
      handoff: LeaseHandoff,
      _options?: StoreCallOptions,
    ) => requestLeaseHandoff(context, leaseKey, leaseCounter, handoff),
    completeHandoff: (leaseKey: string, leaseCounter: number, _options?: StoreCallOptions) =>
      completeLeaseHandoff(context, leaseKey, leaseCounter),
    checkpoint: (
      leaseKey: string,
      leaseCounter: number,
      update: CheckpointUpdate,
      _options?: StoreCallOptions,
    ) => checkpointLease(context, leaseKey, leaseCounter, update),
    checkpointInTransaction: <T>(
      leaseKey: string,
      leaseCounter: number,
      work: TransactionalCheckpointWork<T>,
      options?: StoreCallOptions,
    ) => checkpointLeaseInTransaction(context, leaseKey, leaseCounter, work, options),
    updateMeta: (leaseKey: string, update: LeaseMetaUpdate, _options?: StoreCallOptions) =>
      updateLeaseMeta(context, leaseKey, update),
    delete: (leaseKey: string, _options?: StoreCallOptions) => deleteLease(context, leaseKey),
  };
}

/**
 * Every lease row of the application in lease-key order, each read or reported as unreadable: one
 * damaged row must not hide the others.
 */
export function scanLeases(context: SqlStoreContext): Promise<LeaseTableScan> {
  const { db, tables, applicationName } = context;
  return runSql(context, 'listing the leases', async () => {
    // The key columns use a binary collation, so the database returns UTF-8 byte order.
    const { rows } = await sql<SqlRow>`select ${leaseColumnList()} from ${sql.table(tables.leases)}
      where ${sql.ref('application_name')} = ${applicationName}
      order by ${sql.ref('lease_key')}`.execute(db);
    const leases: Lease[] = [];
    const unreadable: UnreadableLeaseRow[] = [];
    for (const row of rows) {
      const reading = readLeaseRow(row);
      if (reading.ok) leases.push(reading.lease);
      else unreadable.push(Object.freeze({ leaseKey: reading.leaseKey, problem: reading.problem }));
    }
    return { leases, unreadable };
  });
}

async function listLeases(context: SqlStoreContext): Promise<Lease[]> {
  const scan = await scanLeases(context);
  // A row no worker can read stops no one: it is skipped (and `get` of its key still rejects with
  // the LeaseDataError naming it), as the Java KCL's scan skips and logs such a lease.
  for (const row of scan.unreadable) {
    context.logger.warn(
      `${PACKAGE_NAME}: skipped lease ${JSON.stringify(row.leaseKey)}, which cannot be read: ${row.problem} (table ${JSON.stringify(context.tables.leases)}, application ${JSON.stringify(context.applicationName)}); no worker will process it until you repair the row or delete the lease (store.admin.scan() lists every such row)`,
      {
        table: context.tables.leases,
        applicationName: context.applicationName,
        leaseKey: row.leaseKey,
        problem: row.problem,
      },
    );
  }
  return [...scan.leases];
}

function getLease(context: SqlStoreContext, leaseKey: string): Promise<Lease | null> {
  return runSql(context, `reading lease ${JSON.stringify(leaseKey)}`, async () => {
    const { rows } = await selectLease(context.tables, context.applicationName, leaseKey).execute(context.db);
    const row = rows[0];
    return row === undefined ? null : leaseFromRow(row, context.store);
  });
}

async function createLease(context: SqlStoreContext, init: LeaseInit): Promise<LeaseWriteResult> {
  checkKey(context, 'the lease key', init.leaseKey, MAX_LEASE_KEY_LENGTH);
  if (init.owner !== undefined && init.owner !== null) {
    checkKey(context, 'the owner', init.owner, MAX_WORKER_ID_LENGTH);
  }
  checkPosition(context, 'checkpoint', init.checkpoint);
  checkPosition(context, 'pending checkpoint', init.pendingCheckpoint);
  if (init.streamIdentifier !== undefined && init.streamIdentifier !== null) {
    checkKey(context, 'the stream identifier', init.streamIdentifier, MAX_LEASE_KEY_LENGTH);
  }
  if (init.handoff !== undefined && init.handoff !== null) {
    checkKey(context, 'the hand-off from worker', init.handoff.from, MAX_WORKER_ID_LENGTH);
    checkKey(context, 'the hand-off to worker', init.handoff.to, MAX_WORKER_ID_LENGTH);
    // A hand-off comes from the lease's owner (the contract's `LeaseHandoff.from`); store-dynamo
    // cannot even store another one, since the Java format keeps the owner during a hand-off in one
    // attribute, so both stores refuse it alike.
    const problem = handoffProblem(init.handoff, init.owner ?? null);
    if (problem !== null) throw unstorableLease(context.store, init.leaseKey, problem);
  }
  const lease = leaseFromInit(init);
  checkCount(context, 'leaseCounter', lease.leaseCounter);
  checkCount(context, 'ownerSwitchesSinceCheckpoint', lease.ownerSwitchesSinceCheckpoint);
  return runSql(context, `creating lease ${JSON.stringify(init.leaseKey)}`, async () => {
    const row = await context.flavor.insertLease(
      context.db,
      context.tables,
      leaseToRowValues(context.applicationName, lease),
    );
    return row === null
      ? { ok: false, reason: 'already-exists' }
      : { ok: true, lease: leaseFromRow(row, context.store) };
  });
}

async function takeLease(
  context: SqlStoreContext,
  leaseKey: string,
  leaseCounter: number,
  owner: string,
): Promise<LeaseWriteResult> {
  checkKey(context, 'the owner', owner, MAX_WORKER_ID_LENGTH);
  return conditionalUpdate(context, 'taking', leaseKey, leaseCounter, [
    // Before lease_owner changes: MySQL evaluates assignments left to right, on updated values. Only
    // a change from another owner counts, as in the Java KCL: taking a free lease switches nothing.
    sql`${sql.ref('owner_switches_since_checkpoint')} = case when ${sql.ref('lease_owner')} is null or ${sql.ref('lease_owner')} = ${owner}
      then ${sql.ref('owner_switches_since_checkpoint')} else ${sql.ref('owner_switches_since_checkpoint')} + 1 end`,
    assign('lease_owner', owner),
    ...clearHandoff(),
    incrementCounter(),
  ]);
}

/**
 * Records a hand-off request without touching the counter: one UPDATE fenced by the counter, the
 * owner and the absence of a hand-off. A lost race reads the row to say which condition failed.
 */
async function requestLeaseHandoff(
  context: SqlStoreContext,
  leaseKey: string,
  leaseCounter: number,
  handoff: LeaseHandoff,
): Promise<LeaseWriteResult> {
  const problem = handoffProblem(handoff);
  if (problem !== null) throw new ConfigurationError(context.store, [problem]);
  checkKey(context, 'the hand-off from worker', handoff.from, MAX_WORKER_ID_LENGTH);
  checkKey(context, 'the hand-off to worker', handoff.to, MAX_WORKER_ID_LENGTH);
  return handoffUpdate(
    context,
    'requesting a hand-off of',
    leaseKey,
    leaseCounter,
    [
      assign('handoff_from', handoff.from),
      assign('handoff_to', handoff.to),
      assign('handoff_deadline_ms', handoff.deadline?.getTime() ?? null),
    ],
    sql`${sql.ref('lease_owner')} = ${handoff.from} and ${sql.ref('handoff_from')} is null and ${sql.ref('handoff_to')} is null`,
  );
}

/** The lease goes to the worker the hand-off names: one UPDATE fenced by the counter and a hand-off. */
function completeLeaseHandoff(
  context: SqlStoreContext,
  leaseKey: string,
  leaseCounter: number,
): Promise<LeaseWriteResult> {
  return handoffUpdate(
    context,
    'completing the hand-off of',
    leaseKey,
    leaseCounter,
    [
      sql`${sql.ref('owner_switches_since_checkpoint')} = ${sql.ref('owner_switches_since_checkpoint')} + 1`,
      // Before the hand-off columns are cleared: MySQL evaluates assignments left to right.
      sql`${sql.ref('lease_owner')} = ${sql.ref('handoff_to')}`,
      ...clearHandoff(),
      incrementCounter(),
    ],
    sql`${sql.ref('handoff_to')} is not null`,
  );
}

/**
 * A counter-fenced UPDATE with a further condition on the hand-off state. A lost race reads the row
 * (unless the flavor read it already) to tell `not-found`, `counter-mismatch` and `handoff-mismatch`
 * apart.
 */
function handoffUpdate(
  context: SqlStoreContext,
  operation: string,
  leaseKey: string,
  leaseCounter: number,
  assignments: readonly RawBuilder<unknown>[],
  condition: RawBuilder<unknown>,
): Promise<LeaseWriteResult> {
  return runSql(context, `${operation} lease ${JSON.stringify(leaseKey)}`, async () => {
    let current: SqlRow | null | undefined;
    if (Number.isSafeInteger(leaseCounter)) {
      const outcome = await context.flavor.updateLease(context.db, context.tables, {
        applicationName: context.applicationName,
        leaseKey,
        leaseCounter,
        assignments,
        condition,
      });
      if (outcome.updated) return { ok: true, lease: leaseFromRow(outcome.row, context.store) };
      current = outcome.current;
    }
    if (current === undefined) {
      const { rows } = await selectLease(context.tables, context.applicationName, leaseKey).execute(
        context.db,
      );
      current = rows[0] ?? null;
    }
    if (current === null) return { ok: false, reason: 'not-found' };
    return {
      ok: false,
      reason: Number(current.lease_counter) === leaseCounter ? 'handoff-mismatch' : 'counter-mismatch',
    };
  });
}

async function checkpointLease(
  context: SqlStoreContext,
  leaseKey: string,
  leaseCounter: number,
  update: CheckpointUpdate,
): Promise<LeaseWriteResult> {
  checkPosition(context, 'checkpoint', update.checkpoint);
  checkPosition(context, 'pending checkpoint', update.pendingCheckpoint);
  return conditionalUpdate(context, 'checkpointing', leaseKey, leaseCounter, checkpointAssignments(update));
}

function checkpointAssignments(update: CheckpointUpdate): RawBuilder<unknown>[] {
  const pending = update.pendingCheckpoint ?? null;
  return [
    assign('checkpoint_sequence_number', update.checkpoint.sequenceNumber),
    assign('checkpoint_sub_sequence_number', update.checkpoint.subSequenceNumber),
    assign('pending_checkpoint_sequence_number', pending?.sequenceNumber ?? null),
    assign('pending_checkpoint_sub_sequence_number', pending?.subSequenceNumber ?? null),
    assign('owner_switches_since_checkpoint', 0),
    incrementCounter(),
  ];
}

/**
 * SQLite: takes the file's write lock at the start of the transaction, with a write that changes
 * nothing (the lease row's counter set to itself). A deferred transaction whose work read before it
 * wrote would hold a read snapshot, and its first write would then fail at once with
 * SQLITE_BUSY_SNAPSHOT whenever another connection committed meanwhile — other workers' renewals do,
 * all the time — without waiting for the busy timeout. Taking the lock before any read waits for it
 * instead (busy_timeout). SQLite has one writer per file: the transaction would hold that lock from its
 * first write to its commit anyway.
 */
async function takeSqliteWriteLock(context: SqlStoreContext, leaseKey: string): Promise<void> {
  await sql`update ${sql.table(context.tables.leases)} set ${sql.ref('lease_counter')} = ${sql.ref('lease_counter')}
    where ${leaseMatch(context.applicationName, leaseKey, null)}`.execute(context.db);
}

/**
 * PostgreSQL: a transaction whose work stalls must not hold its locks forever (the lease is lost long
 * before). For this transaction only (`set_config(…, true)` is `SET LOCAL`): a statement waits at most
 * `timeoutMs` for a lock, and a transaction idle that long has its session ended by the server.
 */
async function boundPostgresTransaction(transaction: AnyKysely, timeoutMs: number): Promise<void> {
  const value = `${timeoutMs}ms`;
  await sql`select set_config('idle_in_transaction_session_timeout', ${value}, true),
    set_config('lock_timeout', ${value}, true)`.execute(transaction);
}

/** Thrown inside the transaction to roll it back when the fenced write did not apply. */
class LostRace {
  constructor(readonly reason: LostRaceReason) {}
}

/**
 * Exactly-once processing (ARCHITECTURE §6): the application's writes and the checkpoint in one
 * transaction, opened on the caller's Kysely instance (its plugins apply to the application's writes;
 * the store's own statement runs without them). The lease row is written last — after the
 * application's writes, just before the commit — so its row lock is held only for the commit, and the
 * lock order is always "the application's rows, then the lease row". The isolation level is the
 * database's default (PostgreSQL READ COMMITTED, MySQL/MariaDB REPEATABLE READ; the fenced UPDATE
 * reads the latest committed counter under both). On SQLite the transaction takes the file's write lock
 * first, before `work` (see `takeSqliteWriteLock`). A write conflict is not retried here: the application's part may
 * not be repeatable, so the error (retryable) goes to the caller, whose batch is retried.
 */
async function checkpointLeaseInTransaction<T>(
  context: SqlStoreContext,
  leaseKey: string,
  leaseCounter: number,
  work: TransactionalCheckpointWork<T>,
  options: StoreCallOptions | undefined,
): Promise<TransactionalCheckpointResult<T>> {
  return runSql(
    context,
    `checkpointing lease ${JSON.stringify(leaseKey)} in a transaction`,
    async () => {
      try {
        return await context.userDb.transaction().execute(async (transaction) => {
          if (context.flavor.name === 'sqlite') {
            await takeSqliteWriteLock({ ...context, db: transaction.withoutPlugins() }, leaseKey);
          } else if (context.flavor.name === 'postgres' && context.transactionTimeoutMs > 0) {
            await boundPostgresTransaction(transaction.withoutPlugins(), context.transactionTimeoutMs);
          }
          const { update, value } = await work(transaction);
          checkPosition(context, 'checkpoint', update.checkpoint);
          checkPosition(context, 'pending checkpoint', update.pendingCheckpoint);
          options?.signal?.throwIfAborted();
          const result = await fencedUpdate(
            { ...context, db: transaction.withoutPlugins() },
            leaseKey,
            leaseCounter,
            checkpointAssignments(update),
          );
          if (!result.ok) throw new LostRace(result.reason);
          return { ok: true as const, lease: result.lease, value };
        });
      } catch (error) {
        if (error instanceof LostRace) return { ok: false, reason: error.reason };
        throw error;
      }
    },
    1,
  );
}

async function updateLeaseMeta(
  context: SqlStoreContext,
  leaseKey: string,
  update: LeaseMetaUpdate,
): Promise<Lease | null> {
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
  if (assignments.length === 0) return getLease(context, leaseKey);
  return runSql(context, `recording the shard lineage of lease ${JSON.stringify(leaseKey)}`, async () => {
    const outcome = await context.flavor.updateLease(context.db, context.tables, {
      applicationName: context.applicationName,
      leaseKey,
      leaseCounter: null,
      assignments,
    });
    return outcome.updated ? leaseFromRow(outcome.row, context.store) : null;
  });
}

function deleteLease(context: SqlStoreContext, leaseKey: string): Promise<void> {
  return runSql(context, `deleting lease ${JSON.stringify(leaseKey)}`, async () => {
    await sql`delete from ${sql.table(context.tables.leases)}
      where ${sql.ref('application_name')} = ${context.applicationName} and ${sql.ref('lease_key')} = ${leaseKey}`.execute(
      context.db,
    );
  });
}

/** One counter-fenced UPDATE; only a lost race reads again, to say why it lost. */
function conditionalUpdate(
  context: SqlStoreContext,
  operation: string,
  leaseKey: string,
  leaseCounter: number,
  assignments: readonly RawBuilder<unknown>[],
): Promise<LeaseWriteResult> {
  return runSql(context, `${operation} lease ${JSON.stringify(leaseKey)}`, () =>
    fencedUpdate(context, leaseKey, leaseCounter, assignments),
  );
}

/** The statements of `conditionalUpdate`, on `context.db` (which may be a transaction). */
async function fencedUpdate(
  context: SqlStoreContext,
  leaseKey: string,
  leaseCounter: number,
  assignments: readonly RawBuilder<unknown>[],
): Promise<LeaseWriteResult> {
  if (Number.isSafeInteger(leaseCounter)) {
    const outcome = await context.flavor.updateLease(context.db, context.tables, {
      applicationName: context.applicationName,
      leaseKey,
      leaseCounter,
      assignments,
    });
    if (outcome.updated) return { ok: true, lease: leaseFromRow(outcome.row, context.store) };
    if (outcome.exists !== undefined) {
      return { ok: false, reason: outcome.exists ? 'counter-mismatch' : 'not-found' };
    }
  }
  const { rows } = await selectExistingLeaseKeys(context.tables, context.applicationName, [leaseKey]).execute(
    context.db,
  );
  return { ok: false, reason: rows.length > 0 ? 'counter-mismatch' : 'not-found' };
}

async function renewLeases(
  context: SqlStoreContext,
  renewals: readonly LeaseRenewal[],
): Promise<LeaseBatchWriteResult[]> {
  const results: LeaseBatchWriteResult[] = [];
  for (let start = 0; start < renewals.length; start += MAX_RENEWALS_PER_STATEMENT) {
    const chunk = renewals.slice(start, start + MAX_RENEWALS_PER_STATEMENT);
    results.push(...(await renewChunk(context, chunk)));
  }
  return results;
}

/** Renews up to MAX_RENEWALS_PER_STATEMENT leases with one UPDATE; reads only for the losers. */
function renewChunk(
  context: SqlStoreContext,
  renewals: readonly LeaseRenewal[],
): Promise<LeaseBatchWriteResult[]> {
  const { db, tables, applicationName } = context;
  const fenced = renewals.filter((renewal) => Number.isSafeInteger(renewal.leaseCounter));
  return runSql(context, `renewing ${renewals.length} lease${renewals.length === 1 ? '' : 's'}`, async () => {
    const outcome =
      fenced.length === 0
        ? { renewed: [], existingKeys: undefined }
        : await context.flavor.renewLeases(db, tables, applicationName, fenced);
    const renewed = new Map<string, { readonly lease: Lease } | { readonly error: LeaseDataError }>();
    for (const row of outcome.renewed) {
      const key = row.lease_key;
      if (typeof key !== 'string') continue;
      // A row that cannot be read was renewed but cannot be reported: that one lease fails, the
      // others are reported as usual, so one damaged row does not cost a worker all its leases.
      const reading = readLeaseRow(row);
      renewed.set(
        key,
        reading.ok
          ? { lease: reading.lease }
          : { error: invalidLeaseRow(context.store, key, reading.problem, reading.cause) },
      );
    }
    const results: (LeaseBatchWriteResult | null)[] = renewals.map((renewal) => {
      const entry = renewed.get(renewal.leaseKey);
      if (entry === undefined) return null;
      if ('error' in entry) {
        renewed.delete(renewal.leaseKey);
        return { ok: false, reason: 'failed', error: entry.error };
      }
      const { lease } = entry;
      if (lease.leaseCounter !== renewal.leaseCounter + 1) return null;
      // A key named twice renews once; the repeat loses, as it would have one call later.
      renewed.delete(renewal.leaseKey);
      return { ok: true, lease };
    });
    const losingKeys = [
      ...new Set(renewals.filter((_, index) => results[index] === null).map((renewal) => renewal.leaseKey)),
    ];
    if (losingKeys.length === 0) return results as LeaseBatchWriteResult[];
    const existing =
      outcome.existingKeys ??
      new Set(
        (await selectExistingLeaseKeys(tables, applicationName, losingKeys).execute(db)).rows.map(
          (row) => row.lease_key,
        ),
      );
    return results.map(
      (result, index): LeaseBatchWriteResult =>
        result ?? {
          ok: false,
          reason: existing.has(renewals[index]?.leaseKey ?? '') ? 'counter-mismatch' : 'not-found',
        },
    );
  });
}

function assign(column: string, value: string | number | null): RawBuilder<unknown> {
  return sql`${sql.ref(column)} = ${value}`;
}

function incrementCounter(): RawBuilder<unknown> {
  return sql`${sql.ref('lease_counter')} = ${sql.ref('lease_counter')} + 1`;
}

/** A take or a release ends any hand-off in progress: the lease has a new owner, or none. */
function clearHandoff(): RawBuilder<unknown>[] {
  return [assign('handoff_from', null), assign('handoff_to', null), assign('handoff_deadline_ms', null)];
}
