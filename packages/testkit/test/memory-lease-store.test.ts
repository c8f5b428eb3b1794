import { ExtendedSequenceNumber } from '@kcl/core';
import { describe, expect, it } from 'vitest';
import { createMemoryLeaseStore, MemoryLeaseTable } from '../src/index.js';

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

  it('has no sessions unless asked for them', () => {
    const store = createMemoryLeaseStore({ applicationName: 'a' });
    expect(store.capabilities.sessionLiveness).toBe(false);
    expect(store.workers.attachSession).toBeUndefined();
    expect(store.workers.liveSessions).toBeUndefined();
    expect(() => createMemoryLeaseStore({ applicationName: 'a', sessions: 'yes' as never })).toThrow(
      /sessions must be a boolean/,
    );
  });

  it('simulates sessions: dropping one ends it for every store on the table, and the worker attaches again', async () => {
    const table = new MemoryLeaseTable();
    const mine = createMemoryLeaseStore({ applicationName: 'a', table, sessions: true });
    const theirs = createMemoryLeaseStore({ applicationName: 'a', table, sessions: true });
    const session = await mine.workers.attachSession?.('w');
    expect(await theirs.workers.liveSessions?.(['w', 'v'])).toEqual(new Set(['w']));
    await expect(theirs.workers.attachSession?.('w')).rejects.toMatchObject({
      code: 'WORKER_SESSION_HELD',
      retryable: true,
    });
    expect(mine.dropWorkerSession('w')).toBe(true);
    expect(mine.dropWorkerSession('w')).toBe(false);
    expect(await session?.check()).toBe(false);
    expect(await theirs.workers.liveSessions?.(['w'])).toEqual(new Set());
    const again = await theirs.workers.attachSession?.('w');
    // The dropped session's close() must not end the new one.
    await session?.close();
    expect(await again?.check()).toBe(true);
    expect(await mine.workers.liveSessions?.(['w'])).toEqual(new Set(['w']));
  });

  it('attaches nothing when the signal aborted first', async () => {
    const store = createMemoryLeaseStore({ applicationName: 'a', sessions: true });
    await expect(store.workers.attachSession?.('w', { signal: AbortSignal.abort() })).rejects.toThrow();
    expect(await store.workers.liveSessions?.(['w'])).toEqual(new Set());
  });
});
