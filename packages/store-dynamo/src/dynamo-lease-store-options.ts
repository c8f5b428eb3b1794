import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { Clock, Logger } from '@kcl/core';
import { noopLogger, OptionProblems, systemClock } from '@kcl/core';

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
  /**
   * The DynamoDB client to use. The store never creates or configures it, and leaves it to the caller
   * unless `destroyClientOnClose` says otherwise.
   */
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
  /** Strongly consistent `leases.get`, `leases.list`, `workers.list` and `admin.scan` (default true). */
  readonly consistentReads?: boolean;
  /** The clock for heartbeat timestamps and for waiting while a table is created (default: system clock). */
  readonly clock?: Clock;
  /** How many renewals `leases.renewMany` runs at once (default 10). */
  readonly renewConcurrency?: number;
  /** Items per Scan/Query page (DynamoDB's `Limit`); unset lets DynamoDB fill 1 MB pages. */
  readonly pageSize?: number;
  /** How long `ensureSchema` waits for a table to become ACTIVE (default 600,000 ms, as the Java KCL). */
  readonly schemaWaitTimeoutMs?: number;
  /** How often `ensureSchema` asks whether a table is ACTIVE yet (default 1,000 ms). */
  readonly schemaPollIntervalMs?: number;
  /** Where the store reports what it skipped or could not check, e.g. an unreadable lease row (default: nothing). */
  readonly logger?: Logger;
  /** `close()` destroys the client too: for a client opened only for this store (default false). */
  readonly destroyClientOnClose?: boolean;
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
  readonly destroyClientOnClose: boolean;
}

export const DEFAULT_WORKER_TABLE_SUFFIX = '-kcl-workers';

const TABLE_NAME = /^[a-zA-Z0-9_.-]{3,255}$/;
/** DynamoDB's limit on a partition key value. */
const MAX_PARTITION_KEY_BYTES = 2048;

const LAYOUTS: readonly DynamoLeaseTableLayout[] = ['java', 'shared'];

/** Names the call in every configuration error, as the package's messages start. */
const COMPONENT = `${PACKAGE_NAME} createDynamoLeaseStore`;

/** Checks the options and fills in defaults; lists every problem at once in one `ConfigurationError`. */
export function resolveDynamoLeaseStoreOptions(
  options: DynamoLeaseStoreOptions,
): ResolvedDynamoLeaseStoreOptions {
  const check = new OptionProblems(COMPONENT);
  const input = (options ?? {}) as Partial<DynamoLeaseStoreOptions>;

  if (input.client === undefined) check.add('client is required: the DynamoDBClient the store sends with');
  const client = check.optionalObjectWith<DynamoDBClient>(
    'client',
    input.client,
    ['send'],
    'a DynamoDBClient',
  );

  const applicationName = check.string(
    'applicationName',
    input.applicationName,
    undefined,
    'the application whose leases the store holds',
  );
  if (Buffer.byteLength(applicationName, 'utf8') > MAX_PARTITION_KEY_BYTES) {
    check.add(`applicationName must be at most ${MAX_PARTITION_KEY_BYTES} bytes in UTF-8`);
  }

  const layout = check.oneOf('layout', input.layout, LAYOUTS, 'java');
  const tableName = checkTableName(check, input.tableName, input.layout, applicationName);
  const workerTableName = checkWorkerTableName(check, input.workerTableName, tableName);
  const billing = checkBilling(check, input.billing);
  const consistentReads = check.boolean('consistentReads', input.consistentReads, true);
  const clock = check.clock('clock', input.clock, systemClock);
  const renewConcurrency = check.integer('renewConcurrency', input.renewConcurrency, 10, { min: 1 });
  const pageSize = check.optionalInteger('pageSize', input.pageSize, { min: 1 }) ?? null;
  const schemaWaitTimeoutMs = check.integer('schemaWaitTimeoutMs', input.schemaWaitTimeoutMs, 600_000, {
    min: 1,
  });
  const schemaPollIntervalMs = check.integer('schemaPollIntervalMs', input.schemaPollIntervalMs, 1_000, {
    min: 1,
  });
  const logger = check.logger('logger', input.logger, noopLogger);
  const destroyClientOnClose = check.boolean('destroyClientOnClose', input.destroyClientOnClose, false);
  check.throwIfAny();

  return Object.freeze({
    client: client as DynamoDBClient,
    applicationName,
    tableName: tableName as string,
    layout,
    workerTableName: workerTableName as string,
    billing,
    consistentReads,
    clock,
    renewConcurrency,
    pageSize,
    schemaWaitTimeoutMs,
    schemaPollIntervalMs,
    logger,
    destroyClientOnClose,
  });
}

