import { describe, expect, it } from 'vitest';
import { ConfigurationError, isKclError, KclError, LeaseStoreError } from './errors.js';
import { ExtendedSequenceNumber } from './extended-sequence-number.js';
import {
  guardLeaseStore,
  interceptLeaseStore,
  LEASE_STORE_OPERATIONS,
  SESSION_LIVENESS_OPERATIONS,
  StoreCallAbortedError,
} from './guard-lease-store.js';
import type { LeaseStore, WorkerRegistry, WorkerSession } from './lease-store.js';

/** A store whose every call answers with `answer(operation, args)`. */
function fakeStore(answer: (operation: string, args: unknown[]) => Promise<unknown>): LeaseStore {
  const role = (name: string, methods: string[]) =>
    Object.fromEntries(
      methods.map((method) => [method, (...args: unknown[]) => answer(`${name}.${method}`, args)]),
    );
  return {
    specificationVersion: 'v2',
    applicationName: 'app',
    capabilities: { batchRenew: false, consistentReads: true, sessionLiveness: false },
    description: 'fake store',
    leases: role('leases', [
      'list',
      'get',
      'create',
      'renew',
      'renewMany',
      'take',
      'release',
      'requestHandoff',
      'completeHandoff',
      'checkpoint',
      'updateMeta',
      'delete',
    ]),
    workers: role('workers', ['heartbeat', 'list', 'remove']),
    admin: role('admin', ['ensureSchema', 'getMigrationMarker', 'setMigrationMarker', 'scan']),
    close: async () => {},
  } as unknown as LeaseStore;
}

describe('guardLeaseStore', () => {
  it('refuses a store of another contract version, saying what to do', () => {
    const old = { ...fakeStore(async () => null), specificationVersion: 'v1' } as unknown as LeaseStore;
    expect(() => guardLeaseStore(old, '@kcl/test')).toThrow(ConfigurationError);
    expect(() => guardLeaseStore(old, '@kcl/test')).toThrow(/needs v2/);
    const partial = { ...fakeStore(async () => null), workers: {} } as unknown as LeaseStore;
    expect(() => guardLeaseStore(partial, '@kcl/test')).toThrow(
      /workers\.heartbeat, workers\.list, workers\.remove/,
    );
  });

  it('turns a rejection that is not a kcl error into a LeaseStoreError naming the call', async () => {
    const store = guardLeaseStore(
      fakeStore(async () => {
        throw new TypeError('socket closed');
      }),
      '@kcl/test',
    );
    const error = await store.leases.take('a', 1, 'w').catch((caught: unknown) => caught);
    expect(LeaseStoreError.is(error)).toBe(true);
    expect((error as Error).message).toBe(
      '@kcl/test: leases.take on fake store failed: TypeError: socket closed',
    );
    expect((error as Error).cause).toBeInstanceOf(TypeError);
    const own = new LeaseStoreError('fake', 'throttled', { retryable: true, code: 'LEASE_STORE_THROTTLED' });
    const passthrough = guardLeaseStore(
      fakeStore(async () => {
        throw own;
      }),
      '@kcl/test',
    );
    await expect(passthrough.leases.list()).rejects.toBe(own);
  });

  it('rejects a call at once when its signal aborts, even if the store never answers', async () => {
    const store = guardLeaseStore(
      fakeStore(() => new Promise(() => {})),
      '@kcl/test',
    );
    const controller = new AbortController();
    const call = store.leases.checkpoint(
      'a',
      1,
      { checkpoint: ExtendedSequenceNumber.of('5') },
      { signal: controller.signal },
    );
    controller.abort();
    const error = await call.catch((caught: unknown) => caught);
    expect(StoreCallAbortedError.is(error)).toBe(true);
    expect(isKclError(error, 'LEASE_STORE_CALL_ABORTED')).toBe(true);
    await expect(store.leases.list({ signal: AbortSignal.abort() })).rejects.toSatisfy(KclError.is);
  });

  it('passes arguments and options through unchanged, and wraps only once', async () => {
    const seen: Array<[string, unknown[]]> = [];
    const inner = fakeStore(async (operation, args) => {
      seen.push([operation, args]);
      return null;
    });
    const store = guardLeaseStore(inner, '@kcl/test');
    expect(guardLeaseStore(store, '@kcl/test')).toBe(store);
    const signal = new AbortController().signal;
    await store.leases.renew('a', 3, { signal });
    await store.workers.heartbeat('w');
    expect(seen).toEqual([
      ['leases.renew', ['a', 3, { signal }]],
      ['workers.heartbeat', ['w', undefined]],
    ]);
  });
});

