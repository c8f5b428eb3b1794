import { ProvisionedThroughputExceededException, PutItemCommand } from '@aws-sdk/client-dynamodb';
import type { Lease, LeaseStore, LogFields, Logger } from '@kcl/core';
import {
  ExtendedSequenceNumber,
  LeaseDataError,
  LeaseStoreError,
  LeaseStoreSchemaMissingError,
  noopLogger,
} from '@kcl/core';
import { freePort, javaLeaseItem, startDynalite } from '@kcl/testkit';
import { afterAll, describe, expect, it } from 'vitest';
import { createDynamoLeaseStore } from '../src/index.js';
import { failCommands, failCommandsWhere } from './command-counter.js';
import { clientFor, startLocalDynamo } from './local-dynamo.js';

const dynamo = await startLocalDynamo();

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error('expected the call to reject');
}

/** Every kind of call, so no path escapes the error mapping. */
function throttled(): Error {
  return new ProvisionedThroughputExceededException({
    message: 'The level of configured provisioned throughput for the table was exceeded.',
    $metadata: { httpStatusCode: 400 },
  });
}

/** The lease key an UpdateItem or GetItem of the Java layout is addressed to. */
function leaseKeyOf(input: Record<string, unknown>): string | undefined {
  return (input.Key as { leaseKey?: { S?: string } } | undefined)?.leaseKey?.S;
}

function everyCall(store: LeaseStore): Array<[string, () => Promise<unknown>]> {
  return [
    ['admin.ensureSchema', () => store.admin.ensureSchema()],
    ['leases.get', () => store.leases.get('shardId-1')],
    ['leases.list', () => store.leases.list()],
    [
      'leases.create',
      () => store.leases.create({ leaseKey: 'shardId-1', checkpoint: ExtendedSequenceNumber.LATEST }),
    ],
    ['leases.renew', () => store.leases.renew('shardId-1', 0)],
    ['leases.take', () => store.leases.take('shardId-1', 0, 'w')],
    ['leases.release', () => store.leases.release('shardId-1', 0)],
    [
      'leases.requestHandoff',
      () => store.leases.requestHandoff('shardId-1', 0, { from: 'w', to: 'v', deadline: null }),
    ],
    ['leases.completeHandoff', () => store.leases.completeHandoff('shardId-1', 0)],
    [
      'leases.checkpoint',
      () => store.leases.checkpoint('shardId-1', 0, { checkpoint: ExtendedSequenceNumber.of('1') }),
    ],
    ['leases.updateMeta', () => store.leases.updateMeta('shardId-1', { childShardIds: ['shardId-2'] })],
    ['leases.delete', () => store.leases.delete('shardId-1')],
    ['workers.heartbeat', () => store.workers.heartbeat('w')],
    ['workers.list', () => store.workers.list()],
    ['workers.remove', () => store.workers.remove('w')],
    ['admin.getMigrationMarker', () => store.admin.getMigrationMarker()],
    [
      'admin.setMigrationMarker',
      () => store.admin.setMigrationMarker({ migratedTo: 'elsewhere', migratedAt: new Date(0) }),
    ],
    ['admin.scan', () => store.admin.scan()],
  ];
}

afterAll(() => dynamo.stop());

describe('an unreachable DynamoDB', () => {
  it('on an unused port, every call rejects with a retryable LeaseStoreError', async () => {
    const client = clientFor(`http://127.0.0.1:${await freePort()}`, { maxAttempts: 1 });
    const store = createDynamoLeaseStore({ client, applicationName: 'nowhere-app' });
    for (const [name, call] of everyCall(store)) {
      const error = await rejection(call());
      expect(error, name).toBeInstanceOf(LeaseStoreError);
      expect((error as LeaseStoreError).retryable, name).toBe(true);
      expect((error as LeaseStoreError).code, name).toBe('LEASE_STORE_UNAVAILABLE');
      expect((error as Error).message, name).toMatch(/^@kcl\/store-dynamo: .* could not be reached/);
    }
    client.destroy();
  });

  it('when the emulator stops under a working store, calls reject as retryable and nothing crashes', async () => {
    const emulator = await startDynalite({ createTableMs: 5 });
    const client = clientFor(emulator.endpoint, { maxAttempts: 2 });
    const store = createDynamoLeaseStore({
      client,
      applicationName: 'stopping-app',
      schemaPollIntervalMs: 10,
    });
    await store.admin.ensureSchema();
    const created = await store.leases.create({
      leaseKey: 'shardId-1',
      checkpoint: ExtendedSequenceNumber.LATEST,
    });
    expect(created.ok).toBe(true);
    await emulator.stop();
    for (const [name, call] of everyCall(store)) {
      const error = await rejection(call());
      expect([(error as LeaseStoreError).code, (error as LeaseStoreError).retryable], name).toEqual([
        'LEASE_STORE_UNAVAILABLE',
        true,
      ]);
    }
    client.destroy();
  });
});

