import { describe, expect, it } from 'vitest';
import { describeWorkerEvent } from './event-text.js';

describe('describeWorkerEvent', () => {
  it('tells a steal from a take after an expiry or release', () => {
    expect(
      describeWorkerEvent({
        type: 'lease-taken',
        workerId: 'w2',
        leaseKey: 'shardId-000000000003',
        stolen: true,
        previousOwner: 'w1',
      }),
    ).toEqual({ kind: 'lease', text: 'w2 stole shard-3 from w1 to even out the fleet' });
    expect(
      describeWorkerEvent({
        type: 'lease-taken',
        workerId: 'w2',
        leaseKey: 'shardId-000000000003',
        previousOwner: 'w1',
      }),
    ).toEqual({ kind: 'lease', text: 'w2 took shard-3 (lease of w1 expired or released)' });
    expect(
      describeWorkerEvent({
        type: 'lease-taken',
        workerId: 'w2',
        leaseKey: 'shardId-000000000003',
        previousOwner: null,
      }),
    ).toEqual({ kind: 'lease', text: 'w2 took shard-3' });
  });

  it('says why a lease was lost and which children a shard end created', () => {
    expect(
      describeWorkerEvent({
        type: 'lease-lost',
        workerId: 'w1',
        leaseKey: 'shardId-000000000000',
        reason: 'expired',
      }),
    ).toEqual({ kind: 'lease', text: 'w1 lost shard-0 (not renewed in time)' });
    expect(
      describeWorkerEvent({
        type: 'leases-created',
        workerId: 'w1',
        cause: 'shard-end',
        leaseKeys: ['shardId-000000000004', 'shardId-000000000005'],
      }),
    ).toEqual({ kind: 'shard', text: 'w1 created leases for the children shard-4, shard-5' });
  });

  it('names the stream beside the shard when lease keys carry one', () => {
    expect(
      describeWorkerEvent({
        type: 'lease-taken',
        workerId: 'w2',
        leaseKey: '000000000000:kcl-demo-2:1700000000:shardId-000000000003',
        previousOwner: null,
      }),
    ).toEqual({ kind: 'lease', text: 'w2 took demo-2/shard-3' });
    expect(
      describeWorkerEvent({
        type: 'shard-ended',
        workerId: 'w1',
        leaseKey: '000000000000:kcl-demo-1:1700000000:shardId-000000000000',
        childShardIds: ['shardId-000000000004', 'shardId-000000000005'],
      }),
    ).toEqual({ kind: 'shard', text: 'w1 processed demo-1/shard-0 to its end (children shard-4, shard-5)' });
    expect(
      describeWorkerEvent({
        type: 'leases-created',
        workerId: 'w1',
        cause: 'initial',
        leaseKeys: [
          '000000000000:kcl-demo-1:1700000000:shardId-000000000000',
          '000000000000:kcl-demo-2:1700000001:shardId-000000000000',
        ],
      }),
    ).toEqual({ kind: 'shard', text: 'w1 created the initial leases demo-1/shard-0, demo-2/shard-0' });
  });

  it('shows failures as problems and leaves the frequent events out', () => {
    expect(
      describeWorkerEvent({
        type: 'store-error',
        workerId: 'w1',
        operation: 'leases.renewMany',
        error: 'timeout',
      }),
    ).toEqual({ kind: 'problem', text: 'w1: lease store error in leases.renewMany: timeout' });
    expect(
      describeWorkerEvent({ type: 'checkpoint-written', workerId: 'w1', leaseKey: 'shardId-000000000000' }),
    ).toBeNull();
  });
});
