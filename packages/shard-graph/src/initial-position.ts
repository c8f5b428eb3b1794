import { ExtendedSequenceNumber } from '@kcl/core';

/** Where an application with no leases starts reading: the public API's `initialPosition`. */
export type InitialPosition = 'TRIM_HORIZON' | 'LATEST' | { readonly timestamp: Date };

/** The three kinds of initial position, as the sentinel checkpoint names them. */
export type InitialPositionKind = 'TRIM_HORIZON' | 'LATEST' | 'AT_TIMESTAMP';

/** The ListShards `ShardFilter` for an initial position, in the SDK's shape. */
export type InitialShardFilter =
  | { readonly Type: 'AT_TRIM_HORIZON' }
  | { readonly Type: 'AT_LATEST' }
  | { readonly Type: 'AT_TIMESTAMP'; readonly Timestamp: Date };

/** The kind of an initial position. */
export function initialPositionKind(position: InitialPosition): InitialPositionKind {
  return typeof position === 'string' ? position : 'AT_TIMESTAMP';
}

/**
 * The checkpoint new leases get for an initial position: its sentinel. The AT_TIMESTAMP timestamp is not
 * stored in the lease (as in the Java KCL); the consumer reads it from its configuration.
 */
export function initialCheckpointOf(position: InitialPosition | InitialPositionKind): ExtendedSequenceNumber {
  const kind = typeof position === 'string' ? position : 'AT_TIMESTAMP';
  return ExtendedSequenceNumber[kind];
}

/**
 * The ShardFilter to list shards with when the application has no leases yet: only the shards at the
 * initial position, so a LATEST application does not first read every closed ancestor.
 */
export function shardFilterFor(position: InitialPosition): InitialShardFilter {
  if (position === 'TRIM_HORIZON') return { Type: 'AT_TRIM_HORIZON' };
  if (position === 'LATEST') return { Type: 'AT_LATEST' };
  return { Type: 'AT_TIMESTAMP', Timestamp: position.timestamp };
}
