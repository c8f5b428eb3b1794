import type { AttributeValue } from '@aws-sdk/client-dynamodb';
import {
  DeleteItemCommand,
  GetItemCommand,
  PutItemCommand,
  QueryCommand,
  ScanCommand,
  UpdateItemCommand,
} from '@aws-sdk/client-dynamodb';
import type {
  CheckpointUpdate,
  Lease,
  LeaseBatchWriteResult,
  LeaseInit,
  LeaseMetaUpdate,
  LeaseRenewal,
  LeaseStore,
  LeaseWriteResult,
  LostRaceReason,
} from '@kcl/core';
import { compareLeaseKeys, LeaseDataError, leaseFromInit } from '@kcl/core';
import { ensureTable } from './dynamo-ensure-table.js';
import { isConditionalCheckFailed, itemOfConditionFailure, mapDynamoError } from './dynamo-error-mapping.js';
import type { DynamoCondition, DynamoUpdate } from './dynamo-expression.js';
import { buildExpressions } from './dynamo-expression.js';
import type { DynamoItem } from './dynamo-item-codec.js';
import {
  checkpointAttributes,
  decodeLeaseRow,
  encodeLeaseItem,
  hashKeyRangeAttributes,
  LEASE_ATTRIBUTES,
  LEASE_ENTITY_TYPE,
  numberValue,
  pendingCheckpointAttributes,
  stringSetValue,
} from './dynamo-item-codec.js';
import type { DynamoLeaseStoreOptions, DynamoLeaseTableLayout } from './dynamo-lease-store-options.js';
import { PACKAGE_NAME, resolveDynamoLeaseStoreOptions } from './dynamo-lease-store-options.js';
import { claimLeaseTableTag } from './dynamo-table-claim.js';
import { leaseTableDefinition, workerTableDefinition } from './dynamo-table-schema.js';
import { createDynamoWorkerRegistry } from './dynamo-worker-registry.js';

/** A lease row that could not be read, reported by `scanSummary()` and skipped by `listLeases`. */
export interface DynamoInvalidLeaseRow {
  readonly leaseKey: string;
  readonly problem: string;
}

/** What one read of the application's lease rows found. */
export interface DynamoLeaseTableSummary {
  /** Every readable lease of the application, in lease-key order. */
  readonly leases: Lease[];
  /** Rows skipped because their `entityType` is not `LEASE` (KCL 3.x worker metrics, leader, migration state…). */
  readonly skippedRowCount: number;
  /** The skipped rows counted by `entityType`, e.g. `{ WORKER_METRIC_STATS: 3, LEADER: 1 }`. */
  readonly skippedRowsByEntityType: Readonly<Record<string, number>>;
  /** Lease rows that cannot be read, in scan order; `listLeases` skips exactly these. */
  readonly invalidRows: readonly DynamoInvalidLeaseRow[];
}

export interface DynamoScanSummaryOptions {
  /** `collect` (default): report a row that cannot be read. `throw`: reject with `LeaseDataError` naming it. */
  readonly invalidRows?: 'throw' | 'collect';
}

/** A `LeaseStore` on DynamoDB, with what it knows about its tables. */
export interface DynamoLeaseStore extends LeaseStore {
  readonly layout: DynamoLeaseTableLayout;
  readonly tableName: string;
  readonly workerTableName: string;
  /**
   * Reads every row of the application and reports the leases, the non-lease rows that were skipped
   * (KCL 3.x entity types) and the lease rows that cannot be read (which `listLeases` skips).
   */
  scanSummary(options?: DynamoScanSummaryOptions): Promise<DynamoLeaseTableSummary>;
}

const LEASE_ROW: DynamoCondition = {
  // Never touch a KCL 3.x row of another entity type that happens to share a key with a lease.
  expression: `attribute_exists(#${LEASE_ATTRIBUTES.leaseKey}) AND (attribute_not_exists(#${LEASE_ATTRIBUTES.entityType}) OR #${LEASE_ATTRIBUTES.entityType} = :leaseEntityType)`,
  values: { ':leaseEntityType': { S: LEASE_ENTITY_TYPE } },
};

