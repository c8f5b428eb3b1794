import type { AttributeValue } from '@aws-sdk/client-dynamodb';
import type { HashKeyRange, Lease, LeaseHandoff } from '@kcl/core';
import { ExtendedSequenceNumber, hashKeyRange, shardIdOfLeaseKey, uniqueSorted } from '@kcl/core';

/** A DynamoDB item in the low-level wire shape (`{ name: { S: '…' } }`). */
export type DynamoItem = Record<string, AttributeValue>;

/**
 * Attribute names of a lease item, exactly as the Java KCL's `DynamoDBLeaseSerializer` (and
 * `DynamoDBMultiStreamLeaseSerializer`) name them, plus the two kcl-only ones at the end.
 */
export const LEASE_ATTRIBUTES = Object.freeze({
  leaseKey: 'leaseKey',
  leaseOwner: 'leaseOwner',
  leaseCounter: 'leaseCounter',
  checkpoint: 'checkpoint',
  checkpointSubSequenceNumber: 'checkpointSubSequenceNumber',
  pendingCheckpoint: 'pendingCheckpoint',
  pendingCheckpointSubSequenceNumber: 'pendingCheckpointSubSequenceNumber',
  pendingCheckpointState: 'pendingCheckpointState',
  ownerSwitchesSinceCheckpoint: 'ownerSwitchesSinceCheckpoint',
  parentShardId: 'parentShardId',
  childShardIds: 'childShardIds',
  startingHashKey: 'startingHashKey',
  endingHashKey: 'endingHashKey',
  /** KCL 3.x: the owner still holding the lease during a graceful hand-off (`leaseOwner` is then the next one). */
  checkpointOwner: 'checkpointOwner',
  entityType: 'entityType',
  /** Multi-stream leases: the stream identifier ("streamName" for legacy reasons, says the Java KCL). */
  streamName: 'streamName',
  shardId: 'shardId',
  /** The partition key of the shared layout; not a Java attribute. */
  applicationName: 'applicationName',
  /**
   * kcl only: when a hand-off is void, with the hand-off it belongs to (`{ epochMillis, from, to }`).
   * The Java KCL keeps its hand-off timeout in memory and never writes one.
   */
  handoffDeadline: 'handoffDeadline',
});

/** The `entityType` of a lease row (KCL 3.5). Rows without `entityType` are leases too. */
export const LEASE_ENTITY_TYPE = 'LEASE';

/**
 * A multi-stream lease key: `accountId:streamName:creationEpoch:shardId`, the Java KCL's
 * `streamIdentifier + ":" + shardId`. The store writes `streamName`/`shardId` from a lease's
 * `streamIdentifier`, never from the shape of its key; this only helps callers split such a key.
 */
const MULTI_STREAM_LEASE_KEY = /^([0-9]+:[^:]+:[0-9]+):([^:]+)$/;

export interface MultiStreamParts {
  readonly streamIdentifier: string;
  readonly shardId: string;
}

/** The stream identifier and shard id of a multi-stream lease key, or null for a single-stream key. */
export function multiStreamParts(leaseKey: string): MultiStreamParts | null {
  const match = MULTI_STREAM_LEASE_KEY.exec(leaseKey);
  if (match === null) return null;
  return { streamIdentifier: match[1] as string, shardId: match[2] as string };
}

/** What one row of a lease table turned out to be. */
export type DecodedLeaseRow =
  | { readonly kind: 'lease'; readonly lease: Lease }
  /** A KCL 3.x row of another entity type (worker metrics, leader, migration state, stream). */
  | { readonly kind: 'other'; readonly entityType: string; readonly leaseKey: string | null }
  | { readonly kind: 'invalid'; readonly leaseKey: string; readonly problem: string };

class RowProblem extends Error {}

/**
 * Reads a row of a Java-format lease table. Rows with a non-`LEASE` `entityType` are reported as
 * `other`; a lease row that cannot be read is `invalid` with the reason. Attributes older Java versions
 * did not write (sub-sequence numbers, owner switches, hash keys, entityType) take their defaults.
 */