/** `fakeStore` with session liveness: sessions whose calls answer through `answer` too. */
function fakeSessionStore(answer: (operation: string, args: unknown[]) => Promise<unknown>): LeaseStore {
  const store = fakeStore(answer);
  const workers: WorkerRegistry = {
    ...store.workers,
    attachSession: async (...args: unknown[]) => {
      await answer('workers.attachSession', args);
      const session: WorkerSession = {
        workerId: args[0] as string,
        check: (...checkArgs: unknown[]) => answer('session.check', checkArgs) as Promise<boolean>,
        close: (...closeArgs: unknown[]) => answer('session.close', closeArgs) as Promise<void>,
      };
      return session;
    },
    liveSessions: (...args: unknown[]) =>
      answer('workers.liveSessions', args) as Promise<ReadonlySet<string>>,
  };
  return { ...store, capabilities: { ...store.capabilities, sessionLiveness: true }, workers };
}

describe('session liveness through the wrappers', () => {
  it('sends attachSession, liveSessions and the calls of an attached session through the interceptor', async () => {
    const seen: Array<[string, unknown[]]> = [];
    const intercepted: string[] = [];
    const store = interceptLeaseStore(
      fakeSessionStore(async (operation, args) => {
        seen.push([operation, args]);
        return operation === 'workers.liveSessions' ? new Set(['w']) : true;
      }),
      (operation, options, call) => {
        intercepted.push(operation);
        return call(options);
      },
    );
    expect(store.capabilities.sessionLiveness).toBe(true);
    const signal = new AbortController().signal;
    const session = await store.workers.attachSession?.('w', { signal });
    expect(session?.workerId).toBe('w');
    expect(await session?.check()).toBe(true);
    await session?.close();
    expect(await store.workers.liveSessions?.(['w', 'x'])).toEqual(new Set(['w']));
    expect(intercepted).toEqual([
      'workers.attachSession',
      'session.check',
      'session.close',
      'workers.liveSessions',
    ]);
    expect([...intercepted].sort()).toEqual([...SESSION_LIVENESS_OPERATIONS].sort());
    expect(seen).toEqual([
      ['workers.attachSession', ['w', { signal }]],
      ['session.check', []],
      ['session.close', []],
      ['workers.liveSessions', [['w', 'x']]],
    ]);
  });

  it('leaves the session calls out, and the capability false, for a store without them', () => {
    const plain = interceptLeaseStore(
      fakeStore(async () => null),
      (_operation, options, call) => call(options),
    );
    expect(plain.capabilities.sessionLiveness).toBe(false);
    expect(plain.workers.attachSession).toBeUndefined();
    expect(plain.workers.liveSessions).toBeUndefined();
    // A store of an older core declares no such capability at all.
    const older = fakeStore(async () => null);
    const { sessionLiveness: _, ...capabilities } = older.capabilities;
    const wrapped = interceptLeaseStore(
      { ...older, capabilities } as unknown as LeaseStore,
      (_operation, options, call) => call(options),
    );
    expect(wrapped.capabilities).toEqual({
      batchRenew: false,
      consistentReads: true,
      sessionLiveness: false,
      transactionalCheckpoint: false,
    });
    expect(
      guardLeaseStore({ ...older, capabilities } as unknown as LeaseStore, '@kcl/test').capabilities
        .sessionLiveness,
    ).toBe(false);
  });

  it('passes a transactional checkpoint through, and declares it absent on a store without the call', async () => {
    const calls: string[] = [];
    const store = fakeStore(async () => null);
    const work = async () => ({ update: { checkpoint: ExtendedSequenceNumber.of('1') }, value: 1 });
    const transactional: LeaseStore = {
      ...store,
      capabilities: { ...store.capabilities, transactionalCheckpoint: true },
      leases: {
        ...store.leases,
        checkpointInTransaction: async (leaseKey, leaseCounter, given) => {
          calls.push(`${leaseKey}@${leaseCounter}`);
          const { value } = await given(null);
          return { ok: false, reason: value === 1 ? 'counter-mismatch' : 'not-found' };
        },
      },
    };
    const seen: string[] = [];
    const wrapped = interceptLeaseStore(transactional, (operation, options, call) => {
      seen.push(operation);
      return call(options);
    });
    expect(wrapped.capabilities.transactionalCheckpoint).toBe(true);
    expect(await wrapped.leases.checkpointInTransaction?.('shard-1', 4, work)).toEqual({
      ok: false,
      reason: 'counter-mismatch',
    });
    expect(calls).toEqual(['shard-1@4']);
    expect(seen).toEqual(['leases.checkpointInTransaction']);
    const guarded = guardLeaseStore(transactional, '@kcl/test');
    expect(guarded.capabilities.transactionalCheckpoint).toBe(true);
    expect(typeof guarded.leases.checkpointInTransaction).toBe('function');

    const plain = interceptLeaseStore(store, (_operation, options, call) => call(options));
    expect(plain.capabilities.transactionalCheckpoint).toBe(false);
    expect(plain.leases.checkpointInTransaction).toBeUndefined();
    expect(() =>
      guardLeaseStore(
        { ...store, capabilities: { ...store.capabilities, transactionalCheckpoint: true } },
        '@kcl/test',
      ),
    ).toThrow(/declares capabilities\.transactionalCheckpoint but lacks leases\.checkpointInTransaction/);
  });

  it('refuses a store that declares the capability without the calls', () => {
    const claiming = {
      ...fakeStore(async () => null),
      capabilities: { batchRenew: false, consistentReads: true, sessionLiveness: true },
    };
    expect(() => guardLeaseStore(claiming, '@kcl/test')).toThrow(
      /declares capabilities\.sessionLiveness but lacks workers\.attachSession/,
    );
  });

  it('guards the calls of a session: native errors become LeaseStoreErrors naming the call', async () => {
    const store = guardLeaseStore(
      fakeSessionStore(async (operation) => {
        if (operation === 'session.check') throw new TypeError('socket closed');
        return null;
      }),
      '@kcl/test',
    );
    const session = await store.workers.attachSession?.('w');
    const error = await session?.check().catch((caught: unknown) => caught);
    expect(LeaseStoreError.is(error)).toBe(true);
    expect((error as Error).message).toBe(
      '@kcl/test: session.check on fake store failed: TypeError: socket closed',
    );
  });
});

