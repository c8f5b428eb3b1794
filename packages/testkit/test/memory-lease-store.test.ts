import { ExtendedSequenceNumber } from '@kcl/core';
import { describe, expect, it } from 'vitest';
import { createMemoryLeaseStore } from '../src/index.js';

describe('createMemoryLeaseStore', () => {
  it('rejects an empty application name, naming the option', () => {
    expect(() => createMemoryLeaseStore({ applicationName: '' })).toThrow(
      /applicationName must be a non-empty string/,
    );
  });

  it('stamps heartbeats with the injected wall clock', async () => {
    const store = createMemoryLeaseStore({ applicationName: 'a', now: () => 5_000 });
    const worker = await store.workers.heartbeat('w');
    expect(worker.lastHeartbeatAt.getTime()).toBe(5_000);
  });

  it('returns frozen leases, so callers cannot change stored state by accident', async () => {
    const store = createMemoryLeaseStore({ applicationName: 'a' });
    const result = await store.leases.create({
      leaseKey: 's',
      checkpoint: ExtendedSequenceNumber.TRIM_HORIZON,
      parentShardIds: ['p'],
    });
    expect(result.ok).toBe(true);
    if (!result.ok) return;
    expect(Object.isFrozen(result.lease)).toBe(true);
    expect(() => (result.lease.parentShardIds as string[]).push('x')).toThrow(TypeError);
    expect((await store.leases.get('s'))?.parentShardIds).toEqual(['p']);
  });
});
