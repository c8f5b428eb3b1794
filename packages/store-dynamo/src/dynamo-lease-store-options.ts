import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { Clock, Logger } from '@kcl/core';
import { ConfigurationError, noopLogger, systemClock } from '@kcl/core';

/** The package name, which every message of this package starts with. */
export const PACKAGE_NAME = '@kcl/store-dynamo';

/**
 * How leases are laid out in DynamoDB.
 * - `java`: the Java KCL lease table, exactly: one table per application, hash key `leaseKey`.
 *   A Java KCL 2.x/3.x worker can read and write the same table.
 * - `shared`: several applications in one table, hash key `applicationName` and range key `leaseKey`,
 *   every other attribute named as the Java KCL names it. Listing is a Query of one partition.
 */
export type DynamoLeaseTableLayout = 'java' | 'shared';

/** The billing mode of tables created by `ensureSchema`. Existing tables are left as they are. */
export type DynamoTableBilling =
  | { readonly mode: 'PAY_PER_REQUEST' }
  | {
      readonly mode: 'PROVISIONED';
      readonly readCapacityUnits: number;
      readonly writeCapacityUnits: number;
    };

export interface DynamoLeaseStoreOptions {
  /** The DynamoDB client to use. The store never creates, configures or destroys clients. */
  readonly client: DynamoDBClient;
  /** The application (consumer group) whose leases this store reads and writes. */
  readonly applicationName: string;
  /**
   * The lease table. In the `java` layout it defaults to the application name, as the Java KCL's
   * default; in the `shared` layout it is required.
   */
  readonly tableName?: string;
  /** Default `java`: the Java KCL lease-table format. */
  readonly layout?: DynamoLeaseTableLayout;
  /** The worker registry table (default `<tableName>-kcl-workers`). Java KCL workers never read it. */
  readonly workerTableName?: string;
  /** Billing of the tables `ensureSchema` creates (default PAY_PER_REQUEST, like the Java KCL). */
  readonly billing?: DynamoTableBilling;
  /** Strongly consistent `getLease`/`listLeases`/`listWorkers` (default true). */
  readonly consistentReads?: boolean;
  /** The clock for heartbeat timestamps and for waiting while a table is created (default: system clock). */
  readonly clock?: Clock;
  /** How many renewals `renewLeases` runs at once (default 10). */
  readonly renewConcurrency?: number;
  /** Items per Scan/Query page (DynamoDB's `Limit`); unset lets DynamoDB fill 1 MB pages. */
  readonly pageSize?: number;
  /** How long `ensureSchema` waits for a table to become ACTIVE (default 600,000 ms, as the Java KCL). */
  readonly schemaWaitTimeoutMs?: number;
  /** How often `ensureSchema` asks whether a table is ACTIVE yet (default 1,000 ms). */
  readonly schemaPollIntervalMs?: number;
  /** Where the store reports what it skipped or could not check, e.g. an unreadable lease row (default: nothing). */
  readonly logger?: Logger;
}

/** Options with every default filled in. */
export interface ResolvedDynamoLeaseStoreOptions {
  readonly client: DynamoDBClient;
  readonly applicationName: string;
  readonly tableName: string;
  readonly layout: DynamoLeaseTableLayout;
  readonly workerTableName: string;
  readonly billing: DynamoTableBilling;
  readonly consistentReads: boolean;
  readonly clock: Clock;
  readonly renewConcurrency: number;
  readonly pageSize: number | null;
  readonly schemaWaitTimeoutMs: number;
  readonly schemaPollIntervalMs: number;
  readonly logger: Logger;
}

export const DEFAULT_WORKER_TABLE_SUFFIX = '-kcl-workers';

const TABLE_NAME = /^[a-zA-Z0-9_.-]{3,255}$/;
/** DynamoDB's limit on a partition key value. */
const MAX_PARTITION_KEY_BYTES = 2048;

const LAYOUTS: readonly DynamoLeaseTableLayout[] = ['java', 'shared'];