describe.skipIf(!dynamo.check.available)('store faults against dynalite', () => {
  it('a missing lease table gives a schema error that says how to create it', async () => {
    const store = createDynamoLeaseStore({
      client: dynamo.client(),
      applicationName: 'never-created',
      schemaPollIntervalMs: 10,
    });
    const error = await rejection(store.leases.get('shardId-1'));
    expect(error).toBeInstanceOf(LeaseStoreSchemaMissingError);
    expect((error as LeaseStoreSchemaMissingError).retryable).toBe(false);
    expect((error as Error).message).toContain('the lease table "never-created" does not exist');
    expect((error as Error).message).toContain('await store.admin.ensureSchema()');
    expect((error as Error).message).toContain(
      'aws dynamodb create-table --table-name never-created --attribute-definitions AttributeName=leaseKey,AttributeType=S --key-schema AttributeName=leaseKey,KeyType=HASH --billing-mode PAY_PER_REQUEST',
    );
    for (const call of [
      () => store.leases.list(),
      () => store.leases.renew('shardId-1', 0),
      () => store.leases.take('shardId-1', 0, 'w'),
      () => store.leases.create({ leaseKey: 'shardId-1', checkpoint: ExtendedSequenceNumber.LATEST }),
    ]) {
      expect(await rejection(call())).toBeInstanceOf(LeaseStoreSchemaMissingError);
    }
    const workerError = await rejection(store.workers.heartbeat('w'));
    expect(workerError).toBeInstanceOf(LeaseStoreSchemaMissingError);
    expect((workerError as Error).message).toContain('the worker registry table "never-created-kcl-workers"');
    await store.admin.ensureSchema();
    expect(await store.leases.get('shardId-1')).toBeNull();
  });

  it('one unreadable row: leases.list skips it with a warning naming it, admin.scan reports it, leases.get of it rejects', async () => {
    const client = dynamo.client();
    const warnings: Array<[string, LogFields | undefined]> = [];
    const logger: Logger = { ...noopLogger, warn: (message, fields) => warnings.push([message, fields]) };
    // One item per page, so the unreadable row sits on a page of its own between healthy ones.
    const store = createDynamoLeaseStore({
      client,
      applicationName: 'garbage-app',
      schemaPollIntervalMs: 10,
      pageSize: 1,
      logger,
    });
    await store.admin.ensureSchema();
    for (const leaseKey of ['shardId-000000000000', 'shardId-000000000002']) {
      await store.leases.create({ leaseKey, checkpoint: ExtendedSequenceNumber.LATEST });
    }
    await client.send(
      new PutItemCommand({
        TableName: 'garbage-app',
        // The Java attributes, but a checkpoint no reader can parse.
        Item: javaLeaseItem({
          leaseKey: 'shardId-000000000001',
          leaseCounter: 3,
          checkpoint: 'garbage',
          ownerSwitchesSinceCheckpoint: null,
        }),
      }),
    );

    // The fleet keeps working on every other lease, as the Java KCL does: it skips the row and logs.
    const listed = await store.leases.list();
    expect(listed.map((lease) => lease.leaseKey)).toEqual(['shardId-000000000000', 'shardId-000000000002']);
    expect(warnings).toEqual([
      [
        expect.stringMatching(
          /^@kcl\/store-dynamo: skipped lease "shardId-000000000001", which cannot be read: checkpoint "garbage" .*fix the item or delete it/,
        ),
        {
          table: 'garbage-app',
          leaseKey: 'shardId-000000000001',
          problem: expect.stringContaining('checkpoint "garbage"'),
        },
      ],
    ]);
    const [free] = listed;
    expect(
      free !== undefined && (await store.leases.take(free.leaseKey, free.leaseCounter, 'worker-1')).ok,
    ).toBe(true);

    // Operators see the row in the store's scan.
    const scan = await store.admin.scan();
    expect(scan.leases.map((lease) => lease.leaseKey)).toEqual([
      'shardId-000000000000',
      'shardId-000000000002',
    ]);
    expect(scan.unreadable).toEqual([
      { leaseKey: 'shardId-000000000001', problem: expect.stringContaining('checkpoint "garbage"') },
    ]);
    expect(warnings.at(-1)?.[0]).toContain('store.admin.scan() lists every such row');

    // Asked for by key, the row is an error that names it: the caller wanted that lease, not others.
    const single = await rejection(store.leases.get('shardId-000000000001'));
    expect(single).toBeInstanceOf(LeaseDataError);
    expect((single as LeaseDataError).leaseKey).toBe('shardId-000000000001');
    expect((single as LeaseDataError).retryable).toBe(false);
    expect((single as Error).message).toMatch(
      /^@kcl\/store-dynamo: lease "shardId-000000000001" cannot be read: checkpoint "garbage" is neither a decimal sequence number/,
    );
    expect((await store.leases.get('shardId-000000000000'))?.owner).toBe('worker-1');
  });

  it('throttling on the way to DynamoDB is a retryable error, and a lost race is still a value', async () => {
    const client = dynamo.client();
    const store = createDynamoLeaseStore({
      client,
      applicationName: 'throttled-app',
      schemaPollIntervalMs: 10,
    });
    await store.admin.ensureSchema();
    const lease = await store.leases.create({
      leaseKey: 'shardId-1',
      checkpoint: ExtendedSequenceNumber.LATEST,
    });
    failCommands(client, ['UpdateItemCommand'], () =>
      Object.assign(
        new ProvisionedThroughputExceededException({
          message: 'The level of configured provisioned throughput for the table was exceeded.',
          $metadata: { httpStatusCode: 400 },
        }),
      ),
    );
    const error = await rejection(store.leases.renew('shardId-1', lease.ok ? lease.lease.leaseCounter : 0));
    expect(error).toBeInstanceOf(LeaseStoreError);
    expect([(error as LeaseStoreError).code, (error as LeaseStoreError).retryable]).toEqual([
      'LEASE_STORE_THROTTLED',
      true,
    ]);
    expect(
      await store.leases.create({ leaseKey: 'shardId-1', checkpoint: ExtendedSequenceNumber.LATEST }),
    ).toEqual({
      ok: false,
      reason: 'already-exists',
    });
  });

  it('leases.renewMany: one throttled UpdateItem fails only its own lease, the others renew and say so', async () => {
    const client = dynamo.client();
    const store = createDynamoLeaseStore({
      client,
      applicationName: 'throttled-batch-app',
      schemaPollIntervalMs: 10,
    });
    await store.admin.ensureSchema();
    const held: Lease[] = [];
    for (const leaseKey of ['shardId-0', 'shardId-1', 'shardId-2']) {
      const created = await store.leases.create({
        leaseKey,
        checkpoint: ExtendedSequenceNumber.LATEST,
      });
      const taken = created.ok
        ? await store.leases.take(leaseKey, created.lease.leaseCounter, 'worker-1')
        : null;
      if (taken === null || !taken.ok) throw new Error(`could not hold ${leaseKey}`);
      held.push(taken.lease);
    }
    failCommandsWhere(
      client,
      (name, input) => name === 'UpdateItemCommand' && leaseKeyOf(input) === 'shardId-1',
      throttled,
    );
    const results = await store.leases.renewMany(
      held.map(({ leaseKey, leaseCounter }) => ({ leaseKey, leaseCounter })),
    );
    expect(results).toHaveLength(3);
    const [first, second, third] = results;
    expect(first).toMatchObject({ ok: true, lease: { leaseKey: 'shardId-0', leaseCounter: 2 } });
    expect(third).toMatchObject({ ok: true, lease: { leaseKey: 'shardId-2', leaseCounter: 2 } });
    expect(second).toMatchObject({ ok: false, reason: 'failed' });
    const error = second !== undefined && !second.ok && second.reason === 'failed' ? second.error : null;
    expect(error).toBeInstanceOf(LeaseStoreError);
    expect([(error as LeaseStoreError).code, (error as LeaseStoreError).retryable]).toEqual([
      'LEASE_STORE_THROTTLED',
      true,
    ]);
    expect((error as Error).message).toContain('renew lease "shardId-1"');
    // What is stored agrees: the two renewals applied, the throttled one did not.
    expect((await store.leases.list()).map((lease) => lease.leaseCounter)).toEqual([2, 1, 2]);
  });
});
