import { ExtendedSequenceNumber } from '@kcl/core';
import { afterAll, describe, expect, it } from 'vitest';
import { createDynamoLeaseStore } from '../src/index.js';
import { countCommands, returnItemOnConditionFailure } from './command-counter.js';
import { startLocalDynamo } from './local-dynamo.js';

const dynamo = await startLocalDynamo();
afterAll(() => dynamo.stop());

// Real DynamoDB returns the item a condition failed on; dynalite does not, so the conformance suite
// covers only the store's fallback (a second write, then a consistent read). Here the item comes back.
describe.skipIf(!dynamo.check.available)(
  'takeLease when DynamoDB returns the item a condition failed on',
  () => {
    it('counts an owner switch only from another owner, in one write for a free or own lease and two for a steal', async () => {
      const client = dynamo.client();
      returnItemOnConditionFailure(client);
      const store = createDynamoLeaseStore({ client, applicationName: 'take-app', schemaPollIntervalMs: 10 });
      await store.ensureSchema();
      const created = await store.createLeaseIfAbsent({
        leaseKey: 'shardId-1',
        checkpoint: ExtendedSequenceNumber.TRIM_HORIZON,
      });
      if (!created.ok) throw new Error('create failed');
      const commands = countCommands(client);
      const writes = (): number => commands.get('UpdateItemCommand') ?? 0;

      const free = await store.takeLease('shardId-1', 0, 'worker-a');
      expect(free).toMatchObject({ ok: true, lease: { owner: 'worker-a', ownerSwitchesSinceCheckpoint: 0 } });
      expect(writes()).toBe(1);

      const own = await store.takeLease('shardId-1', 1, 'worker-a');
      expect(own).toMatchObject({ ok: true, lease: { leaseCounter: 2, ownerSwitchesSinceCheckpoint: 0 } });
      expect(writes()).toBe(2);

      const steal = await store.takeLease('shardId-1', 2, 'worker-b');
      expect(steal).toMatchObject({
        ok: true,
        lease: { owner: 'worker-b', ownerSwitchesSinceCheckpoint: 1 },
      });
      expect(writes()).toBe(4);

      // A lost race is told from the returned item, without trying the second write.
      expect(await store.takeLease('shardId-1', 2, 'worker-c')).toEqual({
        ok: false,
        reason: 'counter-mismatch',
      });
      expect(await store.takeLease('shardId-1', 2, 'worker-b')).toEqual({
        ok: false,
        reason: 'counter-mismatch',
      });
      expect(writes()).toBe(6);
      expect(await store.takeLease('shardId-404', 0, 'worker-a')).toEqual({ ok: false, reason: 'not-found' });
      expect((await store.getLease('shardId-1'))?.leaseCounter).toBe(3);
    });
  },
);
