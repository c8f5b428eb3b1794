import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { LeaseStore, Logger } from '@kcl/core';
import type { LeaseStoreLocation } from '@kcl/stores';
import { describeLeaseStoreLocation, openLeaseStore, parseLeaseStoreUrl } from '@kcl/stores';
import { createClientForEndpoint, createDynamoClient, requireRegion } from './aws-clients.js';
import type { LeaseStoreConfiguration, MultiLangConfiguration } from './multilang-configuration.js';

export interface MultiLangLeaseStoreContext {
  /** Relative SQLite paths resolve here. */
  readonly workingDirectory: string;
  readonly logger: Logger;
  /** Told when placeholder credentials are used for a DynamoDB emulator on this machine. */
  readonly onPlaceholderCredentials: (endpoint: string | null) => void;
}

/**
 * Opens the lease store a properties file names. The store's `close()` releases what was opened for
 * it (the connection pool, the DynamoDB client).
 *
 * Both kinds are opened by `openLeaseStore` from `@kcl/stores`. SQL (`kcl.leaseStore = sql`) with
 * `kcl.sqlUrl` and `kcl.sqlTableName` as its location. The Java table on DynamoDB on a client made
 * like the Kinesis and CloudWatch clients, which the store owns: it carries what the properties say
 * (the credentials of `AwsCredentialsProviderDynamoDB`, the request timeout that keeps a hung call
 * from stalling renewals, placeholder credentials only for an emulator on this machine whose chain
 * finds none).
 */
export async function openMultiLangLeaseStore(
  configuration: MultiLangConfiguration,
  context: MultiLangLeaseStoreContext,
): Promise<LeaseStore> {
  const { leaseStore } = configuration;
  if (leaseStore.kind === 'sql') {
    const location = sqlLeaseStoreLocation(leaseStore, context.workingDirectory);
    const store = await openLeaseStore(location, {
      applicationName: configuration.applicationName,
      workingDirectory: context.workingDirectory,
      logger: context.logger,
      onPoolError: (error) => context.logger.warn('idle SQL connection failed', { error }),
    });
    context.logger.info(`lease store: ${store.description} at ${describeLeaseStoreLocation(location)}`);
    return store;
  }
  const client = await openDynamoClient(configuration, context);
  let store: LeaseStore;
  try {
    store = await openLeaseStore(
      {
        kind: 'dynamo',
        tableName: leaseStore.tableName,
        ...(configuration.dynamoDBEndpoint === null ? {} : { endpoint: configuration.dynamoDBEndpoint }),
        client,
        destroyClientOnClose: true,
      },
      {
        applicationName: configuration.applicationName,
        logger: context.logger,
        // Only while a new table is being created: see it ACTIVE soon after it is.
        schemaPollIntervalMs: 250,
      },
    );
  } catch (error) {
    client.destroy();
    throw error;
  }
  context.logger.info('lease store: DynamoDB (Java KCL table format)', { tableName: leaseStore.tableName });
  return store;
}

/** `kcl.sqlUrl` and `kcl.sqlTableName` as an `openLeaseStore` location. */
export function sqlLeaseStoreLocation(
  leaseStore: Extract<LeaseStoreConfiguration, { kind: 'sql' }>,
  workingDirectory: string,
): LeaseStoreLocation {
  const location = parseLeaseStoreUrl(leaseStore.url, workingDirectory);
  return leaseStore.tableName === null ? location : { ...location, tableName: leaseStore.tableName };
}

async function openDynamoClient(
  configuration: MultiLangConfiguration,
  context: MultiLangLeaseStoreContext,
): Promise<DynamoDBClient> {
  const client = await createClientForEndpoint(
    (credentials) =>
      createDynamoClient({
        region: configuration.region,
        endpoint: configuration.dynamoDBEndpoint,
        credentials,
      }),
    configuration.dynamoDBCredentials,
    configuration.dynamoDBEndpoint,
    () => context.onPlaceholderCredentials(configuration.dynamoDBEndpoint),
  );
  try {
    await requireRegion(client);
  } catch (error) {
    client.destroy();
    throw error;
  }
  return client;
}