export function decodeLeaseRow(item: DynamoItem): DecodedLeaseRow {
  const keyValue = item[LEASE_ATTRIBUTES.leaseKey];
  const leaseKey = keyValue?.S;
  const entityType = item[LEASE_ATTRIBUTES.entityType];
  if (entityType !== undefined && entityType.S !== LEASE_ENTITY_TYPE) {
    return {
      kind: 'other',
      entityType: entityType.S ?? `(${attributeType(entityType)})`,
      leaseKey: leaseKey ?? null,
    };
  }
  if (leaseKey === undefined || leaseKey.length === 0) {
    return {
      kind: 'invalid',
      leaseKey: leaseKey ?? '',
      problem: `leaseKey must be a non-empty string attribute (S), found ${keyValue === undefined ? 'none' : attributeType(keyValue)}`,
    };
  }
  try {
    return { kind: 'lease', lease: decodeLease(leaseKey, item) };
  } catch (error) {
    if (error instanceof RowProblem) return { kind: 'invalid', leaseKey, problem: error.message };
    throw error;
  }
}

function decodeLease(leaseKey: string, item: DynamoItem): Lease {
  const leaseOwner = nonEmpty(optionalString(item, LEASE_ATTRIBUTES.leaseOwner));
  const checkpointOwner = nonEmpty(optionalString(item, LEASE_ATTRIBUTES.checkpointOwner));
  const leaseCounter = optionalCount(item, LEASE_ATTRIBUTES.leaseCounter);
  if (leaseCounter === null) throw new RowProblem('leaseCounter (N) is missing');
  const checkpoint = position(
    item,
    LEASE_ATTRIBUTES.checkpoint,
    LEASE_ATTRIBUTES.checkpointSubSequenceNumber,
    'checkpoint',
  );
  if (checkpoint === null) throw new RowProblem('checkpoint (S) is missing');
  const pendingCheckpoint = position(
    item,
    LEASE_ATTRIBUTES.pendingCheckpoint,
    LEASE_ATTRIBUTES.pendingCheckpointSubSequenceNumber,
    'pendingCheckpoint',
  );
  return Object.freeze({
    leaseKey,
    // The Java KCL's Lease.actualOwner(): during a hand-off the old owner, named in checkpointOwner,
    // still holds the lease and is the only one allowed to checkpoint it.
    owner: checkpointOwner ?? leaseOwner,
    leaseCounter,
    checkpoint,
    pendingCheckpoint,
    ownerSwitchesSinceCheckpoint: optionalCount(item, LEASE_ATTRIBUTES.ownerSwitchesSinceCheckpoint) ?? 0,
    parentShardIds: Object.freeze([...stringSet(item, LEASE_ATTRIBUTES.parentShardId)]),
    childShardIds: Object.freeze([...stringSet(item, LEASE_ATTRIBUTES.childShardIds)]),
    hashKeyRange: hashRange(item),
    streamIdentifier: nonEmpty(optionalString(item, LEASE_ATTRIBUTES.streamName)),
    handoff: handoffOf(item, checkpointOwner, leaseOwner),
  });
}

/**
 * A KCL 3.x graceful hand-off: Java's initiateGracefulLeaseHandoff writes the next owner to
 * `leaseOwner` and the current one to `checkpointOwner`. A `checkpointOwner` without a `leaseOwner`
 * is no hand-off (nobody to hand to); its owner is still the `checkpointOwner`, as Java reads it.
 */
function handoffOf(item: DynamoItem, from: string | null, to: string | null): LeaseHandoff | null {
  if (from === null || to === null) return null;
  return Object.freeze({ from, to, deadline: handoffDeadline(item, from, to) });
}

/**
 * The deadline kcl recorded for this hand-off, or null. Java's take and evict remove `checkpointOwner`
 * but leave attributes they do not know, so a deadline counts only when it names the same `from` and
 * `to` as the hand-off now recorded: one left behind by an earlier hand-off never voids a later one.
 */
function handoffDeadline(item: DynamoItem, from: string, to: string): Date | null {
  const value = item[LEASE_ATTRIBUTES.handoffDeadline];
  if (value === undefined || value.NULL === true) return null;
  const fields = value.M;
  const epochMillis = fields?.epochMillis?.N;
  if (
    fields === undefined ||
    epochMillis === undefined ||
    !SIGNED_INTEGER.test(epochMillis) ||
    !Number.isSafeInteger(Number(epochMillis)) ||
    fields.from?.S === undefined ||
    fields.to?.S === undefined
  ) {
    throw new RowProblem(
      `${LEASE_ATTRIBUTES.handoffDeadline} must be a map (M) of epochMillis (N, an integer), from (S) and to (S), found ${describeValue(value)}`,
    );
  }
  const deadline = new Date(Number(epochMillis));
  if (Number.isNaN(deadline.getTime())) {
    throw new RowProblem(`${LEASE_ATTRIBUTES.handoffDeadline}.epochMillis ${epochMillis} is not a date`);
  }
  return fields.from.S === from && fields.to.S === to ? deadline : null;
}

