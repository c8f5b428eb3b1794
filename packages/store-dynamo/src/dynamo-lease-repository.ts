import type { AttributeValue } from '@aws-sdk/client-dynamodb';
import { DeleteItemCommand, PutItemCommand } from '@aws-sdk/client-dynamodb';
import type {
  CheckpointUpdate,
  Lease,
  LeaseBatchWriteResult,
  LeaseHandoff,
  LeaseInit,
  LeaseMetaUpdate,
  LeaseRenewal,
  LeaseRepository,
  LeaseWriteResult,
  LostRaceReason,
} from '@kcl/core';
import { ConfigurationError, handoffProblem, LeaseStoreError, leaseFromInit } from '@kcl/core';
import { isConditionalCheckFailed, sendOptions } from './dynamo-error-mapping.js';
import type { DynamoCondition, DynamoUpdate } from './dynamo-expression.js';
import { buildExpressions } from './dynamo-expression.js';
import type { DynamoItem } from './dynamo-item-codec.js';
import {
  checkpointAttributes,
  encodeLeaseItem,
  handoffAttributes,
  hashKeyRangeAttributes,
  LEASE_ATTRIBUTES,
  LEASE_ENTITY_TYPE,
  numberValue,
  pendingCheckpointAttributes,
  stringSetValue,
} from './dynamo-item-codec.js';
import { PACKAGE_NAME } from './dynamo-lease-store-options.js';
import type { DynamoLeaseTable } from './dynamo-lease-table.js';
import {
  applicationKey,
  callLeaseTable,
  counterCondition,
  LEASE_ROW,
  leaseItemKey,
  leaseOfItem,
  lostRaceReason,
  readLeaseItem,
  rowIsLease,
  scanLeaseTable,
  updateLeaseItem,
  writeResult,
} from './dynamo-lease-table.js';

/** The `leases` role of a DynamoDB store: each operation is one of the functions below. */
export function createDynamoLeaseRepository(table: DynamoLeaseTable): LeaseRepository {
  return {
    list: (options) => listLeases(table, options?.signal),
    get: (leaseKey, options) => getLease(table, leaseKey, options?.signal),
    create: (init, options) => createLease(table, init, options?.signal),
    renew: (leaseKey, leaseCounter, options) => renewLease(table, leaseKey, leaseCounter, options?.signal),
    renewMany: (renewals, options) => renewLeases(table, renewals, options?.signal),
    take: (leaseKey, leaseCounter, owner, options) =>
      takeLease(table, leaseKey, leaseCounter, owner, options?.signal),
    release: (leaseKey, leaseCounter, options) =>
      releaseLease(table, leaseKey, leaseCounter, options?.signal),
    requestHandoff: (leaseKey, leaseCounter, handoff, options) =>
      requestLeaseHandoff(table, leaseKey, leaseCounter, handoff, options?.signal),
    completeHandoff: (leaseKey, leaseCounter, options) =>
      completeLeaseHandoff(table, leaseKey, leaseCounter, options?.signal),
    checkpoint: (leaseKey, leaseCounter, update, options) =>
      checkpointLease(table, leaseKey, leaseCounter, update, options?.signal),
    updateMeta: (leaseKey, update, options) => updateLeaseMeta(table, leaseKey, update, options?.signal),
    delete: (leaseKey, options) => deleteLease(table, leaseKey, options?.signal),
  };
}

/**
 * Every readable lease. One unreadable row must not hide the fleet's other leases (every worker's
 * rebalancing would stop on it), so it is skipped and reported, as the Java KCL's scan skips and logs
 * it. `get` of that key still rejects with the `LeaseDataError` naming it.
 */
export async function listLeases(table: DynamoLeaseTable, signal: AbortSignal | undefined): Promise<Lease[]> {
  const scan = await scanLeaseTable(table, signal);
  for (const row of scan.unreadable) {
    table.logger.warn(
      `${PACKAGE_NAME}: skipped lease ${JSON.stringify(row.leaseKey)}, which cannot be read: ${row.problem} (table ${JSON.stringify(table.definition.tableName)}); no worker will process it until you fix the item or delete it (store.admin.scan() lists every such row)`,
      { table: table.definition.tableName, leaseKey: row.leaseKey, problem: row.problem },
    );
  }
  return [...scan.leases];
}

