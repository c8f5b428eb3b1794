import { ExtendedSequenceNumber, hashKeyRange, leaseFromInit, MAX_HASH_KEY } from '@kcl/core';
import { describe, expect, it } from 'vitest';
import type { DynamoItem } from './dynamo-item-codec.js';
import { decodeLeaseRow, encodeLeaseItem, multiStreamParts } from './dynamo-item-codec.js';

const LONG = '49590338271490256608559692538361571095921575989136588898';

function decodedLease(item: DynamoItem) {
  const row = decodeLeaseRow(item);
  if (row.kind !== 'lease') throw new Error(`expected a lease, got ${JSON.stringify(row)}`);
  return row.lease;
}

describe('decodeLeaseRow', () => {
  it('reads a Java KCL 2.x row (no entityType) with every attribute', () => {
    const lease = decodedLease({
      leaseKey: { S: 'shardId-000000000004' },
      leaseOwner: { S: 'java-worker' },
      leaseCounter: { N: '1523' },
      checkpoint: { S: LONG },
      checkpointSubSequenceNumber: { N: '3' },
      pendingCheckpoint: { S: `${LONG.slice(0, -1)}9` },
      pendingCheckpointSubSequenceNumber: { N: '1' },
      ownerSwitchesSinceCheckpoint: { N: '2' },
      parentShardId: { SS: ['shardId-000000000002', 'shardId-000000000001'] },
      childShardIds: { SS: ['shardId-000000000009'] },
      startingHashKey: { S: '0' },
      endingHashKey: { S: MAX_HASH_KEY.toString() },
    });
    expect(lease).toMatchObject({
      leaseKey: 'shardId-000000000004',
      owner: 'java-worker',
      leaseCounter: 1523,
      ownerSwitchesSinceCheckpoint: 2,
      parentShardIds: ['shardId-000000000001', 'shardId-000000000002'],
      childShardIds: ['shardId-000000000009'],
      hashKeyRange: { startingHashKey: 0n, endingHashKey: MAX_HASH_KEY },
    });
    expect(lease.checkpoint.toString()).toBe(`${LONG}/3`);
    expect(lease.pendingCheckpoint?.toString()).toBe(`${LONG.slice(0, -1)}9/1`);
  });

  it('gives old rows without optional attributes the defaults', () => {
    const lease = decodedLease({
      leaseKey: { S: 'shardId-000000000000' },
      leaseCounter: { N: '7' },
      checkpoint: { S: 'TRIM_HORIZON' },
    });
    expect(lease).toMatchObject({
      owner: null,
      leaseCounter: 7,
      pendingCheckpoint: null,
      ownerSwitchesSinceCheckpoint: 0,
      parentShardIds: [],
      childShardIds: [],
      hashKeyRange: null,
    });
    expect(lease.checkpoint).toBe(ExtendedSequenceNumber.TRIM_HORIZON);
  });

  it('treats an empty pending checkpoint or half a hash range as absent, as the Java reader does', () => {
    const lease = decodedLease({
      leaseKey: { S: 'k' },
      leaseCounter: { N: '1' },
      checkpoint: { S: '5' },
      pendingCheckpoint: { S: '' },
      startingHashKey: { S: '10' },
    });
    expect([lease.pendingCheckpoint, lease.hashKeyRange]).toEqual([null, null]);
  });

  it('reads rows marked entityType LEASE and skips every other entity type', () => {
    expect(
      decodeLeaseRow({
        leaseKey: { S: 'k' },
        leaseCounter: { N: '1' },
        checkpoint: { S: 'LATEST' },
        entityType: { S: 'LEASE' },
      }).kind,
    ).toBe('lease');
    for (const entityType of [
      'WORKER_METRIC_STATS',
      'LEADER',
      'CLIENT_VERSION_MIGRATION',
      'TABLE_MIGRATION',
      'STREAM',
    ]) {
      expect(decodeLeaseRow({ leaseKey: { S: 'Leader' }, entityType: { S: entityType } })).toEqual({
        kind: 'other',
        entityType,
        leaseKey: 'Leader',
      });
    }
  });

  it.each([
    ['a checkpoint that is not a position', { checkpoint: { S: 'garbage' } }, /checkpoint "garbage"/],
    ['a missing checkpoint', { checkpoint: undefined }, /checkpoint \(S\) is missing/],
    ['a missing counter', { leaseCounter: undefined }, /leaseCounter \(N\) is missing/],
    [
      'a counter of the wrong type',
      { leaseCounter: { S: '5' } },
      /leaseCounter must be a number \(N\), found S/,
    ],
    ['a fractional counter', { leaseCounter: { N: '1.5' } }, /leaseCounter "1.5"/],
    [
      'a negative sub-sequence number',
      { checkpointSubSequenceNumber: { N: '-1' } },
      /checkpointSubSequenceNumber/,
    ],
    ['an owner that is a number', { leaseOwner: { N: '3' } }, /leaseOwner must be a string/],
    ['parents as a number set', { parentShardId: { NS: ['1'] } }, /parentShardId must be a string set/],
    [
      'a hash key that is not decimal',
      { startingHashKey: { S: '0x10' }, endingHashKey: { S: '20' } },
      /startingHashKey/,
    ],
    [
      'a hash range ending before it starts',
      { startingHashKey: { S: '30' }, endingHashKey: { S: '20' } },
      /after its end/,
    ],
  ])('reports %s as invalid, naming the key', (_name, change, problem) => {
    const item: Record<string, unknown> = {
      leaseKey: { S: 'shardId-7' },
      leaseCounter: { N: '1' },
      checkpoint: { S: '100' },
      ...change,
    };
    for (const [name, value] of Object.entries(item)) if (value === undefined) delete item[name];
    const row = decodeLeaseRow(item as DynamoItem);
    expect(row.kind).toBe('invalid');
    if (row.kind !== 'invalid') return;
    expect(row.leaseKey).toBe('shardId-7');
    expect(row.problem).toMatch(problem);
  });

  it('tolerates a sentinel written with a sub-sequence number', () => {
    const lease = decodedLease({
      leaseKey: { S: 'k' },
      leaseCounter: { N: '1' },
      checkpoint: { S: 'SHARD_END' },
      checkpointSubSequenceNumber: { N: '4' },
    });
    expect(lease.checkpoint).toBe(ExtendedSequenceNumber.SHARD_END);
  });
});