/**
 * The full item `leases.create` puts, in the Java KCL's format. Absent values are omitted, never
 * written as empty strings or empty sets. `key` holds extra key attributes (the shared layout's
 * `applicationName`).
 */
export function encodeLeaseItem(lease: Lease, key: DynamoItem = {}): DynamoItem {
  const item: DynamoItem = { ...key, [LEASE_ATTRIBUTES.leaseKey]: { S: lease.leaseKey } };
  // During a hand-off the Java KCL's leaseOwner is already the next owner; the one still holding the
  // lease is the checkpointOwner.
  const leaseOwner = lease.handoff?.to ?? lease.owner;
  if (leaseOwner !== null && leaseOwner.length > 0) item[LEASE_ATTRIBUTES.leaseOwner] = { S: leaseOwner };
  if (lease.handoff !== null) Object.assign(item, handoffAttributes(lease.handoff));
  item[LEASE_ATTRIBUTES.leaseCounter] = numberValue(lease.leaseCounter);
  Object.assign(item, checkpointAttributes(lease.checkpoint));
  if (lease.pendingCheckpoint !== null)
    Object.assign(item, pendingCheckpointAttributes(lease.pendingCheckpoint));
  item[LEASE_ATTRIBUTES.ownerSwitchesSinceCheckpoint] = numberValue(lease.ownerSwitchesSinceCheckpoint);
  const parents = stringSetValue(lease.parentShardIds);
  if (parents !== null) item[LEASE_ATTRIBUTES.parentShardId] = parents;
  const children = stringSetValue(lease.childShardIds);
  if (children !== null) item[LEASE_ATTRIBUTES.childShardIds] = children;
  if (lease.hashKeyRange !== null) Object.assign(item, hashKeyRangeAttributes(lease.hashKeyRange));
  item[LEASE_ATTRIBUTES.entityType] = { S: LEASE_ENTITY_TYPE };
  if (lease.streamIdentifier !== null) {
    // As the Java multi-stream serializer writes them; its reader requires both.
    item[LEASE_ATTRIBUTES.streamName] = { S: lease.streamIdentifier };
    item[LEASE_ATTRIBUTES.shardId] = { S: shardIdInStream(lease.leaseKey, lease.streamIdentifier) };
  }
  return item;
}

/** `checkpointOwner` and, with a deadline, kcl's `handoffDeadline`. */
export function handoffAttributes(handoff: LeaseHandoff): DynamoItem {
  const item: DynamoItem = { [LEASE_ATTRIBUTES.checkpointOwner]: { S: handoff.from } };
  if (handoff.deadline !== null) {
    item[LEASE_ATTRIBUTES.handoffDeadline] = {
      M: {
        epochMillis: numberValue(handoff.deadline.getTime()),
        from: { S: handoff.from },
        to: { S: handoff.to },
      },
    };
  }
  return item;
}

/**
 * The shard id of a multi-stream lease, as Java's MultiStreamLease keys it
 * (`streamIdentifier + ":" + shardId`); the last part of the key if it does not start that way.
 */
function shardIdInStream(leaseKey: string, streamIdentifier: string): string {
  const prefix = `${streamIdentifier}:`;
  return leaseKey.startsWith(prefix) && leaseKey.length > prefix.length
    ? leaseKey.slice(prefix.length)
    : shardIdOfLeaseKey(leaseKey);
}

export function checkpointAttributes(checkpoint: ExtendedSequenceNumber): DynamoItem {
  return {
    [LEASE_ATTRIBUTES.checkpoint]: { S: checkpoint.sequenceNumber },
    [LEASE_ATTRIBUTES.checkpointSubSequenceNumber]: numberValue(checkpoint.subSequenceNumber),
  };
}

export function pendingCheckpointAttributes(pending: ExtendedSequenceNumber): DynamoItem {
  return {
    [LEASE_ATTRIBUTES.pendingCheckpoint]: { S: pending.sequenceNumber },
    [LEASE_ATTRIBUTES.pendingCheckpointSubSequenceNumber]: numberValue(pending.subSequenceNumber),
  };
}

