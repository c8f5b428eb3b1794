import type { AttributeValue, DynamoDBClient } from '@aws-sdk/client-dynamodb';
import {
  DeleteItemCommand,
  GetItemCommand,
  PutItemCommand,
  QueryCommand,
  UpdateItemCommand,
} from '@aws-sdk/client-dynamodb';
import type { Clock, MigrationMarker, WorkerRecord } from '@kcl/core';
import { compareLeaseKeys, LeaseStoreError } from '@kcl/core';
import { mapDynamoError } from './dynamo-error-mapping.js';
import { buildExpressions } from './dynamo-expression.js';
import type { DynamoItem } from './dynamo-item-codec.js';
import type { DynamoTableBilling } from './dynamo-lease-store-options.js';
import { DEFAULT_WORKER_TABLE_SUFFIX, PACKAGE_NAME } from './dynamo-lease-store-options.js';
import { tableClaimedError } from './dynamo-table-claim.js';
import type { DynamoTableDefinition } from './dynamo-table-schema.js';
import { WORKER_TABLE_RANGE_KEY } from './dynamo-table-schema.js';

/** Attribute names of the worker registry table. */
export const WORKER_ATTRIBUTES = Object.freeze({
  applicationName: 'applicationName',
  entryKey: WORKER_TABLE_RANGE_KEY,
  workerId: 'workerId',
  heartbeat: 'heartbeat',
  lastHeartbeatAt: 'lastHeartbeatAt',
  metadata: 'metadata',
  migratedTo: 'migratedTo',
  migratedAt: 'migratedAt',
});

/** Range-key prefix of worker entries; the prefix keeps any worker id apart from the marker's key. */
export const WORKER_ENTRY_PREFIX = 'worker:';
/** Range key of the migration marker. It has no `worker:` prefix, so no worker id can reach it. */
export const MIGRATION_MARKER_ENTRY = 'migration-marker';
/**
 * Where a Java-layout lease table records the one application it belongs to: a partition of the
 * registry that no application's entries use (they are keyed by application name and prefixed entries).
 */
export const TABLE_OWNER_PARTITION = 'kcl:table';
export const TABLE_OWNER_ENTRY = 'java-layout-owner';

/**
 * The registry entry of a lease table's claim. The claim belongs to the lease table, so a registry
 * shared by several lease tables keeps one claim per lease table (`java-layout-owner:<table>`). In a
 * lease table's own default registry (`<table>-kcl-workers`) the table is implied and the entry keeps
 * the name claims have always had there, so those claims still hold.
 */
export function tableOwnerEntryKey(leaseTableName: string, workerTableName: string): string {
  return workerTableName === `${leaseTableName}${DEFAULT_WORKER_TABLE_SUFFIX}`
    ? TABLE_OWNER_ENTRY
    : `${TABLE_OWNER_ENTRY}:${leaseTableName}`;
}

export interface DynamoWorkerRegistryOptions {
  readonly client: DynamoDBClient;
  readonly definition: DynamoTableDefinition;
  readonly billing: DynamoTableBilling;
  readonly applicationName: string;
  readonly clock: Clock;
  readonly consistentReads: boolean;
  readonly pageSize: number | null;
}

export interface DynamoWorkerRegistry {
  heartbeat(workerId: string, metadata: Readonly<Record<string, string>>): Promise<WorkerRecord>;
  list(): Promise<WorkerRecord[]>;
  remove(workerId: string): Promise<void>;
  getMarker(): Promise<MigrationMarker | null>;
  setMarker(marker: MigrationMarker | null): Promise<void>;
  /**
   * Records this application as the owner of a Java-layout lease table in this registry (an entry
   * keyed by the lease table), or fails when another application already owns it: that layout has no
   * application column, so two applications on one table would read and take each other's leases.
   */
  claimTable(leaseTableName: string): Promise<void>;
}

/**
 * The worker registry and the migration marker, kept in their own table (never in the lease table,
 * where a Java KCL 2.x worker would read them as leases). One partition per application.
 */
