import { describe, expect, it } from 'vitest';
import { InvalidHashKeyError } from './errors.js';
import {
  hashKeyOfPartitionKey,
  hashKeyRange,
  hashKeyRangeContains,
  hashKeyRangesEqual,
  MAX_HASH_KEY,
  parseHashKey,
} from './hash-key.js';

describe('hash keys', () => {
  it('is MD5 of the UTF-8 partition key as an unsigned 128-bit integer', () => {
    // md5("a") = 0cc175b9c0f1b6a831c399e269772661
    expect(hashKeyOfPartitionKey('a')).toBe(0x0cc175b9c0f1b6a831c399e269772661n);
    // md5("") = d41d8cd98f00b204e9800998ecf8427e: high bit set, still unsigned
    expect(hashKeyOfPartitionKey('')).toBe(0xd41d8cd98f00b204e9800998ecf8427en);
    // multi-byte: the UTF-8 bytes c3 a9, not the latin-1 byte e9 (md5 3406877694691ddd…)
    const utf8 = hashKeyOfPartitionKey('é');
    expect(utf8).toBe(0x66ddcd97cfdeabb2f6fb8a999b4bc76fn);
    expect(utf8 >= 0n && utf8 <= MAX_HASH_KEY).toBe(true);
  });

  it('spans 0 … 2^128 − 1', () => {
    expect(MAX_HASH_KEY).toBe(340282366920938463463374607431768211455n);
    expect(parseHashKey('340282366920938463463374607431768211455')).toBe(MAX_HASH_KEY);
    expect(parseHashKey('0')).toBe(0n);
    expect(() => parseHashKey('340282366920938463463374607431768211456')).toThrow(InvalidHashKeyError);
    expect(() => parseHashKey('-1')).toThrow(InvalidHashKeyError);
    expect(() => parseHashKey('0x10')).toThrow(InvalidHashKeyError);
  });

  it('builds checked ranges and tests membership at both ends', () => {
    const range = hashKeyRange('0', '170141183460469231731687303715884105727');
    expect(hashKeyRangeContains(range, 0n)).toBe(true);
    expect(hashKeyRangeContains(range, 170141183460469231731687303715884105727n)).toBe(true);
    expect(hashKeyRangeContains(range, 170141183460469231731687303715884105728n)).toBe(false);
    expect(() => hashKeyRange(10n, 9n)).toThrow(/starts at 10, after its end 9/);
    expect(() => hashKeyRange(-1n, 9n)).toThrow(InvalidHashKeyError);
    expect(hashKeyRangesEqual(range, hashKeyRange(0n, range.endingHashKey))).toBe(true);
    expect(hashKeyRangesEqual(range, null)).toBe(false);
    expect(hashKeyRangesEqual(null, null)).toBe(true);
  });
});
