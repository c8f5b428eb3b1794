/**
 * Java KCL lease tables for tests: items shaped as the Java KCL's `DynamoDBLeaseSerializer` (2.x and
 * 3.x) and the KCL 3.5 single-table DAO write them (attribute names, DynamoDB types, empty values
 * left out), and the table the Java KCL creates. One home for every test that reads or writes a table
 * a Java worker would, instead of a hand-built copy per test file.
 *
 * The AWS SDK is loaded only when a table is created or written, so importing the testkit does not
 * need `@aws-sdk/client-dynamodb`; the tests that call these functions have it.
 */

/** A DynamoDB attribute value, of the types a Java KCL lease table holds. */
export type JavaAttributeValue =
  | { S: string }
  | { N: string }
  | { B: Uint8Array }
  | { SS: string[] }
  | { L: JavaAttributeValue[] }
  | { M: Record<string, JavaAttributeValue> };

/** One item of a Java KCL lease table: a lease, or a KCL 3.x row that is not one. */
export type JavaLeaseTableItem = Record<string, JavaAttributeValue>;

/**
 * The attributes of a Java KCL lease, named as the Java KCL names them, with plain values. Those the
 * Java serializer always writes have a default; `null` leaves one out, as in rows older writers left
 * (or rows the test means to be unreadable). Empty lists are left out, as the Java KCL leaves them out.
 */
export interface JavaLeaseFields {
  readonly leaseKey: string;
  readonly leaseOwner?: string;
  /** Default 0. */
  readonly leaseCounter?: number | null;
  /** A sequence number or a sentinel (`TRIM_HORIZON`, `LATEST`, `SHARD_END`, …); default `TRIM_HORIZON`. */
  readonly checkpoint?: string | null;
  /** Default 0. */
  readonly checkpointSubSequenceNumber?: number | null;
  readonly pendingCheckpoint?: string;
  /** Default 0 when `pendingCheckpoint` is given. */
  readonly pendingCheckpointSubSequenceNumber?: number;
  /** The Java KCL's opaque prepared-checkpoint state. */
  readonly pendingCheckpointState?: Uint8Array;
  /** Default 0. */
  readonly ownerSwitchesSinceCheckpoint?: number | null;
  readonly parentShardId?: readonly string[];
  readonly childShardIds?: readonly string[];
  readonly startingHashKey?: string;
  readonly endingHashKey?: string;
  /** KCL 3.x: the owner during a graceful hand-off (then `leaseOwner` names the next owner). */
  readonly checkpointOwner?: string;
  /** KCL 3.x: recorded on renewal. */
  readonly throughputKBps?: number;
  /** KCL 3.x writes `LEASE`; 2.x writes none. */
  readonly entityType?: string;
  /** Multi-stream applications: `account:stream:epoch`, with the lease's `shardId`. */
  readonly streamName?: string;
  readonly shardId?: string;
}

/**
 * A lease item as the Java KCL writes it. `extraAttributes` adds attributes as they are (one a later
 * Java version may add, or a wrong type on purpose).
 */
export function javaLeaseItem(
  fields: JavaLeaseFields,
  extraAttributes: Readonly<JavaLeaseTableItem> = {},
): JavaLeaseTableItem {
  const item: JavaLeaseTableItem = { leaseKey: { S: fields.leaseKey } };
  const string = (name: string, value: string | null | undefined): void => {
    if (value !== undefined && value !== null) item[name] = { S: value };
  };
  const number = (name: string, value: number | null | undefined): void => {
    if (value !== undefined && value !== null) item[name] = { N: String(value) };
  };
  const strings = (name: string, value: readonly string[] | undefined): void => {
    if (value !== undefined && value.length > 0) item[name] = { SS: [...value] };
  };
  string('leaseOwner', fields.leaseOwner);
  number('leaseCounter', fields.leaseCounter === undefined ? 0 : fields.leaseCounter);
  string('checkpoint', fields.checkpoint === undefined ? 'TRIM_HORIZON' : fields.checkpoint);
  number(
    'checkpointSubSequenceNumber',
    fields.checkpointSubSequenceNumber === undefined ? 0 : fields.checkpointSubSequenceNumber,
  );
  string('pendingCheckpoint', fields.pendingCheckpoint);
  if (fields.pendingCheckpoint !== undefined) {
    number('pendingCheckpointSubSequenceNumber', fields.pendingCheckpointSubSequenceNumber ?? 0);
  }
  if (fields.pendingCheckpointState !== undefined) {
    item.pendingCheckpointState = { B: fields.pendingCheckpointState };
  }
  number(
    'ownerSwitchesSinceCheckpoint',
    fields.ownerSwitchesSinceCheckpoint === undefined ? 0 : fields.ownerSwitchesSinceCheckpoint,
  );
  strings('parentShardId', fields.parentShardId);
  strings('childShardIds', fields.childShardIds);
  string('startingHashKey', fields.startingHashKey);
  string('endingHashKey', fields.endingHashKey);
  string('checkpointOwner', fields.checkpointOwner);
  number('throughputKBps', fields.throughputKBps);
  string('entityType', fields.entityType);
  string('streamName', fields.streamName);
  string('shardId', fields.shardId);
  return { ...item, ...extraAttributes };
}