type ConditionalOutcome =
  | { readonly ok: true; readonly lease: Lease }
  /** `seen` is the item when the condition failed, if DynamoDB returned it. */
  | { readonly ok: false; readonly seen: DynamoItem | undefined };

/**
 * A `LeaseStore` on DynamoDB. The default `java` layout is the Java KCL lease table, attribute for
 * attribute, so Java KCL workers and kcl workers can hand a table over in either direction with every
 * checkpoint kept; the `shared` layout keeps several applications in one table. Workers and the
 * migration marker live in a separate registry table that Java workers never read.
 */
export function createDynamoLeaseStore(options: DynamoLeaseStoreOptions): DynamoLeaseStore {
  const resolved = resolveDynamoLeaseStoreOptions(options);
  const { client, applicationName, layout, billing, clock } = resolved;
  const leaseTable = leaseTableDefinition(resolved.tableName, layout);
  const workerTable = workerTableDefinition(resolved.workerTableName);
  const registry = createDynamoWorkerRegistry({
    client,
    definition: workerTable,
    billing,
    applicationName,
    clock,
    consistentReads: resolved.consistentReads,
    pageSize: resolved.pageSize,
  });

  const keyOf = (leaseKey: string): DynamoItem =>
    layout === 'java'
      ? { [LEASE_ATTRIBUTES.leaseKey]: { S: leaseKey } }
      : {
          [LEASE_ATTRIBUTES.applicationName]: { S: applicationName },
          [LEASE_ATTRIBUTES.leaseKey]: { S: leaseKey },
        };
  // The shared layout's partition key is written into every item; the Java layout has no extra key.
  const extraKey: DynamoItem =
    layout === 'java' ? {} : { [LEASE_ATTRIBUTES.applicationName]: { S: applicationName } };

  const send = async <T>(operation: string, run: () => Promise<T>): Promise<T> => {
    try {
      return await run();
    } catch (error) {
      throw mapDynamoError(error, { operation, table: leaseTable, billing });
    }
  };

  const leaseOf = (leaseKey: string, item: DynamoItem): Lease | null => {
    const row = decodeLeaseRow(item);
    if (row.kind === 'lease') return row.lease;
    if (row.kind === 'other') return null;
    throw new LeaseDataError(
      PACKAGE_NAME,
      row.leaseKey.length > 0 ? row.leaseKey : leaseKey,
      `${row.problem} (table ${JSON.stringify(leaseTable.tableName)}); fix the item or delete it`,
    );
  };

  const readItem = async (leaseKey: string, consistent: boolean): Promise<DynamoItem | null> => {
    const output = await send(`GetItem (lease ${JSON.stringify(leaseKey)})`, () =>
      client.send(
        new GetItemCommand({
          TableName: leaseTable.tableName,
          Key: keyOf(leaseKey),
          ConsistentRead: consistent,
        }),
      ),
    );
    return output.Item ?? null;
  };

  /** One conditional UpdateItem on a lease row, returning the lease as written. */
  const update = async (
    operation: string,
    leaseKey: string,
    change: DynamoUpdate,
    condition: DynamoCondition,
  ): Promise<ConditionalOutcome> => {
    const outcome = await send(`UpdateItem (${operation} lease ${JSON.stringify(leaseKey)})`, async () => {
      try {
        const output = await client.send(
          new UpdateItemCommand({
            TableName: leaseTable.tableName,
            Key: keyOf(leaseKey),
            ...buildExpressions({ update: change, condition }),
            ReturnValues: 'ALL_NEW',
            // DynamoDB returns the item that failed the condition, which tells a missing lease from a
            // moved counter without a second read. Emulators that ignore this get the read instead.
            ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
          }),
        );
        return { ok: true as const, item: output.Attributes ?? {} };
      } catch (error) {
        if (isConditionalCheckFailed(error))
          return { ok: false as const, seen: itemOfConditionFailure(error) };
        throw error;
      }
    });
    if (!outcome.ok) return outcome;
    const lease = leaseOf(leaseKey, outcome.item);
    if (lease === null) {
      // Unreachable: the condition admits only lease rows.
      throw new LeaseDataError(PACKAGE_NAME, leaseKey, 'the written item is not a lease');
    }
    return { ok: true, lease };
  };

  const counterCondition = (
    leaseCounter: number,
    extra?: { readonly expression: string; readonly values: Record<string, AttributeValue> },
  ): DynamoCondition => ({
    expression: `${LEASE_ROW.expression} AND #${LEASE_ATTRIBUTES.leaseCounter} = :expectedCounter${extra === undefined ? '' : ` AND ${extra.expression}`}`,
    values: { ...LEASE_ROW.values, ':expectedCounter': numberValue(leaseCounter), ...extra?.values },
  });

  /** Why a conditional write lost: from the item DynamoDB returned, or from a consistent read. */
  const lostReason = async (leaseKey: string, seen: DynamoItem | undefined): Promise<LostRaceReason> => {
    const item = seen ?? (await readItem(leaseKey, true));
    if (item === null) return 'not-found';
    const entityType = item[LEASE_ATTRIBUTES.entityType];
    if (entityType !== undefined && entityType.S !== LEASE_ENTITY_TYPE) return 'not-found';
    return 'counter-mismatch';
  };

  const lost = async (leaseKey: string, outcome: ConditionalOutcome): Promise<LeaseWriteResult> =>
    outcome.ok ? outcome : { ok: false, reason: await lostReason(leaseKey, outcome.seen) };

  /** The Java KCL's counter fencing: condition on the counter last seen, write that counter + 1. */
  const fenced = async (
    operation: string,
    leaseKey: string,
    leaseCounter: number,
    change: DynamoUpdate,
  ): Promise<LeaseWriteResult> => {
    const outcome = await update(
      operation,
      leaseKey,
      { ...change, set: { ...change.set, [LEASE_ATTRIBUTES.leaseCounter]: numberValue(leaseCounter + 1) } },
      counterCondition(leaseCounter),
    );
    return lost(leaseKey, outcome);
  };

  const renewLease = (leaseKey: string, leaseCounter: number): Promise<LeaseWriteResult> =>
    fenced('renew', leaseKey, leaseCounter, {});

  const scanSummary = async (
    summaryOptions: DynamoScanSummaryOptions = {},
  ): Promise<DynamoLeaseTableSummary> => {
    const collect = summaryOptions.invalidRows !== 'throw';
    const leases: Lease[] = [];
    const skipped: Record<string, number> = {};
    let skippedRowCount = 0;
    const invalidRows: DynamoInvalidLeaseRow[] = [];
    const page = resolved.pageSize === null ? {} : { Limit: resolved.pageSize };
    let startKey: DynamoItem | undefined;
    do {
      const exclusiveStartKey = startKey === undefined ? {} : { ExclusiveStartKey: startKey };
      const output =
        layout === 'java'
          ? await send('Scan (list leases)', () =>
              client.send(
                new ScanCommand({
                  TableName: leaseTable.tableName,
                  ConsistentRead: resolved.consistentReads,
                  ...page,
                  ...exclusiveStartKey,
                }),
              ),
            )
          : await send('Query (list leases)', () =>
              client.send(
                new QueryCommand({
                  TableName: leaseTable.tableName,
                  ...buildExpressions({
                    keyCondition: {
                      expression: `#${LEASE_ATTRIBUTES.applicationName} = :applicationName`,
                      values: { ':applicationName': { S: applicationName } },
                    },
                  }),
                  ConsistentRead: resolved.consistentReads,
                  ...page,
                  ...exclusiveStartKey,
                }),
              ),
            );
      for (const item of output.Items ?? []) {
        const row = decodeLeaseRow(item);
        if (row.kind === 'lease') {
          leases.push(row.lease);
        } else if (row.kind === 'other') {
          skippedRowCount += 1;
          skipped[row.entityType] = (skipped[row.entityType] ?? 0) + 1;
        } else if (collect) {
          invalidRows.push({ leaseKey: row.leaseKey, problem: row.problem });
        } else {
          throw new LeaseDataError(
            PACKAGE_NAME,
            row.leaseKey,
            `${row.problem} (table ${JSON.stringify(leaseTable.tableName)}); fix the item or delete it`,
          );
        }
      }
      startKey = output.LastEvaluatedKey;
    } while (startKey !== undefined);
    leases.sort((a, b) => compareLeaseKeys(a.leaseKey, b.leaseKey));
    return {
      leases,
      skippedRowCount,
      skippedRowsByEntityType: Object.freeze(skipped),
      invalidRows: Object.freeze(invalidRows),
    };
  };

  return {
    specificationVersion: 'v1',
    applicationName,
    capabilities: Object.freeze({ batchRenew: false, consistentReads: resolved.consistentReads }),
    description: `DynamoDB table ${JSON.stringify(leaseTable.tableName)} (${layout} layout, worker registry ${JSON.stringify(workerTable.tableName)}), application ${JSON.stringify(applicationName)}`,
    layout,
    tableName: leaseTable.tableName,
    workerTableName: workerTable.tableName,

    async ensureSchema() {
      const common = {
        client,
        billing,
        clock,
        timeoutMs: resolved.schemaWaitTimeoutMs,
        pollIntervalMs: resolved.schemaPollIntervalMs,
      };
      const [leaseTableDescription] = await Promise.all([
        ensureTable({ ...common, definition: leaseTable }),
        ensureTable({ ...common, definition: workerTable }),
      ]);
      if (layout === 'java') {
        // The claim belongs to the lease table: recorded in this store's registry (atomic, and what
        // earlier versions check) and on the lease table itself, which applications with different
        // registries share.
        await registry.claimTable(leaseTable.tableName);
        await claimLeaseTableTag({
          client,
          definition: leaseTable,
          billing,
          tableArn: leaseTableDescription.TableArn,
          applicationName,
          logger: resolved.logger,
        });
      }
    },

    async createLeaseIfAbsent(init: LeaseInit) {
      const item = encodeLeaseItem(leaseFromInit(init), extraKey);
      // Decoded before writing, so a lease that could not be read back is never written.
      const lease = leaseOf(init.leaseKey, item) as Lease;
      const created = await send(`PutItem (create lease ${JSON.stringify(init.leaseKey)})`, async () => {
        try {
          await client.send(
            new PutItemCommand({
              TableName: leaseTable.tableName,
              Item: item,
              ...buildExpressions({
                condition: { expression: `attribute_not_exists(#${LEASE_ATTRIBUTES.leaseKey})` },
              }),
            }),
          );
          return true;
        } catch (error) {
          if (isConditionalCheckFailed(error)) return false;
          throw error;
        }
      });
      return created ? { ok: true, lease } : { ok: false, reason: 'already-exists' };
    },

    async getLease(leaseKey) {
      const item = await readItem(leaseKey, resolved.consistentReads);
      return item === null ? null : leaseOf(leaseKey, item);
    },

    async listLeases() {
      // One unreadable row must not hide the fleet's other leases (every worker's rebalancing would stop
      // on it), so it is skipped and reported, as the Java KCL's scan skips and logs it. `getLease` of
      // that key still rejects with the LeaseDataError naming it.
      const summary = await scanSummary({ invalidRows: 'collect' });
      for (const row of summary.invalidRows) {
        resolved.logger.warn(
          `${PACKAGE_NAME}: skipped lease ${JSON.stringify(row.leaseKey)}, which cannot be read: ${row.problem} (table ${JSON.stringify(leaseTable.tableName)}); no worker will process it until you fix the item or delete it (store.scanSummary() lists every such row)`,
          { table: leaseTable.tableName, leaseKey: row.leaseKey, problem: row.problem },
        );
      }
      return summary.leases;
    },

    scanSummary,

    renewLease,

    async renewLeases(renewals: readonly LeaseRenewal[]) {
      // Each renewal is its own UpdateItem, so each can fail alone (throttled, timed out) while the
      // others apply; the caller must learn of both, so a failure is that lease's result.
      return mapConcurrently(
        renewals,
        resolved.renewConcurrency,
        async (renewal): Promise<LeaseBatchWriteResult> => {
          try {
            return await renewLease(renewal.leaseKey, renewal.leaseCounter);
          } catch (error) {
            return { ok: false, reason: 'failed', error };
          }
        },
      );
    },

    async takeLease(leaseKey, leaseCounter, owner) {
      const next = numberValue(leaseCounter + 1);
      const ownerValue = { ':owner': { S: owner } };
      const taken = { [LEASE_ATTRIBUTES.leaseOwner]: { S: owner }, [LEASE_ATTRIBUTES.leaseCounter]: next };
      // A KCL 3.x graceful hand-off in progress ends when the lease is taken, as the Java taker does.
      const remove = [LEASE_ATTRIBUTES.checkpointOwner];
      // Only a take from another owner counts an owner switch, as the Java KCL's taker counts it; a take
      // of a free lease or by the current owner does not. One UpdateItem cannot ADD conditionally, so try
      // the write without a switch first (free leases after a start or a graceful stop, re-adopted own
      // leases) and fall back to the counting one when DynamoDB says another owner held it.
      const withoutSwitch = await update(
        'take',
        leaseKey,
        { set: taken, remove },
        counterCondition(leaseCounter, {
          expression: `(attribute_not_exists(#${LEASE_ATTRIBUTES.leaseOwner}) OR #${LEASE_ATTRIBUTES.leaseOwner} = :owner)`,
          values: ownerValue,
        }),
      );
      if (withoutSwitch.ok) return withoutSwitch;
      const seen = withoutSwitch.seen;
      const seenOwner = seen?.[LEASE_ATTRIBUTES.leaseOwner]?.S;
      const otherOwnerAtCounter =
        seen !== undefined &&
        counterOf(seen) === leaseCounter &&
        seenOwner !== undefined &&
        seenOwner !== owner;
      if (seen !== undefined && !otherOwnerAtCounter) {
        return { ok: false, reason: await lostReason(leaseKey, seen) };
      }
      const fromAnotherOwner = await update(
        'take',
        leaseKey,
        {
          set: taken,
          add: { [LEASE_ATTRIBUTES.ownerSwitchesSinceCheckpoint]: numberValue(1) },
          remove,
        },
        counterCondition(leaseCounter, {
          expression: `attribute_exists(#${LEASE_ATTRIBUTES.leaseOwner}) AND #${LEASE_ATTRIBUTES.leaseOwner} <> :owner`,
          values: ownerValue,
        }),
      );
      return lost(leaseKey, fromAnotherOwner);
    },

    releaseLease(leaseKey, leaseCounter) {
      return fenced('release', leaseKey, leaseCounter, {
        remove: [LEASE_ATTRIBUTES.leaseOwner, LEASE_ATTRIBUTES.checkpointOwner],
      });
    },

    updateCheckpoint(leaseKey, leaseCounter, checkpointUpdate: CheckpointUpdate) {
      const pending = checkpointUpdate.pendingCheckpoint ?? null;
      const set: Record<string, AttributeValue> = {
        ...checkpointAttributes(checkpointUpdate.checkpoint),
        [LEASE_ATTRIBUTES.ownerSwitchesSinceCheckpoint]: numberValue(0),
      };
      // The opaque prepared-checkpoint state of the Java KCL belongs to a pending checkpoint kcl does
      // not know, so it goes whenever kcl writes a checkpoint.
      const remove: string[] = [LEASE_ATTRIBUTES.pendingCheckpointState];
      if (pending === null) {
        remove.push(LEASE_ATTRIBUTES.pendingCheckpoint, LEASE_ATTRIBUTES.pendingCheckpointSubSequenceNumber);
      } else {
        Object.assign(set, pendingCheckpointAttributes(pending));
      }
      return fenced('checkpoint', leaseKey, leaseCounter, { set, remove });
    },

    async updateLeaseMeta(leaseKey, metaUpdate: LeaseMetaUpdate) {
      const set: Record<string, AttributeValue> = {};
      const remove: string[] = [];
      if (metaUpdate.childShardIds !== undefined) {
        const children = stringSetValue(metaUpdate.childShardIds);
        if (children === null) remove.push(LEASE_ATTRIBUTES.childShardIds);
        else set[LEASE_ATTRIBUTES.childShardIds] = children;
      }
      if (metaUpdate.hashKeyRange !== undefined)
        Object.assign(set, hashKeyRangeAttributes(metaUpdate.hashKeyRange));
      if (Object.keys(set).length === 0 && remove.length === 0) {
        const item = await readItem(leaseKey, true);
        return item === null ? null : leaseOf(leaseKey, item);
      }
      // Conditional only on the lease existing, as the Java KCL's updateLeaseWithMetaInfo: no counter.
      const outcome = await update('record meta of', leaseKey, { set, remove }, LEASE_ROW);
      return outcome.ok ? outcome.lease : null;
    },

    async deleteLease(leaseKey) {
      await send(`DeleteItem (lease ${JSON.stringify(leaseKey)})`, async () => {
        try {
          await client.send(
            new DeleteItemCommand({
              TableName: leaseTable.tableName,
              Key: keyOf(leaseKey),
              // A KCL 3.x row of another entity type under this key is not a lease: leave it.
              ...buildExpressions({
                condition: {
                  expression: `attribute_not_exists(#${LEASE_ATTRIBUTES.entityType}) OR #${LEASE_ATTRIBUTES.entityType} = :leaseEntityType`,
                  values: { ':leaseEntityType': { S: LEASE_ENTITY_TYPE } },
                },
              }),
            }),
          );
        } catch (error) {
          if (!isConditionalCheckFailed(error)) throw error;
        }
      });
    },

    heartbeatWorker(workerId, metadata = {}) {
      return registry.heartbeat(workerId, metadata);
    },

    listWorkers() {
      return registry.list();
    },

    removeWorker(workerId) {
      return registry.remove(workerId);
    },

    getMigrationMarker() {
      return registry.getMarker();
    },

    setMigrationMarker(marker) {
      return registry.setMarker(marker);
    },
  };
}

/**
 * Reads a lease table and reports the application's leases next to the rows it skipped (KCL 3.x
 * entity types) and the rows it cannot read, without failing on the latter. For migration tools.
 */
export function summarizeDynamoLeaseTable(
  options: DynamoLeaseStoreOptions,
): Promise<DynamoLeaseTableSummary> {
  return createDynamoLeaseStore(options).scanSummary({ invalidRows: 'collect' });
}

function counterOf(item: DynamoItem): number | null {
  const value = item[LEASE_ATTRIBUTES.leaseCounter]?.N;
  return value === undefined ? null : Number(value);
}

/** Runs `run` over `items` with at most `limit` calls in flight; results keep the input order. */
async function mapConcurrently<T, R>(
  items: readonly T[],
  limit: number,
  run: (item: T) => Promise<R>,
): Promise<R[]> {
  const results = new Array<R>(items.length);
  let next = 0;
  const lanes = Array.from({ length: Math.min(limit, items.length) }, async () => {
    while (next < items.length) {
      const index = next++;
      results[index] = await run(items[index] as T);
    }
  });
  await Promise.all(lanes);
  return results;
}