describe('encodeLeaseItem', () => {
  it('writes a new lease with exactly the Java attributes, no empty values', () => {
    const item = encodeLeaseItem(
      leaseFromInit({ leaseKey: 'shardId-000000000001', checkpoint: ExtendedSequenceNumber.TRIM_HORIZON }),
    );
    expect(item).toEqual({
      leaseKey: { S: 'shardId-000000000001' },
      leaseCounter: { N: '0' },
      checkpoint: { S: 'TRIM_HORIZON' },
      checkpointSubSequenceNumber: { N: '0' },
      ownerSwitchesSinceCheckpoint: { N: '0' },
      entityType: { S: 'LEASE' },
    });
  });

  it('writes every field with Java names and types, and round-trips', () => {
    const lease = leaseFromInit({
      leaseKey: 'shardId-000000000003',
      owner: 'w',
      leaseCounter: 9,
      checkpoint: ExtendedSequenceNumber.of(LONG, 2),
      pendingCheckpoint: ExtendedSequenceNumber.of('77', 1),
      ownerSwitchesSinceCheckpoint: 4,
      parentShardIds: ['shardId-000000000002', 'shardId-000000000001', ''],
      childShardIds: ['shardId-000000000005'],
      hashKeyRange: hashKeyRange(5n, MAX_HASH_KEY),
    });
    const item = encodeLeaseItem(lease);
    expect(item).toEqual({
      leaseKey: { S: 'shardId-000000000003' },
      leaseOwner: { S: 'w' },
      leaseCounter: { N: '9' },
      checkpoint: { S: LONG },
      checkpointSubSequenceNumber: { N: '2' },
      pendingCheckpoint: { S: '77' },
      pendingCheckpointSubSequenceNumber: { N: '1' },
      ownerSwitchesSinceCheckpoint: { N: '4' },
      parentShardId: { SS: ['shardId-000000000001', 'shardId-000000000002'] },
      childShardIds: { SS: ['shardId-000000000005'] },
      startingHashKey: { S: '5' },
      endingHashKey: { S: MAX_HASH_KEY.toString() },
      entityType: { S: 'LEASE' },
    });
    const decoded = decodedLease(item);
    expect(decoded.checkpoint.toString()).toBe(`${LONG}/2`);
    expect(decoded.parentShardIds).toEqual(['shardId-000000000001', 'shardId-000000000002']);
  });

  it('writes streamName and shardId for a lease with a stream identifier, as the Java multi-stream serializer does', () => {
    const item = encodeLeaseItem(
      leaseFromInit({
        leaseKey: '123456789012:orders:1600000000:shardId-000000000007',
        checkpoint: ExtendedSequenceNumber.LATEST,
        streamIdentifier: '123456789012:orders:1600000000',
      }),
      { applicationName: { S: 'app' } },
    );
    expect(item.streamName).toEqual({ S: '123456789012:orders:1600000000' });
    expect(item.shardId).toEqual({ S: 'shardId-000000000007' });
    expect(item.applicationName).toEqual({ S: 'app' });
    expect(decodedLease(item).streamIdentifier).toBe('123456789012:orders:1600000000');
  });

  it('writes no stream attributes for a lease without a stream identifier, whatever its key looks like', () => {
    const item = encodeLeaseItem(
      leaseFromInit({
        leaseKey: '123456789012:orders:1600000000:shardId-000000000007',
        checkpoint: ExtendedSequenceNumber.LATEST,
      }),
    );
    expect(['streamName' in item, 'shardId' in item]).toEqual([false, false]);
    expect(decodedLease(item).streamIdentifier).toBeNull();
  });

  it('takes the shard id from the end of a key that does not start with the stream identifier', () => {
    const item = encodeLeaseItem(
      leaseFromInit({
        leaseKey: 'other:shardId-1',
        checkpoint: ExtendedSequenceNumber.LATEST,
        streamIdentifier: 's',
      }),
    );
    expect([item.streamName, item.shardId]).toEqual([{ S: 's' }, { S: 'shardId-1' }]);
  });

  it('writes a hand-off as the Java KCL does (leaseOwner the next owner, checkpointOwner the current one) and reads it back', () => {
    const deadline = new Date('2030-01-02T03:04:05.678Z');
    const lease = leaseFromInit({
      leaseKey: 'shardId-1',
      checkpoint: ExtendedSequenceNumber.LATEST,
      owner: 'worker-a',
      handoff: { from: 'worker-a', to: 'worker-b', deadline },
    });
    const item = encodeLeaseItem(lease);
    expect([item.leaseOwner, item.checkpointOwner, item.handoffDeadline]).toEqual([
      { S: 'worker-b' },
      { S: 'worker-a' },
      {
        M: { epochMillis: { N: String(deadline.getTime()) }, from: { S: 'worker-a' }, to: { S: 'worker-b' } },
      },
    ]);
    const decoded = decodedLease(item);
    expect(decoded.owner).toBe('worker-a');
    expect(decoded.handoff).toEqual({ from: 'worker-a', to: 'worker-b', deadline });
  });

  it('writes no deadline attribute for a hand-off without one', () => {
    const item = encodeLeaseItem(
      leaseFromInit({
        leaseKey: 'shardId-1',
        checkpoint: ExtendedSequenceNumber.LATEST,
        owner: 'worker-a',
        handoff: { from: 'worker-a', to: 'worker-b', deadline: null },
      }),
    );
    expect('handoffDeadline' in item).toBe(false);
    expect(decodedLease(item).handoff).toEqual({ from: 'worker-a', to: 'worker-b', deadline: null });
  });
});

