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
import { isConditionalCheckFailed, mapDynamoError, sendOptions } from './dynamo-error-mapping.js';
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

/** What a worker listing without metadata reads of each entry. */
const WITHOUT_METADATA = [
  WORKER_ATTRIBUTES.workerId,
  WORKER_ATTRIBUTES.heartbeat,
  WORKER_ATTRIBUTES.lastHeartbeatAt,
] as const;

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

/**
 * The worker registry and the migration marker, kept in their own table (never in the lease table,
 * where a Java KCL 2.x worker would read them as leases). One partition per application.
 */
export class DynamoWorkerRegistry {
  readonly #options: DynamoWorkerRegistryOptions;

  constructor(options: DynamoWorkerRegistryOptions) {
    this.#options = options;
  }

  get #tableName(): string {
    return this.#options.definition.tableName;
  }

  /**
   * Counts a heartbeat of the worker and records it now. Metadata given replaces the stored one (an
   * empty map removes the attribute, which reads back as no metadata); no metadata leaves the stored
   * one as it is, so a bare liveness beat never wipes what the worker published.
   */
  async heartbeat(
    workerId: string,
    metadata: Readonly<Record<string, string>> | undefined,
    signal?: AbortSignal,
  ): Promise<WorkerRecord> {
    const entries = Object.entries(metadata ?? {});
    const metadataValue: AttributeValue = {
      M: Object.fromEntries(entries.map(([name, value]) => [name, { S: value }])),
    };
    const replaceMetadata = metadata !== undefined && entries.length > 0;
    const removeMetadata = metadata !== undefined && entries.length === 0;
    const output = await this.#send(
      `UpdateItem (heartbeat of worker ${JSON.stringify(workerId)})`,
      signal,
      () =>
        this.#options.client.send(
          new UpdateItemCommand({
            TableName: this.#tableName,
            Key: this.#key(`${WORKER_ENTRY_PREFIX}${workerId}`),
            ...buildExpressions({
              update: {
                set: {
                  [WORKER_ATTRIBUTES.workerId]: { S: workerId },
                  [WORKER_ATTRIBUTES.lastHeartbeatAt]: { N: String(this.#options.clock.now()) },
                  ...(replaceMetadata ? { [WORKER_ATTRIBUTES.metadata]: metadataValue } : {}),
                },
                // ADD is atomic, so concurrent heartbeats of one worker each count.
                add: { [WORKER_ATTRIBUTES.heartbeat]: { N: '1' } },
                remove: removeMetadata ? [WORKER_ATTRIBUTES.metadata] : [],
              },
            }),
            ReturnValues: 'ALL_NEW',
          }),
          sendOptions(signal),
        ),
    );
    return this.#decodeWorker(output.Attributes ?? {});
  }

  /**
   * Every worker of the application, page by page, in worker id order. Without metadata the query
   * projects the other attributes only, so the metadata (up to kilobytes a worker) is neither read nor
   * billed.
   */
  async list(signal?: AbortSignal, withMetadata = true): Promise<WorkerRecord[]> {
    const { applicationName, consistentReads, pageSize } = this.#options;
    const workers: WorkerRecord[] = [];
    let startKey: DynamoItem | undefined;
    const expressions = buildExpressions({
      keyCondition: {
        expression: `#${WORKER_ATTRIBUTES.applicationName} = :applicationName AND begins_with(#${WORKER_ATTRIBUTES.entryKey}, :workerPrefix)`,
        values: {
          ':applicationName': { S: applicationName },
          ':workerPrefix': { S: WORKER_ENTRY_PREFIX },
        },
      },
    });
    const projection = withMetadata
      ? {}
      : {
          ProjectionExpression: WITHOUT_METADATA.map((name) => `#${name}`).join(', '),
          ExpressionAttributeNames: {
            ...expressions.ExpressionAttributeNames,
            ...Object.fromEntries(WITHOUT_METADATA.map((name) => [`#${name}`, name])),
          },
        };
    do {
      const page = await this.#send('Query (list workers)', signal, () =>
        this.#options.client.send(
          new QueryCommand({
            TableName: this.#tableName,
            ...expressions,
            ...projection,
            ConsistentRead: consistentReads,
            ...(pageSize === null ? {} : { Limit: pageSize }),
            ...(startKey === undefined ? {} : { ExclusiveStartKey: startKey }),
          }),
          sendOptions(signal),
        ),
      );
      for (const item of page.Items ?? []) workers.push(this.#decodeWorker(item));
      startKey = page.LastEvaluatedKey;
    } while (startKey !== undefined);
    return workers.sort((a, b) => compareLeaseKeys(a.workerId, b.workerId));
  }

  async remove(workerId: string, signal?: AbortSignal): Promise<void> {
    await this.#send(`DeleteItem (remove worker ${JSON.stringify(workerId)})`, signal, () =>
      this.#options.client.send(
        new DeleteItemCommand({
          TableName: this.#tableName,
          Key: this.#key(`${WORKER_ENTRY_PREFIX}${workerId}`),
        }),
        sendOptions(signal),
      ),
    );
  }

  async getMarker(signal?: AbortSignal): Promise<MigrationMarker | null> {
    const output = await this.#send('GetItem (migration marker)', signal, () =>
      this.#options.client.send(
        new GetItemCommand({
          TableName: this.#tableName,
          Key: this.#key(MIGRATION_MARKER_ENTRY),
          ConsistentRead: true,
        }),
        sendOptions(signal),
      ),
    );
    const item = output.Item;
    if (item === undefined) return null;
    const migratedTo = item[WORKER_ATTRIBUTES.migratedTo]?.S;
    const migratedAt = Number(item[WORKER_ATTRIBUTES.migratedAt]?.N);
    if (migratedTo === undefined || !Number.isFinite(migratedAt)) {
      throw this.#invalid(
        'the migration marker',
        'migratedTo (S) and migratedAt (N, epoch milliseconds) are required',
      );
    }
    return Object.freeze({ migratedTo, migratedAt: new Date(migratedAt) });
  }

  async setMarker(marker: MigrationMarker | null, signal?: AbortSignal): Promise<void> {
    if (marker === null) {
      await this.#send('DeleteItem (clear migration marker)', signal, () =>
        this.#options.client.send(
          new DeleteItemCommand({ TableName: this.#tableName, Key: this.#key(MIGRATION_MARKER_ENTRY) }),
          sendOptions(signal),
        ),
      );
      return;
    }
    await this.#send('PutItem (set migration marker)', signal, () =>
      this.#options.client.send(
        new PutItemCommand({
          TableName: this.#tableName,
          Item: {
            ...this.#key(MIGRATION_MARKER_ENTRY),
            [WORKER_ATTRIBUTES.migratedTo]: { S: marker.migratedTo },
            [WORKER_ATTRIBUTES.migratedAt]: { N: String(marker.migratedAt.getTime()) },
          },
        }),
        sendOptions(signal),
      ),
    );
  }

  /**
   * Records this application as the owner of a Java-layout lease table in this registry (an entry
   * keyed by the lease table), or fails when another application already owns it: that layout has no
   * application column, so two applications on one table would read and take each other's leases.
   */
  async claimTable(leaseTableName: string, signal?: AbortSignal): Promise<void> {
    const { client, definition, billing, applicationName } = this.#options;
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
        sendOptions(signal),
      );
    } catch (error) {
      if (!isConditionalCheckFailed(error)) {
        throw mapDynamoError(error, {
          operation: 'PutItem (claim the lease table)',
          table: definition,
          billing,
          signal,
        });
      }
      const output = await this.#send('GetItem (lease table owner)', signal, () =>
        client.send(
          new GetItemCommand({ TableName: definition.tableName, Key: ownerKey, ConsistentRead: true }),
          sendOptions(signal),
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
  }

  /** The key of one of this application's entries. */
  #key(entryKey: string): DynamoItem {
    return {
      [WORKER_ATTRIBUTES.applicationName]: { S: this.#options.applicationName },
      [WORKER_ATTRIBUTES.entryKey]: { S: entryKey },
    };
  }

  /** Runs one DynamoDB call; what it throws becomes a kcl error naming the operation. */
  async #send<T>(operation: string, signal: AbortSignal | undefined, run: () => Promise<T>): Promise<T> {
    try {
      return await run();
    } catch (error) {
      const { definition, billing } = this.#options;
      throw mapDynamoError(error, { operation, table: definition, billing, signal });
    }
  }

  #invalid(what: string, problem: string): LeaseStoreError {
    return new LeaseStoreError(
      PACKAGE_NAME,
      `${PACKAGE_NAME}: ${what} in table ${JSON.stringify(this.#tableName)} cannot be read: ${problem}; delete the item and let the worker heartbeat again`,
      { code: 'LEASE_DATA_INVALID', retryable: false },
    );
  }

  #decodeWorker(item: DynamoItem): WorkerRecord {
    const workerId = item[WORKER_ATTRIBUTES.workerId]?.S;
    const entry = item[WORKER_ATTRIBUTES.entryKey]?.S ?? '(unknown)';
    if (workerId === undefined) {
      throw this.#invalid(`worker entry ${JSON.stringify(entry)}`, 'workerId (S) is missing');
    }
    const heartbeat = Number(item[WORKER_ATTRIBUTES.heartbeat]?.N);
    const at = Number(item[WORKER_ATTRIBUTES.lastHeartbeatAt]?.N);
    if (!Number.isSafeInteger(heartbeat) || !Number.isFinite(at)) {
      throw this.#invalid(
        `worker ${JSON.stringify(workerId)}`,
        'heartbeat and lastHeartbeatAt must be numbers (N)',
      );
    }
    const metadata: Record<string, string> = {};
    for (const [name, value] of Object.entries(item[WORKER_ATTRIBUTES.metadata]?.M ?? {})) {
      if (value.S === undefined) {
        throw this.#invalid(
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
  }
}