export async function getLease(
  table: DynamoLeaseTable,
  leaseKey: string,
  signal: AbortSignal | undefined,
): Promise<Lease | null> {
  const item = await readLeaseItem(table, leaseKey, table.consistentReads, signal);
  return item === null ? null : leaseOfItem(table, leaseKey, item);
}

/** Puts the full item unless an item with the key exists (a lease, or a KCL 3.x row of another type). */
export async function createLease(
  table: DynamoLeaseTable,
  init: LeaseInit,
  signal: AbortSignal | undefined,
): Promise<LeaseWriteResult> {
  const intended = leaseFromInit(init);
  const unstorable = unstorableReason(intended);
  if (unstorable !== null) {
    throw new LeaseStoreError(
      PACKAGE_NAME,
      `${PACKAGE_NAME}: lease ${JSON.stringify(init.leaseKey)} cannot be stored in the Java KCL lease format: ${unstorable}`,
      { code: 'LEASE_DATA_INVALID', retryable: false },
    );
  }
  const item = encodeLeaseItem(intended, applicationKey(table));
  // Decoded before writing, so a lease that could not be read back is never written.
  const lease = leaseOfItem(table, init.leaseKey, item) as Lease;
  const created = await callLeaseTable(
    table,
    `PutItem (create lease ${JSON.stringify(init.leaseKey)})`,
    signal,
    async () => {
      try {
        await table.client.send(
          new PutItemCommand({
            TableName: table.definition.tableName,
            Item: item,
            ...buildExpressions({
              condition: { expression: `attribute_not_exists(#${LEASE_ATTRIBUTES.leaseKey})` },
            }),
          }),
          sendOptions(signal),
        );
        return true;
      } catch (error) {
        if (isConditionalCheckFailed(error)) return false;
        throw error;
      }
    },
  );
  return created ? { ok: true, lease } : { ok: false, reason: 'already-exists' };
}

/**
 * Why a lease would read back with another owner or hand-off than it was created with, or null. The
 * Java format has no field for kcl's owner during a hand-off: it is the `checkpointOwner`, so it must
 * be the hand-off's `from` (core's `handoffProblem` with the owner).
 */
function unstorableReason(lease: Lease): string | null {
  if (lease.streamIdentifier === '') return 'streamIdentifier is empty; pass null for a single-stream lease';
  return lease.handoff === null ? null : handoffProblem(lease.handoff, lease.owner);
}

/** The Java KCL's counter fencing: condition on the counter last seen, write that counter + 1. */
async function fencedWrite(
  table: DynamoLeaseTable,
  operation: string,
  leaseKey: string,
  leaseCounter: number,
  change: DynamoUpdate,
  signal: AbortSignal | undefined,
): Promise<LeaseWriteResult> {
  const outcome = await updateLeaseItem(
    table,
    operation,
    leaseKey,
    { ...change, set: { ...change.set, [LEASE_ATTRIBUTES.leaseCounter]: numberValue(leaseCounter + 1) } },
    counterCondition(leaseCounter),
    signal,
  );
  return writeResult(table, leaseKey, outcome, signal);
}

/** Increments the counter and nothing else: a hand-off in progress stays recorded. */
export function renewLease(
  table: DynamoLeaseTable,
  leaseKey: string,
  leaseCounter: number,
  signal: AbortSignal | undefined,
): Promise<LeaseWriteResult> {
  return fencedWrite(table, 'renew', leaseKey, leaseCounter, {}, signal);
}

/**
 * Each renewal is its own UpdateItem (DynamoDB has no conditional batch write), so each can fail alone
 * (throttled, timed out) while the others apply; the caller must learn of both, so a failure is that
 * lease's result.
 */
