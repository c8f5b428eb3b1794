import type { AttributeValue, DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { GetItemCommand, QueryCommand, ScanCommand, UpdateItemCommand } from '@aws-sdk/client-dynamodb';
import type {
  Lease,
  LeaseTableScan,
  LeaseWriteResult,
  Logger,
  LostRaceReason,
  UnreadableLeaseRow,
} from '@kcl/core';
import { compareLeaseKeys, LeaseDataError } from '@kcl/core';
import {
  isConditionalCheckFailed,
  itemOfConditionFailure,
  mapDynamoError,
  sendOptions,
} from './dynamo-error-mapping.js';
import type { DynamoCondition, DynamoUpdate } from './dynamo-expression.js';
import { buildExpressions } from './dynamo-expression.js';
import type { DynamoItem } from './dynamo-item-codec.js';
import { decodeLeaseRow, LEASE_ATTRIBUTES, LEASE_ENTITY_TYPE, numberValue } from './dynamo-item-codec.js';
import type { DynamoLeaseTableLayout, DynamoTableBilling } from './dynamo-lease-store-options.js';
import { PACKAGE_NAME } from './dynamo-lease-store-options.js';
import type { DynamoTableDefinition } from './dynamo-table-schema.js';

/** Everything the lease operations need to reach one application's rows of the lease table. */
export interface DynamoLeaseTable {
  readonly client: DynamoDBClient;
  readonly definition: DynamoTableDefinition;
  readonly layout: DynamoLeaseTableLayout;
  readonly billing: DynamoTableBilling;
  readonly applicationName: string;
  readonly consistentReads: boolean;
  /** Items per Scan/Query page; null lets DynamoDB fill 1 MB pages. */
  readonly pageSize: number | null;
  readonly renewConcurrency: number;
  readonly logger: Logger;
}

/** What `admin.scan()` of a DynamoDB store reports: the contract's scan plus the rows that are not leases. */
export interface DynamoLeaseTableScan extends LeaseTableScan {
  /** Rows skipped because their `entityType` is not `LEASE` (KCL 3.x worker metrics, leader, migration state…). */
  readonly skippedRowCount: number;
  /** The skipped rows counted by `entityType`, e.g. `{ WORKER_METRIC_STATS: 3, LEADER: 1 }`. */
  readonly skippedRowsByEntityType: Readonly<Record<string, number>>;
}

/** The outcome of one conditional UpdateItem. `seen` is the item the condition failed on, if DynamoDB returned it. */
export type ConditionalOutcome =
  | { readonly ok: true; readonly lease: Lease }
  | { readonly ok: false; readonly seen: DynamoItem | undefined };

/** A row that is a lease: never touch a KCL 3.x row of another entity type that shares a key with one. */
export const LEASE_ROW: DynamoCondition = {
  expression: `attribute_exists(#${LEASE_ATTRIBUTES.leaseKey}) AND (attribute_not_exists(#${LEASE_ATTRIBUTES.entityType}) OR #${LEASE_ATTRIBUTES.entityType} = :leaseEntityType)`,
  values: { ':leaseEntityType': { S: LEASE_ENTITY_TYPE } },
};

/** The key of a lease's item: `leaseKey` in the Java layout, `applicationName` + `leaseKey` in the shared one. */
export function leaseItemKey(table: DynamoLeaseTable, leaseKey: string): DynamoItem {
  return { ...applicationKey(table), [LEASE_ATTRIBUTES.leaseKey]: { S: leaseKey } };
}

/** The key attributes every item of the shared layout carries besides `leaseKey`; none in the Java layout. */
export function applicationKey(table: DynamoLeaseTable): DynamoItem {
  return table.layout === 'java' ? {} : { [LEASE_ATTRIBUTES.applicationName]: { S: table.applicationName } };
}

/** Runs one DynamoDB call, turning whatever it throws into a kcl error that names the call. */
export async function callLeaseTable<T>(
  table: DynamoLeaseTable,
  operation: string,
  signal: AbortSignal | undefined,
  run: () => Promise<T>,
): Promise<T> {
  try {
    return await run();
  } catch (error) {
    throw mapDynamoError(error, { operation, table: table.definition, billing: table.billing, signal });
  }
}

/** The error for a lease row that cannot be read, naming the key and the table. */
export function unreadableLeaseError(
  table: DynamoLeaseTable,
  leaseKey: string,
  problem: string,
): LeaseDataError {
  return new LeaseDataError(
    PACKAGE_NAME,
    leaseKey,
    `${problem} (table ${JSON.stringify(table.definition.tableName)}); fix the item or delete it`,
  );
}

/** The lease an item holds; null for a row of another entity type; a `LeaseDataError` for an unreadable one. */
export function leaseOfItem(table: DynamoLeaseTable, leaseKey: string, item: DynamoItem): Lease | null {
  const row = decodeLeaseRow(item);
  if (row.kind === 'lease') return row.lease;
  if (row.kind === 'other') return null;
  throw unreadableLeaseError(table, row.leaseKey.length > 0 ? row.leaseKey : leaseKey, row.problem);
}

export async function readLeaseItem(
  table: DynamoLeaseTable,
  leaseKey: string,
  consistent: boolean,
  signal: AbortSignal | undefined,
): Promise<DynamoItem | null> {
  const output = await callLeaseTable(table, `GetItem (lease ${JSON.stringify(leaseKey)})`, signal, () =>
    table.client.send(
      new GetItemCommand({
        TableName: table.definition.tableName,
        Key: leaseItemKey(table, leaseKey),
        ConsistentRead: consistent,
      }),
      sendOptions(signal),
    ),
  );
  return output.Item ?? null;
}

/** One conditional UpdateItem on a lease row, returning the lease as written. */
export async function updateLeaseItem(
  table: DynamoLeaseTable,
  operation: string,
  leaseKey: string,
  change: DynamoUpdate,
  condition: DynamoCondition,
  signal: AbortSignal | undefined,
): Promise<ConditionalOutcome> {
  const outcome = await callLeaseTable(
    table,
    `UpdateItem (${operation} lease ${JSON.stringify(leaseKey)})`,
    signal,
    async () => {
      try {
        const output = await table.client.send(
          new UpdateItemCommand({
            TableName: table.definition.tableName,
            Key: leaseItemKey(table, leaseKey),
            ...buildExpressions({ update: change, condition }),
            ReturnValues: 'ALL_NEW',
            // DynamoDB returns the item that failed the condition, which tells a missing lease from a
            // moved counter without a second read. Emulators that ignore this get the read instead.
            ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
          }),
          sendOptions(signal),
        );
        return { ok: true as const, item: output.Attributes ?? {} };
      } catch (error) {
        if (isConditionalCheckFailed(error))
          return { ok: false as const, seen: itemOfConditionFailure(error) };
        throw error;
      }
    },
  );
  if (!outcome.ok) return outcome;
  const lease = leaseOfItem(table, leaseKey, outcome.item);
  if (lease === null) {
    // Unreachable: every condition admits only lease rows.
    throw new LeaseDataError(PACKAGE_NAME, leaseKey, 'the written item is not a lease');
  }
  return { ok: true, lease };
}

/** The Java KCL's fence: the row is a lease whose counter is the one the caller last saw (and `extra`). */
export function counterCondition(leaseCounter: number, extra?: DynamoCondition): DynamoCondition {
  return {
    expression: `${LEASE_ROW.expression} AND #${LEASE_ATTRIBUTES.leaseCounter} = :expectedCounter${extra === undefined ? '' : ` AND (${extra.expression})`}`,
    values: { ...LEASE_ROW.values, ':expectedCounter': numberValue(leaseCounter), ...extra?.values },
  };
}

/** Why a conditional write lost: from the item DynamoDB returned, or from a consistent read. */
export async function lostRaceReason(
  table: DynamoLeaseTable,
  leaseKey: string,
  seen: DynamoItem | undefined,
  signal: AbortSignal | undefined,
): Promise<LostRaceReason> {
  const item = seen ?? (await readLeaseItem(table, leaseKey, true, signal));
  return item !== null && rowIsLease(item) ? 'counter-mismatch' : 'not-found';
}

/** Whether a row is a lease, not a KCL 3.x row of another entity type that shares a key with one. */
export function rowIsLease(item: DynamoItem): boolean {
  const entityType = item[LEASE_ATTRIBUTES.entityType];
  return entityType === undefined || entityType.S === LEASE_ENTITY_TYPE;
}

/** A conditional outcome as the contract reports it. */
export async function writeResult(
  table: DynamoLeaseTable,
  leaseKey: string,
  outcome: ConditionalOutcome,
  signal: AbortSignal | undefined,
): Promise<LeaseWriteResult> {
  return outcome.ok
    ? outcome
    : { ok: false, reason: await lostRaceReason(table, leaseKey, outcome.seen, signal) };
}

/**
 * Reads every row of the application (a Scan of the Java layout's table, a Query of the shared
 * layout's partition) and sorts them into leases, rows of other KCL 3.x entity types, and lease rows
 * that cannot be read, which are reported rather than failing the read.
 */
export async function scanLeaseTable(
  table: DynamoLeaseTable,
  signal: AbortSignal | undefined,
): Promise<DynamoLeaseTableScan> {
  const leases: Lease[] = [];
  const skipped: Record<string, number> = {};
  let skippedRowCount = 0;
  const unreadable: UnreadableLeaseRow[] = [];
  const page = table.pageSize === null ? {} : { Limit: table.pageSize };
  let startKey: Record<string, AttributeValue> | undefined;
  do {
    const exclusiveStartKey = startKey === undefined ? {} : { ExclusiveStartKey: startKey };
    const output =
      table.layout === 'java'
        ? await callLeaseTable(table, 'Scan (list leases)', signal, () =>
            table.client.send(
              new ScanCommand({
                TableName: table.definition.tableName,
                ConsistentRead: table.consistentReads,
                ...page,
                ...exclusiveStartKey,
              }),
              sendOptions(signal),
            ),
          )
        : await callLeaseTable(table, 'Query (list leases)', signal, () =>
            table.client.send(
              new QueryCommand({
                TableName: table.definition.tableName,
                ...buildExpressions({
                  keyCondition: {
                    expression: `#${LEASE_ATTRIBUTES.applicationName} = :applicationName`,
                    values: { ':applicationName': { S: table.applicationName } },
                  },
                }),
                ConsistentRead: table.consistentReads,
                ...page,
                ...exclusiveStartKey,
              }),
              sendOptions(signal),
            ),
          );
    for (const item of output.Items ?? []) {
      const row = decodeLeaseRow(item);
      if (row.kind === 'lease') {
        leases.push(row.lease);
      } else if (row.kind === 'other') {
        skippedRowCount += 1;
        skipped[row.entityType] = (skipped[row.entityType] ?? 0) + 1;
      } else {
        unreadable.push(Object.freeze({ leaseKey: row.leaseKey, problem: row.problem }));
      }
    }
    startKey = output.LastEvaluatedKey;
  } while (startKey !== undefined);
  leases.sort((a, b) => compareLeaseKeys(a.leaseKey, b.leaseKey));
  return Object.freeze({
    leases: Object.freeze(leases),
    unreadable: Object.freeze(unreadable),
    otherRows: Object.freeze({ ...skipped }),
    skippedRowCount,
    skippedRowsByEntityType: Object.freeze(skipped),
  });
}
