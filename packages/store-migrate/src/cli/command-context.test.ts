import type { LeaseInit } from '@kcl/core';
import { ExtendedSequenceNumber, leaseFromInit } from '@kcl/core';
import { describe, expect, it } from 'vitest';
import { streamSelector } from './command-context.js';

const lease = (init: Omit<LeaseInit, 'checkpoint'>) =>
  leaseFromInit({ checkpoint: ExtendedSequenceNumber.TRIM_HORIZON, ...init });

describe('streamSelector', () => {
  const orders = streamSelector('orders');

  it('selects by the stream a lease names', () => {
    expect(
      orders?.(lease({ leaseKey: 'shardId-1', streamIdentifier: '123456789012:orders:1700000000' })),
    ).toBe(true);
    expect(
      orders?.(lease({ leaseKey: 'shardId-1', streamIdentifier: '123456789012:billing:1700000000' })),
    ).toBe(false);
  });

  it('reads the stream from a multi-stream key when the lease names none', () => {
    expect(orders?.(lease({ leaseKey: '123456789012:orders:1700000000:shardId-1' }))).toBe(true);
    expect(orders?.(lease({ leaseKey: '123456789012:billing:1700000000:shardId-1' }))).toBe(false);
    expect(orders?.(lease({ leaseKey: 'shardId-1' }))).toBe(true);
  });

  it('selects everything when no stream is given', () => {
    expect(streamSelector(undefined)).toBeUndefined();
  });
});
