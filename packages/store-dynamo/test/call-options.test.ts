import { createServer } from 'node:net';
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { LeaseStore, StoreCallOptions } from '@kcl/core';
import { ExtendedSequenceNumber, guardLeaseStore, LeaseStoreError, StoreCallAbortedError } from '@kcl/core';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { createDynamoLeaseStore } from '../src/index.js';
import { clientFor, startLocalDynamo } from './local-dynamo.js';

const dynamo = await startLocalDynamo();
afterAll(() => dynamo.stop());

/** Every call of the contract, each with the given options. */
function everyCall(store: LeaseStore, options: StoreCallOptions): Array<[string, () => Promise<unknown>]> {
  const leaseKey = 'shardId-000000000001';
  return [
    ['admin.ensureSchema', () => store.admin.ensureSchema(options)],
    [
      'leases.create',
      () => store.leases.create({ leaseKey, checkpoint: ExtendedSequenceNumber.LATEST }, options),
    ],
    ['leases.get', () => store.leases.get(leaseKey, options)],
    ['leases.list', () => store.leases.list(options)],
    ['leases.take', () => store.leases.take(leaseKey, 0, 'worker-a', options)],
    ['leases.renew', () => store.leases.renew(leaseKey, 1, options)],
    ['leases.renewMany', () => store.leases.renewMany([{ leaseKey, leaseCounter: 2 }], options)],
    [
      'leases.checkpoint',
      () => store.leases.checkpoint(leaseKey, 3, { checkpoint: ExtendedSequenceNumber.of('5') }, options),
    ],
    [
      'leases.requestHandoff',
      () =>
        store.leases.requestHandoff(
          leaseKey,
          4,
          { from: 'worker-a', to: 'worker-b', deadline: null },
          options,
        ),
    ],
    ['leases.completeHandoff', () => store.leases.completeHandoff(leaseKey, 4, options)],
    ['leases.updateMeta', () => store.leases.updateMeta(leaseKey, { childShardIds: ['shardId-2'] }, options)],
    // A lost race, so the store's consistent read of the item is made too.
    ['leases.release', () => store.leases.release(leaseKey, 99, options)],
    ['leases.delete', () => store.leases.delete(leaseKey, options)],
    ['workers.heartbeat', () => store.workers.heartbeat('worker-a', { host: 'h' }, options)],
    ['workers.list', () => store.workers.list(options)],
    ['workers.remove', () => store.workers.remove('worker-a', options)],
    [
      'admin.setMigrationMarker',
      () => store.admin.setMigrationMarker({ migratedTo: 'elsewhere', migratedAt: new Date(0) }, options),
    ],
    ['admin.getMigrationMarker', () => store.admin.getMigrationMarker(options)],
    ['admin.scan', () => store.admin.scan(options)],
  ];
}

/** Records, per command name, whether each request went out with `signal` as its abort signal. */
function recordSignals(client: DynamoDBClient, signal: AbortSignal): Array<[string, boolean]> {
  const sent: Array<[string, boolean]> = [];
  const send = client.send.bind(client) as (command: unknown, options?: unknown) => Promise<unknown>;
  const spy = (command: { constructor: { name: string } }, options?: { abortSignal?: unknown }) => {
    sent.push([command.constructor.name, options?.abortSignal === signal]);
    return send(command, options);
  };
  Object.assign(client, { send: spy });
  return sent;
}

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error('expected the call to reject');
}

describe.skipIf(!dynamo.check.available)('call options', () => {
  it('every call hands the caller’s signal to every DynamoDB request it makes', async () => {
    const client = dynamo.client();
    const controller = new AbortController();
    const sent = recordSignals(client, controller.signal);
    for (const layout of ['java', 'shared'] as const) {
      const store = createDynamoLeaseStore({
        client,
        applicationName: `signal-${layout}`,
        layout,
        tableName: `signal-${layout}`,
        schemaPollIntervalMs: 10,
      });
      for (const [name, call] of everyCall(store, { signal: controller.signal })) {
        const before = sent.length;
        await call();
        const requests = sent.slice(before);
        expect(requests.length, `${layout}: ${name} sends requests`).toBeGreaterThan(0);
        expect(
          requests.filter(([, withSignal]) => !withSignal),
          `${layout}: ${name} requests without the signal`,
        ).toEqual([]);
      }
    }
  });

  it('an abort cancels the request in flight and rejects with the abort, not as a DynamoDB failure', async () => {
    // An endpoint that accepts the connection and never answers: only the abort can end the call.
    const controller = new AbortController();
    const server = createServer(() => controller.abort(new Error('the worker is stopping')));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const address = server.address();
    if (address === null || typeof address === 'string') throw new Error('no port');
    const client = clientFor(`http://127.0.0.1:${address.port}`, { maxAttempts: 1 });
    try {
      const store = createDynamoLeaseStore({ client, applicationName: 'silent-app' });
      const error = await rejection(store.leases.renew('shardId-1', 0, { signal: controller.signal }));
      expect(StoreCallAbortedError.is(error)).toBe(true);
      expect([(error as StoreCallAbortedError).code, (error as StoreCallAbortedError).retryable]).toEqual([
        'LEASE_STORE_CALL_ABORTED',
        true,
      ]);
      expect((error as Error).message).toContain(
        'UpdateItem (renew lease "shardId-1") on table "silent-app"',
      );
      expect((error as Error).message).toContain('the worker is stopping');

      // A kcl error as the reason is what the call rejects with, as core's guard does.
      const reason = new LeaseStoreError('test', 'test: stopped on purpose');
      const aborted = new AbortController();
      aborted.abort(reason);
      expect(await rejection(store.leases.list({ signal: aborted.signal }))).toBe(reason);
    } finally {
      client.destroy();
      server.close();
    }
  });

  it('core’s guard takes the store as a v2 store, and its calls reach DynamoDB', async () => {
    const store = createDynamoLeaseStore({
      client: dynamo.client(),
      applicationName: 'guarded-app',
      schemaPollIntervalMs: 10,
    });
    const guarded = guardLeaseStore(store, 'test');
    await guarded.admin.ensureSchema();
    const created = await guarded.leases.create({
      leaseKey: 'shardId-1',
      checkpoint: ExtendedSequenceNumber.LATEST,
    });
    expect(created.ok).toBe(true);
    expect((await guarded.admin.scan()).leases.map((lease) => lease.leaseKey)).toEqual(['shardId-1']);
    await guarded.close();
  });

  it('close() leaves the injected client to its owner, and can be called again', async () => {
    const client = dynamo.client();
    const destroy = vi.spyOn(client, 'destroy');
    const store = createDynamoLeaseStore({
      client,
      applicationName: 'closing-app',
      schemaPollIntervalMs: 10,
    });
    await store.admin.ensureSchema();
    await store.close();
    await store.close();
    expect(destroy).not.toHaveBeenCalled();
    const other = createDynamoLeaseStore({
      client,
      applicationName: 'closing-app',
      schemaPollIntervalMs: 10,
    });
    expect(await other.leases.list()).toEqual([]);
  });
});
