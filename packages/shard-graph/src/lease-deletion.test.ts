import type { Lease } from '@kcl/core';
import { describe, expect, it } from 'vitest';
import { lease } from '../test/fixtures.js';
import { checkLeaseDeletable, findDeletableLeases, hasLeaseStarted } from './lease-deletion.js';
import { leaseLookupOf } from './lease-key.js';

const finished = lease('p', { checkpoint: 'SHARD_END', children: ['l', 'r'] });

describe('checkLeaseDeletable', () => {
  it.each<[string, Lease, Lease[], ReturnType<typeof checkLeaseDeletable>]>([
    [
      'a lease still being read',
      lease('p', { checkpoint: '5', children: ['l'] }),
      [],
      { deletable: false, reason: 'not-at-shard-end', leaseKeys: [] },
    ],
    [
      'a finished lease without recorded children',
      lease('p', { checkpoint: 'SHARD_END' }),
      [],
      { deletable: false, reason: 'children-unknown', leaseKeys: [] },
    ],
    [
      'a finished lease with a child lease missing',
      finished,
      [lease('l', { checkpoint: '3' })],
      { deletable: false, reason: 'child-lease-missing', leaseKeys: ['r'] },
    ],
    [
      'a finished lease whose child has not started (TRIM_HORIZON)',
      finished,
      [lease('l', { checkpoint: '3' }), lease('r', { checkpoint: 'TRIM_HORIZON' })],
      { deletable: false, reason: 'child-not-started', leaseKeys: ['r'] },
    ],
    [
      'a finished lease whose child has not started (AT_TIMESTAMP)',
      finished,
      [lease('l', { checkpoint: 'AT_TIMESTAMP' }), lease('r', { checkpoint: '3' })],
      { deletable: false, reason: 'child-not-started', leaseKeys: ['l'] },
    ],
    [
      'a finished lease whose own parent lease remains',
      lease('p', { checkpoint: 'SHARD_END', children: ['l'], parents: ['gp'] }),
      [lease('l', { checkpoint: '3' }), lease('gp', { checkpoint: 'SHARD_END' })],
      { deletable: false, reason: 'parent-lease-present', leaseKeys: ['gp'] },
    ],
    [
      'a finished lease whose children started',
      finished,
      [lease('l', { checkpoint: '3' }), lease('r', { checkpoint: 'SHARD_END' })],
      { deletable: true },
    ],
    [
      'a finished lease whose children are at LATEST (counts as started)',
      finished,
      [lease('l', { checkpoint: 'LATEST' }), lease('r', { checkpoint: '1' })],
      { deletable: true },
    ],
  ])('%s', (_name, candidate, others, expected) => {
    expect(checkLeaseDeletable(candidate, leaseLookupOf([candidate, ...others]))).toEqual(expected);
  });

  it('uses child ids from the service when none are recorded', () => {
    const bare = lease('p', { checkpoint: 'SHARD_END' });
    const lookup = leaseLookupOf([lease('c', { checkpoint: '9' })]);
    expect(checkLeaseDeletable(bare, lookup, { childShardIds: ['c'] })).toEqual({ deletable: true });
    expect(checkLeaseDeletable(bare, lookup, { childShardIds: ['c', 'd'] })).toMatchObject({
      reason: 'child-lease-missing',
    });
  });

  it('looks children and parents up under the multi-stream prefix', () => {
    const stream = '1:s:9';
    const parent = lease(`${stream}:p`, { checkpoint: 'SHARD_END', children: ['c'], parents: ['g'] });
    expect(
      checkLeaseDeletable(parent, leaseLookupOf([lease(`${stream}:c`, { checkpoint: '2' }), lease('g')])),
    ).toEqual({ deletable: true });
  });

  it('orders sentinels for "started" as the Java KCL does', () => {
    expect(hasLeaseStarted(lease('x', { checkpoint: 'AT_TIMESTAMP' }))).toBe(false);
    expect(hasLeaseStarted(lease('x', { checkpoint: 'TRIM_HORIZON' }))).toBe(false);
    expect(hasLeaseStarted(lease('x', { checkpoint: 'LATEST' }))).toBe(true);
    expect(hasLeaseStarted(lease('x', { checkpoint: '0' }))).toBe(true);
    expect(hasLeaseStarted(lease('x', { checkpoint: 'SHARD_END' }))).toBe(true);
  });
});

describe('findDeletableLeases', () => {
  it('deletes from the oldest generation down', () => {
    const leases = [
      lease('g', { checkpoint: 'SHARD_END', children: ['p'] }),
      lease('p', { checkpoint: 'SHARD_END', children: ['c'], parents: ['g'] }),
      lease('c', { checkpoint: '10', parents: ['p'] }),
    ];
    expect(findDeletableLeases(leases).map((l) => l.leaseKey)).toEqual(['g']);
    expect(findDeletableLeases(leases.slice(1)).map((l) => l.leaseKey)).toEqual(['p']);
  });
});