export function renewLeases(
  table: DynamoLeaseTable,
  renewals: readonly LeaseRenewal[],
  signal: AbortSignal | undefined,
): Promise<LeaseBatchWriteResult[]> {
  return mapConcurrently(
    renewals,
    table.renewConcurrency,
    async (renewal): Promise<LeaseBatchWriteResult> => {
      try {
        return await renewLease(table, renewal.leaseKey, renewal.leaseCounter, signal);
      } catch (error) {
        // An aborted call answers as a whole: the caller stopped waiting for every lease of it.
        if (signal?.aborted === true) throw error;
        return { ok: false, reason: 'failed', error };
      }
    },
  );
}

/**
 * The owner as kcl reads it, in a condition: the `checkpointOwner` during a KCL 3.x hand-off (Java's
 * `Lease.actualOwner()`), else the `leaseOwner`. `leaseOwner` alone would name the hand-off's next
 * owner, as if the lease were already theirs.
 */
const OWNER_IS = `(attribute_exists(#${LEASE_ATTRIBUTES.checkpointOwner}) AND #${LEASE_ATTRIBUTES.checkpointOwner} = :owner) OR (attribute_not_exists(#${LEASE_ATTRIBUTES.checkpointOwner}) AND #${LEASE_ATTRIBUTES.leaseOwner} = :owner)`;
const NO_OWNER = `attribute_not_exists(#${LEASE_ATTRIBUTES.checkpointOwner}) AND attribute_not_exists(#${LEASE_ATTRIBUTES.leaseOwner})`;
const ANOTHER_OWNER = `(attribute_exists(#${LEASE_ATTRIBUTES.checkpointOwner}) AND #${LEASE_ATTRIBUTES.checkpointOwner} <> :owner) OR (attribute_not_exists(#${LEASE_ATTRIBUTES.checkpointOwner}) AND attribute_exists(#${LEASE_ATTRIBUTES.leaseOwner}) AND #${LEASE_ATTRIBUTES.leaseOwner} <> :owner)`;

/**
 * Sets the owner and ends any hand-off. Only a take from another owner counts an owner switch, as the
 * Java KCL's taker counts it; a take of a free lease or by the current owner does not. The owner is
 * kcl's (see `OWNER_IS`): taking a lease in hand-off by its next owner counts a switch, its current
 * owner taking it back does not. One UpdateItem cannot ADD conditionally, so the write without a switch
 * goes first (free leases after a start or a graceful stop, re-adopted own leases), and the counting one
 * follows when DynamoDB says another owner held it.
 */
export async function takeLease(
  table: DynamoLeaseTable,
  leaseKey: string,
  leaseCounter: number,
  owner: string,
  signal: AbortSignal | undefined,
): Promise<LeaseWriteResult> {
  const ownerValue = { ':owner': { S: owner } };
  const taken: Record<string, AttributeValue> = {
    [LEASE_ATTRIBUTES.leaseOwner]: { S: owner },
    [LEASE_ATTRIBUTES.leaseCounter]: numberValue(leaseCounter + 1),
  };
  // A KCL 3.x graceful hand-off in progress ends when the lease is taken, as the Java taker removes
  // checkpointOwner; kcl's deadline of it goes with it.
  const remove = [LEASE_ATTRIBUTES.checkpointOwner, LEASE_ATTRIBUTES.handoffDeadline];
  const withoutSwitch = await updateLeaseItem(
    table,
    'take',
    leaseKey,
    { set: taken, remove },
    counterCondition(leaseCounter, { expression: `(${NO_OWNER}) OR ${OWNER_IS}`, values: ownerValue }),
    signal,
  );
  if (withoutSwitch.ok) return withoutSwitch;
  const seen = withoutSwitch.seen;
  const seenOwner = seen === undefined ? null : ownerOf(seen);
  const otherOwnerAtCounter =
    seen !== undefined && counterOf(seen) === leaseCounter && seenOwner !== null && seenOwner !== owner;
  if (seen !== undefined && !otherOwnerAtCounter) {
    return { ok: false, reason: await lostRaceReason(table, leaseKey, seen, signal) };
  }
  const fromAnotherOwner = await updateLeaseItem(
    table,
    'take',
    leaseKey,
    { set: taken, add: { [LEASE_ATTRIBUTES.ownerSwitchesSinceCheckpoint]: numberValue(1) }, remove },
    counterCondition(leaseCounter, { expression: ANOTHER_OWNER, values: ownerValue }),
    signal,
  );
  return writeResult(table, leaseKey, fromAnotherOwner, signal);
}