export function createDynamoWorkerRegistry(options: DynamoWorkerRegistryOptions): DynamoWorkerRegistry {
  const { client, definition, billing, applicationName, clock } = options;

  const key = (entryKey: string): DynamoItem => ({
    [WORKER_ATTRIBUTES.applicationName]: { S: applicationName },
    [WORKER_ATTRIBUTES.entryKey]: { S: entryKey },
  });

  const send = async <T>(operation: string, run: () => Promise<T>): Promise<T> => {
    try {
      return await run();
    } catch (error) {
      throw mapDynamoError(error, { operation, table: definition, billing });
    }
  };

  const invalid = (what: string, problem: string): LeaseStoreError =>
    new LeaseStoreError(
      PACKAGE_NAME,
      `${PACKAGE_NAME}: ${what} in table ${JSON.stringify(definition.tableName)} cannot be read: ${problem}; delete the item and let the worker heartbeat again`,
      { code: 'LEASE_DATA_INVALID', retryable: false },
    );

  const decodeWorker = (item: DynamoItem): WorkerRecord => {
    const workerId = item[WORKER_ATTRIBUTES.workerId]?.S;
    const entry = item[WORKER_ATTRIBUTES.entryKey]?.S ?? '(unknown)';
    if (workerId === undefined)
      throw invalid(`worker entry ${JSON.stringify(entry)}`, 'workerId (S) is missing');
    const heartbeat = Number(item[WORKER_ATTRIBUTES.heartbeat]?.N);
    const at = Number(item[WORKER_ATTRIBUTES.lastHeartbeatAt]?.N);
    if (!Number.isSafeInteger(heartbeat) || !Number.isFinite(at)) {
      throw invalid(
        `worker ${JSON.stringify(workerId)}`,
        'heartbeat and lastHeartbeatAt must be numbers (N)',
      );
    }
    const metadata: Record<string, string> = {};
    for (const [name, value] of Object.entries(item[WORKER_ATTRIBUTES.metadata]?.M ?? {})) {
      if (value.S === undefined) {
        throw invalid(
          `worker ${JSON.stringify(workerId)}`,
          `metadata ${JSON.stringify(name)} is not a string`,
        );
      }
      metadata[name] = value.S;
    }
    return Object.freeze({
      workerId,
      heartbeat,
      lastHeartbeatAt: new Date(at),
      metadata: Object.freeze(metadata),
    });
  };

  return {
    async heartbeat(workerId, metadata) {
      const entries = Object.entries(metadata);
      const metadataValue: AttributeValue = {
        M: Object.fromEntries(entries.map(([name, value]) => [name, { S: value }])),
      };
      const output = await send(`UpdateItem (heartbeat of worker ${JSON.stringify(workerId)})`, () =>
        client.send(
          new UpdateItemCommand({
            TableName: definition.tableName,
            Key: key(`${WORKER_ENTRY_PREFIX}${workerId}`),
            ...buildExpressions({
              update: {
                set: {
                  [WORKER_ATTRIBUTES.workerId]: { S: workerId },
                  [WORKER_ATTRIBUTES.lastHeartbeatAt]: { N: String(clock.now()) },
                  ...(entries.length > 0 ? { [WORKER_ATTRIBUTES.metadata]: metadataValue } : {}),
                },
                // ADD is atomic, so concurrent heartbeats of one worker each count.
                add: { [WORKER_ATTRIBUTES.heartbeat]: { N: '1' } },
                remove: entries.length > 0 ? [] : [WORKER_ATTRIBUTES.metadata],
              },
            }),
            ReturnValues: 'ALL_NEW',
          }),
        ),
      );
      return decodeWorker(output.Attributes ?? {});
    },

    async list() {
      const workers: WorkerRecord[] = [];
      let startKey: DynamoItem | undefined;
      do {
        const page = await send('Query (list workers)', () =>
          client.send(
            new QueryCommand({
              TableName: definition.tableName,
              ...buildExpressions({
                keyCondition: {
                  expression: `#${WORKER_ATTRIBUTES.applicationName} = :applicationName AND begins_with(#${WORKER_ATTRIBUTES.entryKey}, :workerPrefix)`,
                  values: {
                    ':applicationName': { S: applicationName },
                    ':workerPrefix': { S: WORKER_ENTRY_PREFIX },
                  },
                },
              }),
              ConsistentRead: options.consistentReads,
              ...(options.pageSize === null ? {} : { Limit: options.pageSize }),
              ...(startKey === undefined ? {} : { ExclusiveStartKey: startKey }),
            }),
          ),
        );
        for (const item of page.Items ?? []) workers.push(decodeWorker(item));
        startKey = page.LastEvaluatedKey;
      } while (startKey !== undefined);
      return workers.sort((a, b) => compareLeaseKeys(a.workerId, b.workerId));
    },

    async remove(workerId) {
      await send(`DeleteItem (remove worker ${JSON.stringify(workerId)})`, () =>
        client.send(
          new DeleteItemCommand({
            TableName: definition.tableName,
            Key: key(`${WORKER_ENTRY_PREFIX}${workerId}`),
          }),
        ),
      );
    },

    async getMarker() {
      const output = await send('GetItem (migration marker)', () =>
        client.send(
          new GetItemCommand({
            TableName: definition.tableName,
            Key: key(MIGRATION_MARKER_ENTRY),
            ConsistentRead: true,
          }),
        ),
      );
      const item = output.Item;
      if (item === undefined) return null;
      const migratedTo = item[WORKER_ATTRIBUTES.migratedTo]?.S;
      const migratedAt = Number(item[WORKER_ATTRIBUTES.migratedAt]?.N);
      if (migratedTo === undefined || !Number.isFinite(migratedAt)) {
        throw invalid(
          'the migration marker',
          'migratedTo (S) and migratedAt (N, epoch milliseconds) are required',
        );
      }
      return Object.freeze({ migratedTo, migratedAt: new Date(migratedAt) });
    },

    async claimTable(leaseTableName) {
      const entryKey = tableOwnerEntryKey(leaseTableName, definition.tableName);
      const ownerKey: DynamoItem = {
        [WORKER_ATTRIBUTES.applicationName]: { S: TABLE_OWNER_PARTITION },
        [WORKER_ATTRIBUTES.entryKey]: { S: entryKey },
      };
      try {
        await client.send(
          new PutItemCommand({
            TableName: definition.tableName,
            Item: { ...ownerKey, owner: { S: applicationName }, leaseTable: { S: leaseTableName } },
            ConditionExpression: 'attribute_not_exists(#owner) OR #owner = :owner',
            ExpressionAttributeNames: { '#owner': 'owner' },
            ExpressionAttributeValues: { ':owner': { S: applicationName } },
          }),
        );
      } catch (error) {
        if ((error as { name?: string }).name !== 'ConditionalCheckFailedException') {
          throw mapDynamoError(error, {
            operation: 'PutItem (claim the lease table)',
            table: definition,
            billing,
          });
        }
        const output = await send('GetItem (lease table owner)', () =>
          client.send(
            new GetItemCommand({ TableName: definition.tableName, Key: ownerKey, ConsistentRead: true }),
          ),
        );
        const owner = output.Item?.owner?.S ?? '(unknown)';
        throw tableClaimedError(
          leaseTableName,
          owner,
          applicationName,
          `the entry ${JSON.stringify(entryKey)} of partition ${JSON.stringify(TABLE_OWNER_PARTITION)} in worker table ${JSON.stringify(definition.tableName)}`,
        );
      }
    },

    async setMarker(marker) {
      if (marker === null) {
        await send('DeleteItem (clear migration marker)', () =>
          client.send(
            new DeleteItemCommand({ TableName: definition.tableName, Key: key(MIGRATION_MARKER_ENTRY) }),
          ),
        );
        return;
      }
      await send('PutItem (set migration marker)', () =>
        client.send(
          new PutItemCommand({
            TableName: definition.tableName,
            Item: {
              ...key(MIGRATION_MARKER_ENTRY),
              [WORKER_ATTRIBUTES.migratedTo]: { S: marker.migratedTo },
              [WORKER_ATTRIBUTES.migratedAt]: { N: String(marker.migratedAt.getTime()) },
            },
          }),
        ),
      );
    },
  };
}
