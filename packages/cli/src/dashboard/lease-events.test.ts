import { describe, expect, it } from 'vitest';
import type { ApplicationStatus, ShardStatus, WorkerStatus } from '../status/application-status.js';
import { diffLeaseEvents } from './lease-events.js';

function shard(
  leaseKey: string,
  owner: string | null,
  state: ShardStatus['state'],
  extra: Partial<ShardStatus> = {},
): ShardStatus {
  return {
    leaseKey,
    shardId: leaseKey,
    streamIdentifier: null,
    state,
    owner,
    leaseCounter: 1,
    checkpoint: '1',
    millisBehindLatest: null,
    recordsPerSecond: null,
    bytesPerSecond: null,
    lastCheckpointAt: null,
    parentLeaseKeys: [],
    childLeaseKeys: [],
    handoff: null,
    ...extra,
  };
}

function worker(workerId: string, alive: boolean): WorkerStatus {
  return {
    workerId,
    lastHeartbeatAt: '2026-01-01T00:00:00.000Z',
    heartbeatAgeMs: 0,
    heartbeat: 1,
    alive,
    expiryMs: 45_001,
    startedAt: null,
    leases: [],
    recordsPerSecond: 0,
    bytesPerSecond: 0,
    figuresOmitted: 0,
    publishesLeaseFigures: true,
  };
}

function status(shards: ShardStatus[], workers: WorkerStatus[]): ApplicationStatus {
  return {
    applicationName: 'a',
    store: 's',
    readAt: '2026-01-01T00:00:01.000Z',
    shards,
    workers,
    unregisteredOwners: [],
    problems: [],
  };
}

describe('diffLeaseEvents', () => {
  it('names each change between two reads', () => {
    const before = status(
      [
        shard('free', null, 'unowned'),
        shard('steal', 'a', 'owned'),
        shard('handoff', 'a', 'handing-off', { handoff: { from: 'a', to: 'b' } }),
        shard('crash', 'c', 'owned'),
        shard('after-crash', 'd', 'expired'),
        shard('release', 'a', 'owned'),
        shard('end', 'a', 'owned'),
        shard('cleanup', null, 'finished'),
      ],
      [worker('a', true), worker('b', true), worker('c', true), worker('d', false)],
    );
    const after = status(
      [
        shard('free', 'b', 'owned'),
        shard('steal', 'b', 'owned'),
        shard('handoff', 'b', 'owned'),
        shard('crash', 'c', 'expired'),
        shard('after-crash', 'b', 'owned'),
        shard('release', null, 'unowned'),
        shard('end', 'a', 'finished'),
        shard('child', null, 'unowned'),
      ],
      [worker('a', true), worker('b', true), worker('c', false)],
    );
    expect(
      diffLeaseEvents(before, after).map((event) => [event.kind, event.leaseKey, event.from, event.to]),
    ).toEqual([
      ['taken', 'free', null, 'b'],
      ['stolen', 'steal', 'a', 'b'],
      ['handed-off', 'handoff', 'a', 'b'],
      ['expired', 'crash', 'c', null],
      ['taken', 'after-crash', 'd', 'b'],
      ['released', 'release', 'a', null],
      ['ended', 'end', 'a', null],
      ['created', 'child', null, null],
      ['deleted', 'cleanup', null, null],
    ]);
  });
});
