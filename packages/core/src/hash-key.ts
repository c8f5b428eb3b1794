import { createHash } from 'node:crypto';
import { InvalidHashKeyError } from './errors.js';

/** The smallest hash key of a stream. */
export const MIN_HASH_KEY = 0n;
/** The largest hash key of a stream: 2^128 − 1. */
export const MAX_HASH_KEY = (1n << 128n) - 1n;

/** An inclusive range of 128-bit hash keys, as a shard owns them. */
export interface HashKeyRange {
  readonly startingHashKey: bigint;
  readonly endingHashKey: bigint;
}

const DIGITS = /^[0-9]+$/;

/** The hash key Kinesis assigns to a partition key: MD5 of its UTF-8 bytes as an unsigned 128-bit integer. */
export function hashKeyOfPartitionKey(partitionKey: string): bigint {
  const digest = createHash('md5').update(partitionKey, 'utf8').digest('hex');
  return BigInt(`0x${digest}`);
}

/** Parses a decimal hash key (as ListShards and the Java lease table write it) and checks its bounds. */
export function parseHashKey(value: string): bigint {
  if (typeof value !== 'string' || !DIGITS.test(value)) {
    throw new InvalidHashKeyError(`${JSON.stringify(value)} is not a decimal hash key`);
  }
  const key = BigInt(value);
  if (key > MAX_HASH_KEY) {
    throw new InvalidHashKeyError(`hash key ${value} exceeds 2^128 - 1`);
  }
  return key;
}

/** Builds a checked range from decimal strings or bigints. */
export function hashKeyRange(startingHashKey: string | bigint, endingHashKey: string | bigint): HashKeyRange {
  const start = typeof startingHashKey === 'bigint' ? startingHashKey : parseHashKey(startingHashKey);
  const end = typeof endingHashKey === 'bigint' ? endingHashKey : parseHashKey(endingHashKey);
  if (start < MIN_HASH_KEY || end > MAX_HASH_KEY) {
    throw new InvalidHashKeyError(`hash key range ${start}…${end} is outside 0 … 2^128 - 1`);
  }
  if (start > end) {
    throw new InvalidHashKeyError(`hash key range starts at ${start}, after its end ${end}`);
  }
  return { startingHashKey: start, endingHashKey: end };
}

export function hashKeyRangeContains(range: HashKeyRange, hashKey: bigint): boolean {
  return hashKey >= range.startingHashKey && hashKey <= range.endingHashKey;
}

export function hashKeyRangesEqual(a: HashKeyRange | null, b: HashKeyRange | null): boolean {
  if (a === null || b === null) return a === b;
  return a.startingHashKey === b.startingHashKey && a.endingHashKey === b.endingHashKey;
}

/** The whole key space, owned by a stream with a single shard. */
export const FULL_HASH_KEY_RANGE: HashKeyRange = Object.freeze({
  startingHashKey: MIN_HASH_KEY,
  endingHashKey: MAX_HASH_KEY,
});
