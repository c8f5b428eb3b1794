import type { LeaseStore, LeaseStoreAdministration, StoreCallOptions, WorkerRegistry } from '@kcl/core';
import { ensureTable } from './dynamo-ensure-table.js';
import { createDynamoLeaseRepository } from './dynamo-lease-repository.js';
import type {
  DynamoLeaseStoreOptions,
  DynamoLeaseTableLayout,
  ResolvedDynamoLeaseStoreOptions,
} from './dynamo-lease-store-options.js';
import { resolveDynamoLeaseStoreOptions } from './dynamo-lease-store-options.js';
import type { DynamoLeaseTable, DynamoLeaseTableScan } from './dynamo-lease-table.js';
import { scanLeaseTable } from './dynamo-lease-table.js';
import { claimLeaseTableTag } from './dynamo-table-claim.js';
import type { DynamoTableDefinition } from './dynamo-table-schema.js';
import { leaseTableDefinition, workerTableDefinition } from './dynamo-table-schema.js';
import { DynamoWorkerRegistry } from './dynamo-worker-registry.js';

/** The `admin` role of a DynamoDB store; its scan also counts the KCL 3.x rows that are not leases. */
export interface DynamoLeaseStoreAdministration extends LeaseStoreAdministration {
  scan(options?: StoreCallOptions): Promise<DynamoLeaseTableScan>;
}

/** A `LeaseStore` on DynamoDB, with what it knows about its tables. */
export interface DynamoLeaseStore extends LeaseStore {
  readonly admin: DynamoLeaseStoreAdministration;
  readonly layout: DynamoLeaseTableLayout;
  readonly tableName: string;
  readonly workerTableName: string;
}

/**
 * A `LeaseStore` on DynamoDB. The default `java` layout is the Java KCL lease table, attribute for
 * attribute, so Java KCL workers and kcl workers can hand a table over in either direction with every
 * checkpoint kept; the `shared` layout keeps several applications in one table. Workers and the
 * migration marker live in a separate registry table that Java workers never read.
 *
 * The client is the caller's: `close()` leaves it open (the store opens nothing of its own), unless
 * `destroyClientOnClose` is set.
 */
export function createDynamoLeaseStore(options: DynamoLeaseStoreOptions): DynamoLeaseStore {
  const resolved = resolveDynamoLeaseStoreOptions(options);
  const { client, applicationName, layout, billing, clock } = resolved;
  const leaseTable: DynamoLeaseTable = {
    client,
    definition: leaseTableDefinition(resolved.tableName, layout),
    layout,
    billing,
    applicationName,
    consistentReads: resolved.consistentReads,
    pageSize: resolved.pageSize,
    renewConcurrency: resolved.renewConcurrency,
    logger: resolved.logger,
  };
  const workerTable = workerTableDefinition(resolved.workerTableName);
  const registry = new DynamoWorkerRegistry({
    client,
    definition: workerTable,
    billing,
    applicationName,
    clock,
    consistentReads: resolved.consistentReads,
    pageSize: resolved.pageSize,
  });

  const workers: WorkerRegistry = {
    heartbeat: (workerId, metadata, callOptions) =>
      registry.heartbeat(workerId, metadata, callOptions?.signal),
    list: (callOptions) => registry.list(callOptions?.signal, callOptions?.metadata !== false),
    remove: (workerId, callOptions) => registry.remove(workerId, callOptions?.signal),
  };

  const admin: DynamoLeaseStoreAdministration = {
    ensureSchema: (callOptions) =>
      ensureDynamoSchema(resolved, leaseTable, workerTable, registry, callOptions?.signal),
    getMigrationMarker: (callOptions) => registry.getMarker(callOptions?.signal),
    setMigrationMarker: (marker, callOptions) => registry.setMarker(marker, callOptions?.signal),
    scan: (callOptions) => scanLeaseTable(leaseTable, callOptions?.signal),
  };

  return {
    specificationVersion: 'v2',
    applicationName,
    // DynamoDB has no sessions: a dead worker's leases are taken once they expire.
    capabilities: Object.freeze({
      batchRenew: false,
      consistentReads: resolved.consistentReads,
      sessionLiveness: false,
    }),
    description: `DynamoDB table ${JSON.stringify(leaseTable.definition.tableName)} (${layout} layout, worker registry ${JSON.stringify(workerTable.tableName)}), application ${JSON.stringify(applicationName)}`,
    layout,
    tableName: leaseTable.definition.tableName,
    workerTableName: workerTable.tableName,
    leases: createDynamoLeaseRepository(leaseTable),
    workers,
    admin,
    // A client handed in stays the caller's to destroy, unless the caller said the store owns it.
    close: async () => {
      if (resolved.destroyClientOnClose) resolved.client.destroy();
    },
  };
}

/**
 * Creates the lease table and the worker registry table where missing, and waits until both are
 * ACTIVE. A Java-layout lease table is then claimed for this application: in this store's registry
 * (atomic, and what earlier versions check) and with a tag on the lease table itself, which
 * applications with different registries share.
 */
async function ensureDynamoSchema(
  resolved: ResolvedDynamoLeaseStoreOptions,
  leaseTable: DynamoLeaseTable,
  workerTable: DynamoTableDefinition,
  registry: DynamoWorkerRegistry,
  signal: AbortSignal | undefined,
): Promise<void> {
  const { client, billing, clock, applicationName } = resolved;
  const common = {
    client,
    billing,
    clock,
    timeoutMs: resolved.schemaWaitTimeoutMs,
    pollIntervalMs: resolved.schemaPollIntervalMs,
    signal,
  };
  const [leaseTableDescription] = await Promise.all([
    ensureTable({ ...common, definition: leaseTable.definition }),
    ensureTable({ ...common, definition: workerTable }),
  ]);
  if (resolved.layout !== 'java') return;
  await registry.claimTable(leaseTable.definition.tableName, signal);
  await claimLeaseTableTag({
    client,
    definition: leaseTable.definition,
    billing,
    tableArn: leaseTableDescription.TableArn,
    applicationName,
    logger: resolved.logger,
    signal,
  });
}