/** `shardId-000000000007`: a Kinesis shard id as the Java KCL uses it for a lease key. */
export function javaShardId(index: number): string {
  return `shardId-${String(index).padStart(12, '0')}`;
}

/** The values the sample table below uses, for tests that check what a reader made of them. */
export const JAVA_SAMPLE = Object.freeze({
  /** An aggregated-record checkpoint's sequence number (56 digits, past 64 bits). */
  checkpoint: '49590338271490256608559692538361571095921575989136588898',
  /** A prepared checkpoint ahead of it. */
  pendingCheckpoint: '49590338271490256608559692538361571095921575989136599999',
  /** The first hash key of the upper half of the key space (2^127). */
  halfHashKey: (1n << 127n).toString(),
  /** The last hash key (2^128 − 1). */
  maxHashKey: ((1n << 128n) - 1n).toString(),
});

/**
 * The leases of a single-stream application after a split (shard 0 → 2, 3) and a merge (2 + 3 → 4),
 * written by Java KCL 2.x and 3.x workers `java-worker-1` and `java-worker-2`.
 */
export function javaSplitAndMergeLeases(): JavaLeaseTableItem[] {
  const { checkpoint, pendingCheckpoint, halfHashKey, maxHashKey } = JAVA_SAMPLE;
  return [
    // 2.x: finished parent, recorded its children at SHARD_END.
    javaLeaseItem({
      leaseKey: javaShardId(0),
      leaseOwner: 'java-worker-1',
      leaseCounter: 2204,
      checkpoint: 'SHARD_END',
      childShardIds: [javaShardId(2), javaShardId(3)],
      startingHashKey: '0',
      endingHashKey: maxHashKey,
    }),
    // 2.x: an open shard mid-stream, with an aggregated-record checkpoint and a prepared checkpoint.
    javaLeaseItem({
      leaseKey: javaShardId(1),
      leaseOwner: 'java-worker-1',
      leaseCounter: 1523,
      checkpoint,
      checkpointSubSequenceNumber: 3,
      pendingCheckpoint,
      pendingCheckpointState: new Uint8Array([1, 2, 3]),
      ownerSwitchesSinceCheckpoint: 1,
      startingHashKey: '0',
      endingHashKey: maxHashKey,
    }),
    // 2.x: split children, finished and merged.
    ...[2, 3].map((index) =>
      javaLeaseItem({
        leaseKey: javaShardId(index),
        leaseOwner: 'java-worker-2',
        leaseCounter: 300 + index,
        checkpoint: 'SHARD_END',
        parentShardId: [javaShardId(0)],
        childShardIds: [javaShardId(4)],
        startingHashKey: index === 2 ? '0' : halfHashKey,
        endingHashKey: index === 2 ? ((1n << 127n) - 1n).toString() : maxHashKey,
      }),
    ),
    // 3.x: a merge child with two parents, entityType written, throughput recorded on renewal.
    javaLeaseItem({
      leaseKey: javaShardId(4),
      leaseOwner: 'java-worker-2',
      leaseCounter: 12,
      checkpoint: 'TRIM_HORIZON',
      parentShardId: [javaShardId(2), javaShardId(3)],
      startingHashKey: '0',
      endingHashKey: maxHashKey,
      throughputKBps: 12.345678,
      entityType: 'LEASE',
    }),
  ];
}

/**
 * The rows of a KCL 3.5 single-table lease table that are not leases: the metrics of the two workers
 * above, the leader lock, the 2.x → 3.x client migration state and the table migration state.
 */