const TABLE_NAME_RULE = "3-255 characters of a-z, A-Z, 0-9, '_', '-', '.'";

/**
 * The lease table: as given, or in the `java` layout the application name (the Java KCL's default).
 * Undefined when there is none to use (the problem is recorded).
 */
function checkTableName(
  check: OptionProblems,
  value: unknown,
  layout: unknown,
  applicationName: string,
): string | undefined {
  if (value !== undefined) {
    if (typeof value === 'string' && TABLE_NAME.test(value)) return value;
    check.add(`tableName ${JSON.stringify(value)} is not a valid DynamoDB table name (${TABLE_NAME_RULE})`);
    return undefined;
  }
  if (layout === 'shared') {
    check.add("tableName is required with layout 'shared' (the table the applications share)");
    return undefined;
  }
  if (applicationName === '') return undefined;
  if (!TABLE_NAME.test(applicationName)) {
    check.add(
      `tableName defaults to the applicationName ${JSON.stringify(applicationName)}, which is not a valid DynamoDB table name (${TABLE_NAME_RULE}); pass tableName`,
    );
  }
  return applicationName;
}

/** The worker registry table: as given, or named after the lease table. */
function checkWorkerTableName(
  check: OptionProblems,
  value: unknown,
  tableName: string | undefined,
): string | undefined {
  if (value === undefined) {
    if (tableName === undefined) return undefined;
    const workerTableName = `${tableName}${DEFAULT_WORKER_TABLE_SUFFIX}`;
    if (workerTableName.length > 255 && TABLE_NAME.test(tableName)) {
      check.add(
        `the default workerTableName ${JSON.stringify(workerTableName)} is longer than 255 characters; pass workerTableName`,
      );
    }
    return workerTableName;
  }
  if (typeof value !== 'string' || !TABLE_NAME.test(value)) {
    check.add(
      `workerTableName ${JSON.stringify(value)} is not a valid DynamoDB table name (${TABLE_NAME_RULE})`,
    );
    return undefined;
  }
  if (value === tableName) {
    check.add('workerTableName must differ from tableName: Java KCL workers would read workers as leases');
  }
  return value;
}

const PAY_PER_REQUEST: DynamoTableBilling = Object.freeze({ mode: 'PAY_PER_REQUEST' });

function checkBilling(check: OptionProblems, value: unknown): DynamoTableBilling {
  if (value === undefined) return PAY_PER_REQUEST;
  if (value === null || typeof value !== 'object') {
    check.add("billing must be { mode: 'PAY_PER_REQUEST' } or { mode: 'PROVISIONED', … }");
    return PAY_PER_REQUEST;
  }
  const given = value as { mode?: unknown; readCapacityUnits?: unknown; writeCapacityUnits?: unknown };
  if (given.mode === undefined) {
    check.add("billing.mode is required: 'PAY_PER_REQUEST' or 'PROVISIONED'");
    return PAY_PER_REQUEST;
  }
  const billing = check.within('billing');
  const mode = billing.oneOf('mode', given.mode, ['PAY_PER_REQUEST', 'PROVISIONED'], 'PAY_PER_REQUEST');
  if (mode === 'PAY_PER_REQUEST') return PAY_PER_REQUEST;
  const capacityUnits = (name: 'readCapacityUnits' | 'writeCapacityUnits'): number => {
    if (given[name] !== undefined) return billing.integer(name, given[name], 1, { min: 1 });
    billing.add(`billing.${name} is required with PROVISIONED billing`);
    return 1;
  };
  return Object.freeze({
    mode,
    readCapacityUnits: capacityUnits('readCapacityUnits'),
    writeCapacityUnits: capacityUnits('writeCapacityUnits'),
  });
}
