import type { StoreCallOptions, WorkerListOptions, WorkerRecord, WorkerRegistry } from '@kcl/core';
import { sql } from 'kysely';
import { invalidArgument } from './sql-errors.js';
import { metadataToJson, workerFromRow } from './sql-lease-row.js';
import { MAX_WORKER_ID_LENGTH } from './sql-schema.js';
import type { SqlStoreContext } from './sql-store-context.js';
import { checkKey, runSql } from './sql-store-context.js';
import type { SqlRow } from './sql-types.js';
import type { SqlWorkerSessions } from './sql-worker-sessions.js';

/**
 * The worker registry on SQL: one row per worker, a heartbeat counter incremented by an upsert; with
 * `sessions`, also the session calls (see `sql-worker-sessions.ts`).
 */
export function createSqlWorkerRegistry(
  context: SqlStoreContext,
  sessions: SqlWorkerSessions | null,
): WorkerRegistry {
  return {
    heartbeat: (workerId: string, metadata?: Readonly<Record<string, string>>, _options?: StoreCallOptions) =>
      heartbeat(context, workerId, metadata),
    list: (options?: WorkerListOptions) => listWorkers(context, options?.metadata !== false),
    remove: (workerId: string, _options?: StoreCallOptions) => removeWorker(context, workerId),
    ...(sessions === null ? {} : sessions.calls),
  };
}

async function heartbeat(
  context: SqlStoreContext,
  workerId: string,
  metadata: Readonly<Record<string, string>> | undefined,
): Promise<WorkerRecord> {
  checkKey(context, 'the worker id', workerId, MAX_WORKER_ID_LENGTH);
  if (
    metadata !== undefined &&
    (metadata === null ||
      typeof metadata !== 'object' ||
      !Object.values(metadata).every((value) => typeof value === 'string'))
  ) {
    throw invalidArgument(context.store, 'worker metadata must be an object of strings');
  }
  const lastHeartbeatAtMs = Math.trunc(context.clock.now());
  return runSql(context, `recording a heartbeat of worker ${JSON.stringify(workerId)}`, async () => {
    // Without metadata the stored metadata stays: a worker that publishes it once (at start, say)
    // need not send it with every beat.
    const stored = await context.flavor.heartbeatWorker(context.db, context.tables, {
      application_name: context.applicationName,
      worker_id: workerId,
      last_heartbeat_at_ms: lastHeartbeatAtMs,
      metadata: metadata === undefined ? null : metadataToJson({ ...metadata }),
    });
    const record = workerFromRow(
      { ...stored, worker_id: workerId, last_heartbeat_at_ms: lastHeartbeatAtMs },
      context.store,
    );
    if (record.heartbeat < 1) {
      throw new Error(`the database returned the heartbeat ${String(record.heartbeat)}`);
    }
    return record;
  });
}

/** Without metadata the column is not selected: it can hold kilobytes a worker (its lease figures). */
function listWorkers(context: SqlStoreContext, withMetadata: boolean): Promise<WorkerRecord[]> {
  return runSql(context, 'listing the workers', async () => {
    const metadata = withMetadata ? sql`, ${sql.ref('metadata')}` : sql``;
    const { rows } = await sql<SqlRow>`select ${sql.ref('worker_id')}, ${sql.ref('heartbeat')},
        ${sql.ref('last_heartbeat_at_ms')}${metadata}
      from ${sql.table(context.tables.workers)}
      where ${sql.ref('application_name')} = ${context.applicationName}
      order by ${sql.ref('worker_id')}`.execute(context.db);
    return rows.map((row) => workerFromRow(withMetadata ? row : { ...row, metadata: '{}' }, context.store));
  });
}

function removeWorker(context: SqlStoreContext, workerId: string): Promise<void> {
  return runSql(context, `removing worker ${JSON.stringify(workerId)}`, async () => {
    await sql`delete from ${sql.table(context.tables.workers)}
      where ${sql.ref('application_name')} = ${context.applicationName} and ${sql.ref('worker_id')} = ${workerId}`.execute(
      context.db,
    );
  });
}
