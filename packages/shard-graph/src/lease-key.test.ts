import { describe, expect, it } from 'vitest';
import { lease } from '../test/fixtures.js';
import {
  childLeaseKeysOf,
  leaseKeyForShard,
  leaseLookupOf,
  parentLeaseKeysOf,
  streamIdentifierOfLeaseKey,
} from './lease-key.js';

describe('lease keys', () => {
  it('are shard ids, or stream-prefixed shard ids', () => {
    expect(leaseKeyForShard('shardId-1')).toBe('shardId-1');
    expect(leaseKeyForShard('shardId-1', '1:orders:9')).toBe('1:orders:9:shardId-1');
    expect(streamIdentifierOfLeaseKey('shardId-1')).toBeUndefined();
    expect(streamIdentifierOfLeaseKey('1:orders:9:shardId-1')).toBe('1:orders:9');
  });

  it('name parents and children under the lease stream', () => {
    const multi = lease('1:orders:9:c', { parents: ['a', 'b'], children: ['d'] });
    expect(parentLeaseKeysOf(multi)).toEqual(['1:orders:9:a', '1:orders:9:b']);
    expect(childLeaseKeysOf(multi)).toEqual(['1:orders:9:d']);
    expect(childLeaseKeysOf(multi, ['e'])).toEqual(['1:orders:9:e']);
    expect(parentLeaseKeysOf(lease('c', { parents: ['a'] }))).toEqual(['a']);
  });

  it('looks leases up in a listing', () => {
    const lookup = leaseLookupOf([lease('a'), lease('b')]);
    expect(lookup('a')?.leaseKey).toBe('a');
    expect(lookup('z')).toBeUndefined();
  });
});