/** Checks the options and fills in defaults; lists every problem at once in one `ConfigurationError`. */
export function resolveDynamoLeaseStoreOptions(
  options: DynamoLeaseStoreOptions,
): ResolvedDynamoLeaseStoreOptions {
  const problems: string[] = [];
  const input = (options ?? {}) as Partial<DynamoLeaseStoreOptions>;

  if (
    input.client === null ||
    typeof input.client !== 'object' ||
    typeof (input.client as { send?: unknown }).send !== 'function'
  ) {
    problems.push('client must be a DynamoDBClient (an object with a send method)');
  }

  const applicationName = input.applicationName;
  if (typeof applicationName !== 'string' || applicationName.length === 0) {
    problems.push('applicationName must be a non-empty string');
  } else if (Buffer.byteLength(applicationName, 'utf8') > MAX_PARTITION_KEY_BYTES) {
    problems.push(`applicationName must be at most ${MAX_PARTITION_KEY_BYTES} bytes in UTF-8`);
  }

  const layout = input.layout ?? 'java';
  if (!LAYOUTS.includes(layout)) {
    problems.push(`layout must be 'java' or 'shared', got ${JSON.stringify(layout)}`);
  }

  let tableName = input.tableName;
  if (tableName === undefined) {
    if (layout === 'shared') {
      problems.push("tableName is required with layout 'shared' (the table the applications share)");
    } else if (typeof applicationName === 'string' && applicationName.length > 0) {
      tableName = applicationName;
      if (!TABLE_NAME.test(tableName)) {
        problems.push(
          `tableName defaults to the applicationName ${JSON.stringify(applicationName)}, which is not a valid DynamoDB table name (3-255 characters of a-z, A-Z, 0-9, '_', '-', '.'); pass tableName`,
        );
      }
    }
  } else if (typeof tableName !== 'string' || !TABLE_NAME.test(tableName)) {
    problems.push(
      `tableName ${JSON.stringify(tableName)} is not a valid DynamoDB table name (3-255 characters of a-z, A-Z, 0-9, '_', '-', '.')`,
    );
  }

  let workerTableName = input.workerTableName;
  if (workerTableName === undefined) {
    if (typeof tableName === 'string') {
      workerTableName = `${tableName}${DEFAULT_WORKER_TABLE_SUFFIX}`;
      if (workerTableName.length > 255 && TABLE_NAME.test(tableName)) {
        problems.push(
          `the default workerTableName ${JSON.stringify(workerTableName)} is longer than 255 characters; pass workerTableName`,
        );
      }
    }
  } else if (typeof workerTableName !== 'string' || !TABLE_NAME.test(workerTableName)) {
    problems.push(
      `workerTableName ${JSON.stringify(workerTableName)} is not a valid DynamoDB table name (3-255 characters of a-z, A-Z, 0-9, '_', '-', '.')`,
    );
  } else if (workerTableName === tableName) {
    problems.push(
      'workerTableName must differ from tableName: Java KCL workers would read workers as leases',
    );
  }

  const billing = input.billing ?? { mode: 'PAY_PER_REQUEST' };
  if (billing === null || typeof billing !== 'object') {
    problems.push("billing must be { mode: 'PAY_PER_REQUEST' } or { mode: 'PROVISIONED', … }");
  } else if (billing.mode === 'PROVISIONED') {
    if (!isPositiveInteger(billing.readCapacityUnits)) {
      problems.push('billing.readCapacityUnits must be a positive integer with PROVISIONED billing');
    }
    if (!isPositiveInteger(billing.writeCapacityUnits)) {
      problems.push('billing.writeCapacityUnits must be a positive integer with PROVISIONED billing');
    }
  } else if (billing.mode !== 'PAY_PER_REQUEST') {
    problems.push(
      `billing.mode must be 'PAY_PER_REQUEST' or 'PROVISIONED', got ${JSON.stringify((billing as { mode: unknown }).mode)}`,
    );
  }

  const consistentReads = input.consistentReads ?? true;
  if (typeof consistentReads !== 'boolean') problems.push('consistentReads must be a boolean');

  const clock = input.clock ?? systemClock;
  if (
    clock === null ||
    typeof clock !== 'object' ||
    typeof clock.now !== 'function' ||
    typeof clock.monotonicNow !== 'function' ||
    typeof clock.sleep !== 'function'
  ) {
    problems.push('clock must implement now, monotonicNow and sleep (a Clock from @kcl/core)');
  }

  const renewConcurrency = input.renewConcurrency ?? 10;
  if (!isPositiveInteger(renewConcurrency)) problems.push('renewConcurrency must be a positive integer');

  const pageSize = input.pageSize ?? null;
  if (pageSize !== null && !isPositiveInteger(pageSize)) problems.push('pageSize must be a positive integer');

  const schemaWaitTimeoutMs = input.schemaWaitTimeoutMs ?? 600_000;
  if (!isPositiveInteger(schemaWaitTimeoutMs))
    problems.push('schemaWaitTimeoutMs must be a positive integer');

  const schemaPollIntervalMs = input.schemaPollIntervalMs ?? 1_000;
  if (!isPositiveInteger(schemaPollIntervalMs)) {
    problems.push('schemaPollIntervalMs must be a positive integer');
  }

  const logger = input.logger ?? noopLogger;
  if (
    logger === null ||
    typeof logger !== 'object' ||
    !(['debug', 'info', 'warn', 'error'] as const).every((level) => typeof logger[level] === 'function')
  ) {
    problems.push('logger must implement debug, info, warn and error (a Logger from @kcl/core)');
  }

  if (problems.length > 0) throw new ConfigurationError(PACKAGE_NAME, problems);

  return Object.freeze({
    client: input.client as DynamoDBClient,
    applicationName: applicationName as string,
    tableName: tableName as string,
    layout,
    workerTableName: workerTableName as string,
    billing: Object.freeze({ ...billing }),
    consistentReads,
    clock,
    renewConcurrency,
    pageSize,
    schemaWaitTimeoutMs,
    schemaPollIntervalMs,
    logger,
  });
}

function isPositiveInteger(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value > 0;
}