/** Clears the owner (and any hand-off), so another worker can take the lease at once. */
export function releaseLease(
  table: DynamoLeaseTable,
  leaseKey: string,
  leaseCounter: number,
  signal: AbortSignal | undefined,
): Promise<LeaseWriteResult> {
  return fencedWrite(
    table,
    'release',
    leaseKey,
    leaseCounter,
    {
      remove: [
        LEASE_ATTRIBUTES.leaseOwner,
        LEASE_ATTRIBUTES.checkpointOwner,
        LEASE_ATTRIBUTES.handoffDeadline,
      ],
    },
    signal,
  );
}

/**
 * Records a hand-off as the Java KCL 3.x's `initiateGracefulLeaseHandoff` writes it: `leaseOwner` is
 * the next owner, `checkpointOwner` the current one, the counter is not touched; on condition that the
 * counter is the one last seen, the owner is `from` and no hand-off is in progress (no
 * `checkpointOwner`). kcl's `handoffDeadline` goes with it (or any old one goes, without a deadline).
 */
export async function requestLeaseHandoff(
  table: DynamoLeaseTable,
  leaseKey: string,
  leaseCounter: number,
  handoff: LeaseHandoff,
  signal: AbortSignal | undefined,
): Promise<LeaseWriteResult> {
  const problem = handoffProblem(handoff);
  if (problem !== null) throw new ConfigurationError(PACKAGE_NAME, [problem]);
  const set: Record<string, AttributeValue> = {
    [LEASE_ATTRIBUTES.leaseOwner]: { S: handoff.to },
    ...handoffAttributes(handoff),
  };
  const outcome = await updateLeaseItem(
    table,
    'request a hand-off of',
    leaseKey,
    { set, remove: handoff.deadline === null ? [LEASE_ATTRIBUTES.handoffDeadline] : [] },
    counterCondition(leaseCounter, handoffRequestable(handoff.from)),
    signal,
  );
  return outcome.ok
    ? outcome
    : { ok: false, reason: await handoffLostRaceReason(table, leaseKey, leaseCounter, outcome.seen, signal) };
}

/**
 * The owner ends the hand-off: `leaseOwner` already names the next owner, so removing
 * `checkpointOwner` (and kcl's deadline) gives the lease to it, as Java's hand-off completes; the
 * counter and the owner switches go up by one.
 */
export async function completeLeaseHandoff(
  table: DynamoLeaseTable,
  leaseKey: string,
  leaseCounter: number,
  signal: AbortSignal | undefined,
): Promise<LeaseWriteResult> {
  const outcome = await updateLeaseItem(
    table,
    'complete the hand-off of',
    leaseKey,
    {
      set: { [LEASE_ATTRIBUTES.leaseCounter]: numberValue(leaseCounter + 1) },
      add: { [LEASE_ATTRIBUTES.ownerSwitchesSinceCheckpoint]: numberValue(1) },
      remove: [LEASE_ATTRIBUTES.checkpointOwner, LEASE_ATTRIBUTES.handoffDeadline],
    },
    counterCondition(leaseCounter, HANDOFF_IN_PROGRESS),
    signal,
  );
  return outcome.ok
    ? outcome
    : { ok: false, reason: await handoffLostRaceReason(table, leaseKey, leaseCounter, outcome.seen, signal) };
}

/** Java's condition for a hand-off request: the owner is `from` and none is in progress. */
function handoffRequestable(from: string): DynamoCondition {
  return {
    expression: `#${LEASE_ATTRIBUTES.leaseOwner} = :handoffFrom AND attribute_not_exists(#${LEASE_ATTRIBUTES.checkpointOwner})`,
    values: { ':handoffFrom': { S: from } },
  };
}

