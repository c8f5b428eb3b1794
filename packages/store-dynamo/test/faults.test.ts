import { ProvisionedThroughputExceededException, PutItemCommand } from '@aws-sdk/client-dynamodb';
import type { Lease, LeaseStore, LogFields, Logger } from '@kcl/core';
import {
  ExtendedSequenceNumber,
  LeaseDataError,
  LeaseStoreError,
  LeaseStoreSchemaMissingError,
  noopLogger,
} from '@kcl/core';
import { freePort, startDynalite } from '@kcl/testkit';
import { afterAll, describe, expect, it } from 'vitest';
import { createDynamoLeaseStore, summarizeDynamoLeaseTable } from '../src/index.js';
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
    ['ensureSchema', () => store.ensureSchema()],
    ['getLease', () => store.getLease('shardId-1')],
    ['listLeases', () => store.listLeases()],
    [
      'createLeaseIfAbsent',
      () => store.createLeaseIfAbsent({ leaseKey: 'shardId-1', checkpoint: ExtendedSequenceNumber.LATEST }),
    ],
    ['renewLease', () => store.renewLease('shardId-1', 0)],
    ['takeLease', () => store.takeLease('shardId-1', 0, 'w')],
    [
      'updateCheckpoint',
      () => store.updateCheckpoint('shardId-1', 0, { checkpoint: ExtendedSequenceNumber.of('1') }),
    ],
    ['deleteLease', () => store.deleteLease('shardId-1')],
    ['heartbeatWorker', () => store.heartbeatWorker('w')],
    ['listWorkers', () => store.listWorkers()],
    ['getMigrationMarker', () => store.getMigrationMarker()],
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
    await store.ensureSchema();
    const created = await store.createLeaseIfAbsent({
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
    const error = await rejection(store.getLease('shardId-1'));
    expect(error).toBeInstanceOf(LeaseStoreSchemaMissingError);
    expect((error as LeaseStoreSchemaMissingError).retryable).toBe(false);
    expect((error as Error).message).toContain('the lease table "never-created" does not exist');
    expect((error as Error).message).toContain('await store.ensureSchema()');
    expect((error as Error).message).toContain(
      'aws dynamodb create-table --table-name never-created --attribute-definitions AttributeName=leaseKey,AttributeType=S --key-schema AttributeName=leaseKey,KeyType=HASH --billing-mode PAY_PER_REQUEST',
    );
    for (const call of [
      () => store.listLeases(),
      () => store.renewLease('shardId-1', 0),
      () => store.takeLease('shardId-1', 0, 'w'),
      () => store.createLeaseIfAbsent({ leaseKey: 'shardId-1', checkpoint: ExtendedSequenceNumber.LATEST }),
    ]) {
      expect(await rejection(call())).toBeInstanceOf(LeaseStoreSchemaMissingError);
    }
    const workerError = await rejection(store.heartbeatWorker('w'));
    expect(workerError).toBeInstanceOf(LeaseStoreSchemaMissingError);
    expect((workerError as Error).message).toContain('the worker registry table "never-created-kcl-workers"');
    await store.ensureSchema();
    expect(await store.getLease('shardId-1')).toBeNull();
  });

  it('one unreadable row: listLeases skips it with a warning naming it, scanSummary lists it, getLease of it rejects', async () => {
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
    await store.ensureSchema();
    for (const leaseKey of ['shardId-000000000000', 'shardId-000000000002']) {
      await store.createLeaseIfAbsent({ leaseKey, checkpoint: ExtendedSequenceNumber.LATEST });
    }
    await client.send(
      new PutItemCommand({
        TableName: 'garbage-app',
        Item: {
          leaseKey: { S: 'shardId-000000000001' },
          leaseCounter: { N: '3' },
          checkpoint: { S: 'garbage' },
          checkpointSubSequenceNumber: { N: '0' },
        },
      }),
    );

    // The fleet keeps working on every other lease, as the Java KCL does: it skips the row and logs.
    const listed = await store.listLeases();
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
      free !== undefined && (await store.takeLease(free.leaseKey, free.leaseCounter, 'worker-1')).ok,
    ).toBe(true);

    // Operators see the row in the store's scan summary (and summarizeDynamoLeaseTable).
    const summary = await store.scanSummary();
    expect(summary.leases.map((lease) => lease.leaseKey)).toEqual([
      'shardId-000000000000',
      'shardId-000000000002',
    ]);
    expect(summary.invalidRows).toEqual([
      { leaseKey: 'shardId-000000000001', problem: expect.stringContaining('checkpoint "garbage"') },
    ]);
    expect((await summarizeDynamoLeaseTable({ client, applicationName: 'garbage-app' })).invalidRows).toEqual(
      summary.invalidRows,
    );
    // A strict reader can still ask for the old behaviour.
    const strict = await rejection(store.scanSummary({ invalidRows: 'throw' }));
    expect(strict).toBeInstanceOf(LeaseDataError);
    expect((strict as LeaseDataError).leaseKey).toBe('shardId-000000000001');

    // Asked for by key, the row is an error that names it: the caller wanted that lease, not others.
    const single = await rejection(store.getLease('shardId-000000000001'));
    expect(single).toBeInstanceOf(LeaseDataError);
    expect((single as LeaseDataError).leaseKey).toBe('shardId-000000000001');
    expect((single as LeaseDataError).retryable).toBe(false);
    expect((single as Error).message).toMatch(
      /^@kcl\/store-dynamo: lease "shardId-000000000001" cannot be read: checkpoint "garbage" is neither a decimal sequence number/,
    );
    expect((await store.getLease('shardId-000000000000'))?.owner).toBe('worker-1');
  });

  it('throttling on the way to DynamoDB is a retryable error, and a lost race is still a value', async () => {
    const client = dynamo.client();
    const store = createDynamoLeaseStore({
      client,
      applicationName: 'throttled-app',
      schemaPollIntervalMs: 10,
    });
    await store.ensureSchema();
    const lease = await store.createLeaseIfAbsent({
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
    const error = await rejection(store.renewLease('shardId-1', lease.ok ? lease.lease.leaseCounter : 0));
    expect(error).toBeInstanceOf(LeaseStoreError);
    expect([(error as LeaseStoreError).code, (error as LeaseStoreError).retryable]).toEqual([
      'LEASE_STORE_THROTTLED',
      true,
    ]);
    expect(
      await store.createLeaseIfAbsent({ leaseKey: 'shardId-1', checkpoint: ExtendedSequenceNumber.LATEST }),
    ).toEqual({
      ok: false,
      reason: 'already-exists',
    });
  });

  it('renewLeases: one throttled UpdateItem fails only its own lease, the others renew and say so', async () => {
    const client = dynamo.client();
    const store = createDynamoLeaseStore({
      client,
      applicationName: 'throttled-batch-app',
      schemaPollIntervalMs: 10,
    });
    await store.ensureSchema();
    const held: Lease[] = [];
    for (const leaseKey of ['shardId-0', 'shardId-1', 'shardId-2']) {
      const created = await store.createLeaseIfAbsent({
        leaseKey,
        checkpoint: ExtendedSequenceNumber.LATEST,
      });
      const taken = created.ok
        ? await store.takeLease(leaseKey, created.lease.leaseCounter, 'worker-1')
        : null;
      if (taken === null || !taken.ok) throw new Error(`could not hold ${leaseKey}`);
      held.push(taken.lease);
    }
    failCommandsWhere(
      client,
      (name, input) => name === 'UpdateItemCommand' && leaseKeyOf(input) === 'shardId-1',
      throttled,
    );
    const results = await store.renewLeases(
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
    expect((await store.listLeases()).map((lease) => lease.leaseCounter)).toEqual([2, 1, 2]);
  });
});
