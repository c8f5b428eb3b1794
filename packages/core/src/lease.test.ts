import { describe, expect, it } from 'vitest';
import { ExtendedSequenceNumber } from './extended-sequence-number.js';
import { isLeaseComplete, leaseFromInit, leasesEqual, shardIdOfLeaseKey } from './lease.js';

describe('lease helpers', () => {
  it('fills the defaults of a new lease and sorts shard ids as sets', () => {
    const lease = leaseFromInit({
      leaseKey: 'shardId-2',
      checkpoint: ExtendedSequenceNumber.TRIM_HORIZON,
      parentShardIds: ['shardId-1', 'shardId-0', 'shardId-1'],
    });
    expect(lease).toMatchObject({
      owner: null,
      leaseCounter: 0,
      pendingCheckpoint: null,
      hashKeyRange: null,
    });
    expect(lease.parentShardIds).toEqual(['shardId-0', 'shardId-1']);
    expect(isLeaseComplete(lease)).toBe(false);
    expect(isLeaseComplete({ checkpoint: ExtendedSequenceNumber.SHARD_END })).toBe(true);
  });

  it('compares leases including the counter', () => {
    const a = leaseFromInit({ leaseKey: 'k', checkpoint: ExtendedSequenceNumber.of('5') });
    expect(leasesEqual(a, { ...a })).toBe(true);
    expect(leasesEqual(a, { ...a, leaseCounter: 1 })).toBe(false);
    expect(leasesEqual(a, { ...a, checkpoint: ExtendedSequenceNumber.of('5', 1) })).toBe(false);
  });

  it('finds the shard id in single- and multi-stream keys', () => {
    expect(shardIdOfLeaseKey('shardId-000000000007')).toBe('shardId-000000000007');
    expect(shardIdOfLeaseKey('123456789012:orders:1600000000:shardId-000000000007')).toBe(
      'shardId-000000000007',
    );
  });
});
