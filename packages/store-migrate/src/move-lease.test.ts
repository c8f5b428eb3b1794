import type { Lease } from '@kcl/core';
import { ExtendedSequenceNumber, hashKeyRange, leaseFromInit } from '@kcl/core';
import { describe, expect, it } from 'vitest';
import { REPAIR_OWNER, SEAL_OWNER } from './migration-phase.js';
import { judgeTargetRow } from './move-lease.js';

const lease = (overrides: Partial<Lease>): Lease => ({
  ...leaseFromInit({ leaseKey: 'shard-1', checkpoint: ExtendedSequenceNumber.of('100'), owner: 'worker-1' }),
  leaseCounter: 10,
  childShardIds: ['shard-2'],
  ...overrides,
});
const migrating = new Set(['worker-1', 'worker-2']);

describe('judgeTargetRow', () => {
  const source = lease({});
  it.each<[string, Lease | null, string]>([
    ['absent', null, 'missing'],
    ['an exact copy', lease({}), 'exact'],
    ['a copy a renewal behind', lease({ leaseCounter: 9 }), 'behind'],
    [
      'a copy behind a take by another migrating worker',
      lease({ leaseCounter: 9, owner: 'worker-2' }),
      'behind',
    ],
    ['a copy behind a release', lease({ leaseCounter: 9, owner: null }), 'behind'],
    [
      'a copy behind a checkpoint',
      lease({ leaseCounter: 9, checkpoint: ExtendedSequenceNumber.of('50') }),
      'behind',
    ],
    ['a copy that lost a meta update', lease({ childShardIds: [] }), 'behind'],
    ['a repair lock', lease({ leaseCounter: 12, owner: REPAIR_OWNER }), 'behind'],
    ['a seal from a migration the other way', lease({ leaseCounter: 30, owner: SEAL_OWNER }), 'behind'],
    ['a row ahead of the source', lease({ leaseCounter: 11 }), 'taken-seal'],
    ['a row at the same counter with another owner', lease({ owner: 'worker-2' }), 'taken-seal'],
    [
      'a row checkpointed further',
      lease({ leaseCounter: 9, checkpoint: ExtendedSequenceNumber.of('500') }),
      'taken-seal',
    ],
  ])('%s is %s', (_, target, kind) => {
    expect(judgeTargetRow(source, target, migrating).kind).toBe(kind);
  });

  it('judges a copy by its stream identifier and hand-off too', () => {
    const handing = lease({
      streamIdentifier: '123456789012:orders:1700000000',
      handoff: { from: 'worker-1', to: 'worker-2', deadline: null },
    });
    expect(judgeTargetRow(handing, handing, migrating).kind).toBe('exact');
    expect(judgeTargetRow(handing, { ...handing, leaseCounter: 9, handoff: null }, migrating).kind).toBe(
      'behind',
    );
    expect(judgeTargetRow(handing, { ...handing, streamIdentifier: null }, migrating).kind).toBe(
      'taken-seal',
    );
    // A hand-off request leaves the counter alone: a copy that lost its mirror is at the same counter.
    expect(judgeTargetRow(handing, { ...handing, handoff: null }, migrating).kind).toBe('behind');
    expect(judgeTargetRow(lease({}), { ...handing, streamIdentifier: null }, migrating).kind).toBe(
      'taken-seal',
    );
  });

  it('sees a source row held by a worker without the migrating store as a taken seal', () => {
    const taken = lease({ leaseCounter: 12, owner: 'java-worker-1' });
    expect(judgeTargetRow(taken, lease({ leaseCounter: 11 }), migrating)).toMatchObject({
      kind: 'taken-seal',
      reason: expect.stringContaining('java-worker-1'),
    });
    const ranged = lease({ hashKeyRange: hashKeyRange('0', '10') });
    expect(judgeTargetRow(ranged, lease({ hashKeyRange: null }), migrating).kind).toBe('behind');
  });
});