describe('decodeLeaseRow: hand-offs and streams written by the Java KCL', () => {
  const base: DynamoItem = {
    leaseKey: { S: 'shardId-6' },
    leaseCounter: { N: '40' },
    checkpoint: { S: 'LATEST' },
    entityType: { S: 'LEASE' },
  };

  it('reads a KCL 3.x hand-off: the owner is the checkpointOwner (Lease.actualOwner), with no deadline', () => {
    const lease = decodedLease({ ...base, leaseOwner: { S: 'java-b' }, checkpointOwner: { S: 'java-a' } });
    expect([lease.owner, lease.handoff]).toEqual([
      'java-a',
      { from: 'java-a', to: 'java-b', deadline: null },
    ]);
  });

  it('reads a checkpointOwner without a leaseOwner as that owner, with no hand-off', () => {
    const lease = decodedLease({ ...base, checkpointOwner: { S: 'java-a' } });
    expect([lease.owner, lease.handoff]).toEqual(['java-a', null]);
  });

  it('ignores a deadline left behind by an earlier hand-off between other workers', () => {
    const lease = decodedLease({
      ...base,
      leaseOwner: { S: 'java-c' },
      checkpointOwner: { S: 'java-a' },
      handoffDeadline: { M: { epochMillis: { N: '1000' }, from: { S: 'java-a' }, to: { S: 'java-b' } } },
    });
    expect(lease.handoff).toEqual({ from: 'java-a', to: 'java-c', deadline: null });
  });

  it('ignores a deadline when no hand-off is recorded', () => {
    const lease = decodedLease({
      ...base,
      leaseOwner: { S: 'java-b' },
      handoffDeadline: { M: { epochMillis: { N: '1000' }, from: { S: 'java-a' }, to: { S: 'java-b' } } },
    });
    expect([lease.owner, lease.handoff]).toEqual(['java-b', null]);
  });

  it.each([
    ['a number', { N: '1000' }],
    ['a map without epochMillis', { M: { from: { S: 'a' }, to: { S: 'b' } } }],
    ['a fractional epochMillis', { M: { epochMillis: { N: '1.5' }, from: { S: 'a' }, to: { S: 'b' } } }],
    [
      'an epochMillis past the last date',
      { M: { epochMillis: { N: '9007199254740991' }, from: { S: 'a' }, to: { S: 'b' } } },
    ],
  ])('reports a handoffDeadline that is %s as invalid', (_name, value) => {
    const row = decodeLeaseRow({
      ...base,
      leaseOwner: { S: 'b' },
      checkpointOwner: { S: 'a' },
      handoffDeadline: value,
    });
    expect(row).toMatchObject({
      kind: 'invalid',
      leaseKey: 'shardId-6',
      problem: expect.stringContaining('handoffDeadline'),
    });
  });

  it('reads the stream identifier of a multi-stream row from streamName', () => {
    const lease = decodedLease({
      ...base,
      leaseKey: { S: '123456789012:orders:1600000000:shardId-7' },
      streamName: { S: '123456789012:orders:1600000000' },
      shardId: { S: 'shardId-7' },
    });
    expect(lease.streamIdentifier).toBe('123456789012:orders:1600000000');
    expect(decodedLease(base).streamIdentifier).toBeNull();
  });
});

describe('multiStreamParts', () => {
  it.each([
    [
      '123456789012:orders:1600000000:shardId-000000000007',
      '123456789012:orders:1600000000',
      'shardId-000000000007',
    ],
    ['1:a-b.c:2:shardId-1', '1:a-b.c:2', 'shardId-1'],
  ])('splits %s', (leaseKey, streamIdentifier, shardId) => {
    expect(multiStreamParts(leaseKey)).toEqual({ streamIdentifier, shardId });
  });

  it.each([
    ['shardId-000000000001'],
    ['a:shardId-1'],
    ['acct:orders:1600000000:shardId-1'],
    ['1:orders:x:shardId-1'],
  ])('leaves %s alone', (leaseKey) => {
    expect(multiStreamParts(leaseKey)).toBeNull();
  });
});