describe('interceptLeaseStore', () => {
  it('sees every call of the contract, by name', async () => {
    const calls: string[] = [];
    const store = interceptLeaseStore(
      fakeStore(async () => null),
      (operation, options, call) => {
        calls.push(operation);
        return call(options);
      },
    );
    for (const operation of LEASE_STORE_OPERATIONS) {
      const [role, method] = operation.split('.') as [string, string];
      await (store as unknown as Record<string, Record<string, () => Promise<unknown>>>)[role]?.[method]?.();
    }
    expect(calls).toEqual([...LEASE_STORE_OPERATIONS]);
  });
});

describe('error identity', () => {
  it('holds by marker and class name, not by instanceof', () => {
    const error = new LeaseStoreError('s', 'm', { code: 'LEASE_STORE_THROTTLED', retryable: true });
    expect(KclError.is(error)).toBe(true);
    expect(LeaseStoreError.is(error)).toBe(true);
    expect(ConfigurationError.is(error)).toBe(false);
    expect(isKclError(error, 'LEASE_STORE_THROTTLED')).toBe(true);
    expect(isKclError(error, 'CONFIGURATION')).toBe(false);
    expect(isKclError(new Error('plain'))).toBe(false);
    // An error from another copy of @kcl/core: same class names and marker, different constructors.
    class LeaseStoreErrorCopy extends Error {}
    Object.defineProperty(LeaseStoreErrorCopy, 'name', { value: 'LeaseStoreError' });
    const foreign = Object.assign(new LeaseStoreErrorCopy('from another copy'), {
      code: 'LEASE_STORE_FAILURE',
      retryable: false,
    });
    Object.defineProperty(foreign, Symbol.for('@kcl/error'), { value: true });
    expect(foreign instanceof LeaseStoreError).toBe(false);
    expect(LeaseStoreError.is(foreign)).toBe(true);
    expect(isKclError(foreign, 'LEASE_STORE_FAILURE')).toBe(true);
  });
});
