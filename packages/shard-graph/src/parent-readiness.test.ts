import type { Lease } from '@kcl/core';
import { describe, expect, it } from 'vitest';
import { lease } from '../test/fixtures.js';
import { leaseLookupOf } from './lease-key.js';
import { checkParentReadiness } from './parent-readiness.js';

describe('checkParentReadiness', () => {
  it.each<[string, Lease, Lease[], string[]]>([
    ['a shard without parents', lease('c'), [], []],
    [
      'a split child whose parent finished',
      lease('c', { parents: ['p'] }),
      [lease('p', { checkpoint: 'SHARD_END' })],
      [],
    ],
    [
      'a split child whose parent is still read',
      lease('c', { parents: ['p'] }),
      [lease('p', { checkpoint: '42' })],
      ['p'],
    ],
    ['a child whose parent lease is gone', lease('c', { parents: ['p'] }), [], []],
    [
      'a merge child with both parents finished',
      lease('m', { parents: ['a', 'b'] }),
      [lease('a', { checkpoint: 'SHARD_END' }), lease('b', { checkpoint: 'SHARD_END' })],
      [],
    ],
    [
      'a merge child with one parent still read',
      lease('m', { parents: ['a', 'b'] }),
      [lease('a', { checkpoint: 'SHARD_END' }), lease('b', { checkpoint: 'TRIM_HORIZON' })],
      ['b'],
    ],
    [
      'a merge child with neither parent finished',
      lease('m', { parents: ['a', 'b'] }),
      [lease('a', { checkpoint: 'LATEST' }), lease('b', { checkpoint: '7' })],
      ['a', 'b'],
    ],
    [
      'a merge child with one parent gone, the other finished',
      lease('m', { parents: ['a', 'b'] }),
      [lease('b', { checkpoint: 'SHARD_END' })],
      [],
    ],
    [
      'a multi-stream child, looking up parents under its own stream',
      lease('1:s:9:c', { parents: ['p'] }),
      [lease('1:s:9:p', { checkpoint: '5' }), lease('p', { checkpoint: 'SHARD_END' })],
      ['1:s:9:p'],
    ],
  ])('%s', (_name, child, present, waitingFor) => {
    const readiness = checkParentReadiness(child, leaseLookupOf(present));
    expect(readiness).toEqual(waitingFor.length === 0 ? { ready: true } : { ready: false, waitingFor });
  });

  it('accepts a lookup that answers null for absent leases', () => {
    expect(checkParentReadiness(lease('c', { parents: ['p'] }), () => null)).toEqual({ ready: true });
  });
});