export function javaKcl3OtherRows(): JavaLeaseTableItem[] {
  return [
    ...['java-worker-1', 'java-worker-2'].map(
      (workerId): JavaLeaseTableItem => ({
        leaseKey: { S: workerId },
        wid: { S: workerId },
        lut: { N: '1735689600' },
        sts: { M: { C: { L: [{ N: '12.5' }, { N: '13' }, { N: '-1' }] }, M: { L: [{ N: '40' }] } } },
        opr: { M: { C: { L: [{ N: '100' }] } } },
        properties: { M: { jvm: { S: '21' } } },
        sup: { N: '1' },
        slu: { N: '1735689600' },
        entityType: { S: 'WORKER_METRIC_STATS' },
      }),
    ),
    {
      leaseKey: { S: 'Leader' },
      ownerName: { S: 'java-worker-1' },
      leaseDuration: { S: '20000' },
      recordVersionNumber: { S: '5e1c8d6e-7a4e-4b8e-9d0e-1a2b3c4d5e6f' },
      entityType: { S: 'LEADER' },
    },
    {
      leaseKey: { S: 'Migration3.0' },
      cv: { S: 'CLIENT_VERSION_3X' },
      mb: { S: 'java-worker-1' },
      mts: { N: '1735689600000' },
      h: { L: [{ M: { cv: { S: 'CLIENT_VERSION_UPGRADE_FROM_2X' }, mts: { N: '1735600000000' } } }] },
      entityType: { S: 'CLIENT_VERSION_MIGRATION' },
    },
    {
      leaseKey: { S: 'TableMigration3.5' },
      tm: { S: 'COMPLETE' },
      mb: { S: 'java-worker-1' },
      mts: { N: '1735689600000' },
      entityType: { S: 'TABLE_MIGRATION' },
    },
  ];
}

/**
 * What the functions below need of a `DynamoDBClient` (its `send`), so the testkit's types do not
 * name the AWS SDK.
 */
export interface JavaLeaseTableClient {
  send(command: object): Promise<unknown>;
}

/**
 * Creates a lease table exactly as the Java KCL does (hash key `leaseKey`, on-demand billing), and
 * nothing else, then waits until it is ACTIVE (an emulator keeps it CREATING for a moment).
 */
export async function createJavaLeaseTable(client: JavaLeaseTableClient, tableName: string): Promise<void> {
  const { CreateTableCommand, DescribeTableCommand } = await import('@aws-sdk/client-dynamodb');
  await client.send(
    new CreateTableCommand({
      TableName: tableName,
      AttributeDefinitions: [{ AttributeName: 'leaseKey', AttributeType: 'S' }],
      KeySchema: [{ AttributeName: 'leaseKey', KeyType: 'HASH' }],
      BillingMode: 'PAY_PER_REQUEST',
    }),
  );
  for (let attempt = 0; ; attempt++) {
    const output = (await client.send(new DescribeTableCommand({ TableName: tableName }))) as {
      Table?: { TableStatus?: string };
    };
    if (output.Table?.TableStatus === 'ACTIVE') return;
    if (attempt >= 500) throw new Error(`@kcl/testkit: table ${tableName} did not become ACTIVE`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/**
 * Writes items into a table 25 at a time (BatchWriteItem, eight calls in flight), retrying the ones
 * DynamoDB leaves unprocessed: a Java table of any size in a few round trips.
 */
export async function putJavaTableItems(
  client: JavaLeaseTableClient,
  tableName: string,
  items: readonly Readonly<Record<string, object>>[],
): Promise<void> {
  const { BatchWriteItemCommand } = await import('@aws-sdk/client-dynamodb');
  type WriteRequest = { PutRequest: { Item: Readonly<Record<string, object>> } };
  const batches: WriteRequest[][] = [];
  for (let index = 0; index < items.length; index += 25) {
    batches.push(items.slice(index, index + 25).map((item) => ({ PutRequest: { Item: item } })));
  }
  let next = 0;
  const lane = async (): Promise<void> => {
    while (next < batches.length) {
      let requests = batches[next++] ?? [];
      for (let attempt = 0; requests.length > 0; attempt++) {
        if (attempt > 20) throw new Error('@kcl/testkit: BatchWriteItem keeps leaving items unprocessed');
        const output = (await client.send(
          new BatchWriteItemCommand({ RequestItems: { [tableName]: requests } as never }),
        )) as { UnprocessedItems?: Record<string, WriteRequest[]> };
        requests = output.UnprocessedItems?.[tableName] ?? [];
      }
    }
  };
  await Promise.all(Array.from({ length: 8 }, lane));
}