export function hashKeyRangeAttributes(range: HashKeyRange): DynamoItem {
  return {
    [LEASE_ATTRIBUTES.startingHashKey]: { S: range.startingHashKey.toString() },
    [LEASE_ATTRIBUTES.endingHashKey]: { S: range.endingHashKey.toString() },
  };
}

/** A string set of the non-empty ids, or null when there are none (DynamoDB sets cannot be empty). */
export function stringSetValue(values: readonly string[]): AttributeValue | null {
  const kept = uniqueSorted(values.filter((value) => value.length > 0));
  return kept.length === 0 ? null : { SS: [...kept] };
}

export function numberValue(value: number): AttributeValue {
  return { N: String(value) };
}

function attributeType(value: AttributeValue): string {
  const [type] = Object.keys(value).filter(
    (name) => (value as unknown as Record<string, unknown>)[name] !== undefined,
  );
  return type ?? 'empty';
}

function optionalString(item: DynamoItem, name: string): string | null {
  const value = item[name];
  if (value === undefined || value.NULL === true) return null;
  if (value.S === undefined)
    throw new RowProblem(`${name} must be a string (S), found ${attributeType(value)}`);
  return value.S;
}

const INTEGER = /^[0-9]+$/;
const SIGNED_INTEGER = /^-?[0-9]+$/;

function nonEmpty(value: string | null): string | null {
  return value === null || value.length === 0 ? null : value;
}

function describeValue(value: AttributeValue): string {
  const type = attributeType(value);
  return type === 'M' ? `a map of ${Object.keys(value.M ?? {}).join(', ') || 'nothing'}` : type;
}

function optionalCount(item: DynamoItem, name: string): number | null {
  const value = item[name];
  if (value === undefined || value.NULL === true) return null;
  if (value.N === undefined)
    throw new RowProblem(`${name} must be a number (N), found ${attributeType(value)}`);
  const parsed = Number(value.N);
  if (!INTEGER.test(value.N) || !Number.isSafeInteger(parsed)) {
    throw new RowProblem(`${name} ${JSON.stringify(value.N)} is not a non-negative integer`);
  }
  return parsed;
}

function position(
  item: DynamoItem,
  sequenceName: string,
  subSequenceName: string,
  what: string,
): ExtendedSequenceNumber | null {
  const sequenceNumber = optionalString(item, sequenceName);
  // The Java KCL only materialises a position whose string is non-empty.
  if (sequenceNumber === null || sequenceNumber.length === 0) return null;
  const subSequenceNumber = optionalCount(item, subSequenceName) ?? 0;
  const parsed = ExtendedSequenceNumber.tryOf(sequenceNumber, subSequenceNumber);
  if (parsed !== null) return parsed;
  // Sentinels carry no sub-sequence number; tolerate one written by another tool.
  const sentinel = ExtendedSequenceNumber.tryOf(sequenceNumber, 0);
  if (sentinel?.isSentinel) return sentinel;
  throw new RowProblem(
    `${what} ${JSON.stringify(sequenceNumber)} is neither a decimal sequence number nor one of TRIM_HORIZON, LATEST, AT_TIMESTAMP, SHARD_END`,
  );
}

function stringSet(item: DynamoItem, name: string): readonly string[] {
  const value = item[name];
  if (value === undefined || value.NULL === true) return [];
  if (value.SS !== undefined) return uniqueSorted(value.SS.filter((entry) => entry.length > 0));
  // Not what the Java KCL writes, but unambiguous: a single id, or a list of string ids.
  if (value.S !== undefined) return value.S.length === 0 ? [] : [value.S];
  const list = value.L;
  if (list?.every((entry) => entry.S !== undefined)) {
    return uniqueSorted(list.map((entry) => entry.S as string).filter((entry) => entry.length > 0));
  }
  throw new RowProblem(`${name} must be a string set (SS), found ${attributeType(value)}`);
}

function hashRange(item: DynamoItem): HashKeyRange | null {
  const start = optionalString(item, LEASE_ATTRIBUTES.startingHashKey);
  const end = optionalString(item, LEASE_ATTRIBUTES.endingHashKey);
  // The Java KCL reads the range only when both keys are present and non-empty.
  if (start === null || end === null || start.length === 0 || end.length === 0) return null;
  try {
    return hashKeyRange(start, end);
  } catch (error) {
    throw new RowProblem(
      `startingHashKey/endingHashKey ${JSON.stringify(start)}/${JSON.stringify(end)}: ${(error as Error).message}`,
    );
  }
}