/** A hand-off in progress as the codec reads one: both owners recorded. */
const HANDOFF_IN_PROGRESS: DynamoCondition = {
  expression: `attribute_exists(#${LEASE_ATTRIBUTES.checkpointOwner}) AND attribute_exists(#${LEASE_ATTRIBUTES.leaseOwner})`,
};

/**
 * Why a hand-off write lost, from the item DynamoDB returned or a consistent read: the lease is gone,
 * its counter moved, or (counter matched) its owner or hand-off state is not what the call needs.
 */
async function handoffLostRaceReason(
  table: DynamoLeaseTable,
  leaseKey: string,
  leaseCounter: number,
  seen: DynamoItem | undefined,
  signal: AbortSignal | undefined,
): Promise<LostRaceReason> {
  const item = seen ?? (await readLeaseItem(table, leaseKey, true, signal));
  if (item === null || !rowIsLease(item)) return 'not-found';
  return counterOf(item) === leaseCounter ? 'handoff-mismatch' : 'counter-mismatch';
}

/** Writes the checkpoint and the pending one, resets the owner switches; a hand-off stays recorded. */
export function checkpointLease(
  table: DynamoLeaseTable,
  leaseKey: string,
  leaseCounter: number,
  update: CheckpointUpdate,
  signal: AbortSignal | undefined,
): Promise<LeaseWriteResult> {
  const pending = update.pendingCheckpoint ?? null;
  const set: Record<string, AttributeValue> = {
    ...checkpointAttributes(update.checkpoint),
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
  return fencedWrite(table, 'checkpoint', leaseKey, leaseCounter, { set, remove }, signal);
}

/** Conditional only on the lease existing, as the Java KCL's updateLeaseWithMetaInfo: no counter. */
export async function updateLeaseMeta(
  table: DynamoLeaseTable,
  leaseKey: string,
  update: LeaseMetaUpdate,
  signal: AbortSignal | undefined,
): Promise<Lease | null> {
  const set: Record<string, AttributeValue> = {};
  const remove: string[] = [];
  if (update.childShardIds !== undefined) {
    const children = stringSetValue(update.childShardIds);
    if (children === null) remove.push(LEASE_ATTRIBUTES.childShardIds);
    else set[LEASE_ATTRIBUTES.childShardIds] = children;
  }
  if (update.hashKeyRange !== undefined) Object.assign(set, hashKeyRangeAttributes(update.hashKeyRange));
  if (Object.keys(set).length === 0 && remove.length === 0) {
    const item = await readLeaseItem(table, leaseKey, true, signal);
    return item === null ? null : leaseOfItem(table, leaseKey, item);
  }
  const outcome = await updateLeaseItem(
    table,
    'record meta of',
    leaseKey,
    { set, remove },
    LEASE_ROW,
    signal,
  );
  return outcome.ok ? outcome.lease : null;
}

/** Unconditional, but a KCL 3.x row of another entity type under this key is not a lease: it stays. */
export async function deleteLease(
  table: DynamoLeaseTable,
  leaseKey: string,
  signal: AbortSignal | undefined,
): Promise<void> {
  await callLeaseTable(table, `DeleteItem (lease ${JSON.stringify(leaseKey)})`, signal, async () => {
    try {
      await table.client.send(
        new DeleteItemCommand({
          TableName: table.definition.tableName,
          Key: leaseItemKey(table, leaseKey),
          ...buildExpressions({
            condition: {
              expression: `attribute_not_exists(#${LEASE_ATTRIBUTES.entityType}) OR #${LEASE_ATTRIBUTES.entityType} = :leaseEntityType`,
              values: { ':leaseEntityType': { S: LEASE_ENTITY_TYPE } },
            },
          }),
        }),
        sendOptions(signal),
      );
    } catch (error) {
      if (!isConditionalCheckFailed(error)) throw error;
    }
  });
}

/** The owner of an item as the conditions above see it (attributes present, whatever their value). */
function ownerOf(item: DynamoItem): string | null {
  return item[LEASE_ATTRIBUTES.checkpointOwner]?.S ?? item[LEASE_ATTRIBUTES.leaseOwner]?.S ?? null;
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
