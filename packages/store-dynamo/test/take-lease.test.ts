import { GetItemCommand, PutItemCommand } from '@aws-sdk/client-dynamodb';
import { ExtendedSequenceNumber } from '@kcl/core';
import type { JavaLeaseTableItem } from '@kcl/testkit';
import { javaLeaseItem } from '@kcl/testkit';
import { afterAll, describe, expect, it } from 'vitest';
import { createDynamoLeaseStore } from '../src/index.js';
import { countCommands, returnItemOnConditionFailure } from './command-counter.js';
import { startLocalDynamo } from './local-dynamo.js';

const dynamo = await startLocalDynamo();
afterAll(() => dynamo.stop());

// Real DynamoDB returns the item a condition failed on; dynalite does not, so the conformance suite
// covers only the store's fallback (a second write, then a consistent read). Here the item comes back.
describe.skipIf(!dynamo.check.available)(
  'leases.take when DynamoDB returns the item a condition failed on',
  () => {
    it('counts an owner switch only from another owner, in one write for a free or own lease and two for a steal', async () => {
      const client = dynamo.client();
      returnItemOnConditionFailure(client);
      const store = createDynamoLeaseStore({ client, applicationName: 'take-app', schemaPollIntervalMs: 10 });
      await store.admin.ensureSchema();
      const created = await store.leases.create({
        leaseKey: 'shardId-1',
        checkpoint: ExtendedSequenceNumber.TRIM_HORIZON,
      });
      if (!created.ok) throw new Error('create failed');
      const commands = countCommands(client);
      const writes = (): number => commands.get('UpdateItemCommand') ?? 0;

      const free = await store.leases.take('shardId-1', 0, 'worker-a');
      expect(free).toMatchObject({ ok: true, lease: { owner: 'worker-a', ownerSwitchesSinceCheckpoint: 0 } });
      expect(writes()).toBe(1);

      const own = await store.leases.take('shardId-1', 1, 'worker-a');
      expect(own).toMatchObject({ ok: true, lease: { leaseCounter: 2, ownerSwitchesSinceCheckpoint: 0 } });
      expect(writes()).toBe(2);

      const steal = await store.leases.take('shardId-1', 2, 'worker-b');
      expect(steal).toMatchObject({
        ok: true,
        lease: { owner: 'worker-b', ownerSwitchesSinceCheckpoint: 1 },
      });
      expect(writes()).toBe(4);

      // A lost race is told from the returned item, without trying the second write.
      expect(await store.leases.take('shardId-1', 2, 'worker-c')).toEqual({
        ok: false,
        reason: 'counter-mismatch',
      });
      expect(await store.leases.take('shardId-1', 2, 'worker-b')).toEqual({
        ok: false,
        reason: 'counter-mismatch',
      });
      expect(writes()).toBe(6);
      expect(await store.leases.take('shardId-404', 0, 'worker-a')).toEqual({
        ok: false,
        reason: 'not-found',
      });
      expect((await store.leases.get('shardId-1'))?.leaseCounter).toBe(3);
    });
  },
);

/** A lease in a KCL 3.x graceful hand-off, as Java's initiateGracefulLeaseHandoff leaves it. */
function javaHandoffItem(leaseKey: string): JavaLeaseTableItem {
  return javaLeaseItem({
    leaseKey,
    leaseOwner: 'java-next',
    checkpointOwner: 'java-current',
    leaseCounter: 40,
    checkpoint: 'LATEST',
    entityType: 'LEASE',
  });
}

// kcl's owner of a lease in hand-off is the checkpointOwner (Java's Lease.actualOwner()), not the
// leaseOwner, which already names the next owner. Both ways of resolving a take (the item returned on a
// failed condition, or a second write and a read as on dynalite) must count switches from that owner.
describe.skipIf(!dynamo.check.available).each([
  ['DynamoDB returns the item a condition failed on', true],
  ['the emulator returns no item (dynalite)', false],
])('leases.take of a lease in a KCL 3.x hand-off, when %s', (_name, returnsItem) => {
  it('the current owner taking it back counts no switch, the next owner and anyone else count one; each ends the hand-off', async () => {
    const client = dynamo.client();
    if (returnsItem) returnItemOnConditionFailure(client);
    const tableName = `handoff-take-${returnsItem ? 'item' : 'read'}`;
    const store = createDynamoLeaseStore({ client, applicationName: tableName, schemaPollIntervalMs: 10 });
    await store.admin.ensureSchema();
    for (const leaseKey of ['back', 'next', 'third']) {
      await client.send(new PutItemCommand({ TableName: tableName, Item: javaHandoffItem(leaseKey) }));
    }
    expect(await store.leases.get('back')).toMatchObject({
      owner: 'java-current',
      handoff: { from: 'java-current', to: 'java-next', deadline: null },
    });

    const takes: Array<[string, string]> = [
      ['back', 'java-current'],
      ['next', 'java-next'],
      ['third', 'kcl-worker'],
    ];
    const results = [];
    for (const [leaseKey, owner] of takes) {
      const taken = await store.leases.take(leaseKey, 40, owner);
      if (!taken.ok) throw new Error(`take of ${leaseKey} lost with ${taken.reason}`);
      results.push([taken.lease.owner, taken.lease.ownerSwitchesSinceCheckpoint, taken.lease.handoff]);
      const item = await client.send(
        new GetItemCommand({
          TableName: tableName,
          Key: { leaseKey: { S: leaseKey } },
          ConsistentRead: true,
        }),
      );
      expect([item.Item?.leaseOwner, item.Item?.checkpointOwner], leaseKey).toEqual([
        { S: owner },
        undefined,
      ]);
    }
    expect(results).toEqual([
      ['java-current', 0, null],
      ['java-next', 1, null],
      ['kcl-worker', 1, null],
    ]);
  });
});
