import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { LeaseStore } from '@kcl/core';
import { ExtendedSequenceNumber } from '@kcl/core';
import { afterAll, describe, expect, it } from 'vitest';
import { createDynamoLeaseStore } from '../src/index.js';
import { startLocalDynamo } from './local-dynamo.js';

const dynamo = await startLocalDynamo();
afterAll(() => dynamo.stop());

/** Records the `ConsistentRead` flag of every read command the client sends. */
function recordReads(client: DynamoDBClient): Array<[string, unknown]> {
  const reads: Array<[string, unknown]> = [];
  client.middlewareStack.add(
    (next, context) => async (args) => {
      const input = args.input as { ConsistentRead?: unknown };
      if (/^(GetItem|Scan|Query)Command$/.test(String(context.commandName))) {
        reads.push([String(context.commandName), input.ConsistentRead]);
      }
      return next(args);
    },
    { step: 'initialize', name: 'kclReadRecorder' },
  );
  return reads;
}

async function seed(store: LeaseStore, count: number): Promise<void> {
  await store.admin.ensureSchema();
  for (let index = 0; index < count; index++) {
    const created = await store.leases.create({
      leaseKey: `shardId-${index}`,
      checkpoint: ExtendedSequenceNumber.LATEST,
    });
    if (!created.ok) throw new Error('seed failed');
  }
}

describe.skipIf(!dynamo.check.available)('store options', () => {
  it('reads strongly consistently by default and says so in its capabilities', async () => {
    const client = dynamo.client();
    const store = createDynamoLeaseStore({
      client,
      applicationName: 'consistent-app',
      schemaPollIntervalMs: 10,
    });
    await seed(store, 1);
    const reads = recordReads(client);
    await store.leases.get('shardId-0');
    await store.leases.list();
    await store.workers.list();
    expect(store.capabilities).toEqual({ batchRenew: false, consistentReads: true, sessionLiveness: false });
    expect(reads).toEqual([
      ['GetItemCommand', true],
      ['ScanCommand', true],
      ['QueryCommand', true],
    ]);
  });

  it('reads eventually consistently when asked, but still resolves lost races with a consistent read', async () => {
    const client = dynamo.client();
    const store = createDynamoLeaseStore({
      client,
      applicationName: 'eventual-app',
      consistentReads: false,
      schemaPollIntervalMs: 10,
    });
    await seed(store, 1);
    const reads = recordReads(client);
    await store.leases.get('shardId-0');
    await store.leases.list();
    expect(await store.leases.renew('shardId-0', 99)).toEqual({ ok: false, reason: 'counter-mismatch' });
    expect(store.capabilities.consistentReads).toBe(false);
    expect(reads).toEqual([
      ['GetItemCommand', false],
      ['ScanCommand', false],
      ['GetItemCommand', true],
    ]);
  });

  it('renews many leases with at most renewConcurrency calls in flight, results in order', async () => {
    const client = dynamo.client();
    const store = createDynamoLeaseStore({
      client,
      applicationName: 'bounded-app',
      renewConcurrency: 3,
      schemaPollIntervalMs: 10,
    });
    await seed(store, 12);
    let inFlight = 0;
    let most = 0;
    client.middlewareStack.add(
      (next, context) => async (args) => {
        if (context.commandName !== 'UpdateItemCommand') return next(args);
        inFlight += 1;
        most = Math.max(most, inFlight);
        try {
          return await next(args);
        } finally {
          inFlight -= 1;
        }
      },
      { step: 'initialize', name: 'kclInFlight' },
    );
    const renewals = Array.from({ length: 12 }, (_, index) => ({
      leaseKey: `shardId-${11 - index}`,
      leaseCounter: index === 4 ? 7 : 0,
    }));
    const results = await store.leases.renewMany(renewals);
    expect(most).toBe(3);
    expect(results.map((result) => (result.ok ? result.lease.leaseKey : result.reason))).toEqual(
      renewals.map((renewal, index) => (index === 4 ? 'counter-mismatch' : renewal.leaseKey)),
    );
  });

  it('describes its tables without secrets', () => {
    const store = createDynamoLeaseStore({
      client: dynamo.client(),
      applicationName: 'billing',
      tableName: 'kcl-leases',
      layout: 'shared',
    });
    expect(store.description).toBe(
      'DynamoDB table "kcl-leases" (shared layout, worker registry "kcl-leases-kcl-workers"), application "billing"',
    );
    expect([store.layout, store.tableName, store.workerTableName]).toEqual([
      'shared',
      'kcl-leases',
      'kcl-leases-kcl-workers',
    ]);
  });
});
