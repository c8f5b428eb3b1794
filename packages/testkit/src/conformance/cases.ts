import type { Lease, LeaseInit, LeaseStore, LeaseWriteResult } from '@kcl/core';
import { compareLeaseKeys, ExtendedSequenceNumber, hashKeyRange, MAX_HASH_KEY } from '@kcl/core';

/** What an adapter gives the suite: stores on one shared physical table, and optionally a raw view. */
export interface ConformanceHarness {
  /** A store for `applicationName` on this harness's table. Stores of different names share the table. */
  createStore(applicationName: string): Promise<LeaseStore> | LeaseStore;
  /**
   * The stored row of a lease exactly as persisted (column or attribute names as keys), or null when
   * absent. Adapters that can read their own tables offer it, so the suite checks what was written.
   */
  readRawLease?(applicationName: string, leaseKey: string): Promise<Record<string, unknown> | null>;
}

export interface ConformanceContext {
  /** A store on a fresh application name, schema ensured. */
  readonly store: LeaseStore;
  readonly applicationName: string;
  readonly harness: ConformanceHarness;
  /** Another fresh application on the same table (schema ensured). */
  otherStore(applicationName?: string): Promise<LeaseStore>;
  /** A fresh, unique application name. */
  freshApplicationName(prefix?: string): string;
}

export interface ConformanceCase {
  readonly group: string;
  readonly name: string;
  readonly run: (context: ConformanceContext) => Promise<void>;
}

/** Assertions the cases need; the vitest binding passes `expect`-based ones. */
export interface ConformanceAssert {
  equal(actual: unknown, expected: unknown, message?: string): void;
  ok(value: unknown, message?: string): void;
}

let assert: ConformanceAssert;

/** @internal Sets the assertion functions the cases use. */
export function useAssert(implementation: ConformanceAssert): void {
  assert = implementation;
}

const esn = ExtendedSequenceNumber.of;
const SHARD = (n: number): string => `shardId-${String(n).padStart(12, '0')}`;
const LONG_SEQUENCE = '49590338271490256608559692538361571095921575989136588898';

/** A lease as plain data (strings for positions and hash keys), for deep equality. */
export function leaseSnapshot(lease: Lease | null): Record<string, unknown> | null {
  if (lease === null) return null;
  return {
    leaseKey: lease.leaseKey,
    owner: lease.owner,
    leaseCounter: lease.leaseCounter,
    checkpoint: lease.checkpoint.toString(),
    pendingCheckpoint: lease.pendingCheckpoint?.toString() ?? null,
    ownerSwitchesSinceCheckpoint: lease.ownerSwitchesSinceCheckpoint,
    parentShardIds: [...lease.parentShardIds].sort(),
    childShardIds: [...lease.childShardIds].sort(),
    hashKeyRange:
      lease.hashKeyRange === null
        ? null
        : `${lease.hashKeyRange.startingHashKey}-${lease.hashKeyRange.endingHashKey}`,
  };
}

function expectOk(result: LeaseWriteResult, what: string): Lease {
  assert.equal(result.ok ? 'ok' : `lost race: ${result.reason}`, 'ok', `${what} should succeed`);
  if (!result.ok) throw new Error('unreachable');
  return result.lease;
}

function expectLost(result: LeaseWriteResult, reason: string, what: string): void {
  assert.equal(result.ok ? 'ok' : result.reason, reason, `${what} should lose with ${reason}`);
}

async function expectStored(store: LeaseStore, expected: Lease): Promise<void> {
  const stored = await store.getLease(expected.leaseKey);
  assert.equal(leaseSnapshot(stored), leaseSnapshot(expected), `stored lease ${expected.leaseKey}`);
}

async function create(store: LeaseStore, init: Partial<LeaseInit> & { leaseKey: string }): Promise<Lease> {
  return expectOk(
    await store.createLeaseIfAbsent({ checkpoint: ExtendedSequenceNumber.TRIM_HORIZON, ...init }),
    `create ${init.leaseKey}`,
  );
}

async function createTaken(store: LeaseStore, leaseKey: string, owner = 'worker-a'): Promise<Lease> {
  const lease = await create(store, { leaseKey });
  return expectOk(await store.takeLease(leaseKey, lease.leaseCounter, owner), `take ${leaseKey}`);
}

async function inBatches<T>(
  items: readonly T[],
  size: number,
  run: (item: T) => Promise<unknown>,
): Promise<void> {
  for (let index = 0; index < items.length; index += size) {
    await Promise.all(items.slice(index, index + size).map(run));
  }
}

const cases: ConformanceCase[] = [];
const define = (group: string, name: string, run: ConformanceCase['run']): void => {
  cases.push({ group, name, run });
};

// ── schema and identity ──────────────────────────────────────────────────────────────────────────

define('schema', 'ensureSchema is idempotent, also when run concurrently', async ({ store }) => {
  await store.ensureSchema();
  await Promise.all([store.ensureSchema(), store.ensureSchema(), store.ensureSchema()]);
  await create(store, { leaseKey: SHARD(0) });
  await store.ensureSchema();
  assert.equal((await store.listLeases()).length, 1, 'ensureSchema keeps existing leases');
});

define(
  'schema',
  'declares version, application, capabilities and a description',
  async ({ store, applicationName }) => {
    assert.equal(store.specificationVersion, 'v1');
    assert.equal(store.applicationName, applicationName);
    assert.equal(typeof store.capabilities.batchRenew, 'boolean');
    assert.equal(typeof store.capabilities.consistentReads, 'boolean');
    assert.ok(typeof store.description === 'string' && store.description.length > 0, 'description is set');
  },
);

// ── create, get, list ────────────────────────────────────────────────────────────────────────────

define('create', 'creates a free lease with counter 0 and empty lineage', async ({ store }) => {
  const result = await store.createLeaseIfAbsent({
    leaseKey: SHARD(1),
    checkpoint: ExtendedSequenceNumber.LATEST,
  });
  const lease = expectOk(result, 'create');
  assert.equal(leaseSnapshot(lease), {
    leaseKey: SHARD(1),
    owner: null,
    leaseCounter: 0,
    checkpoint: 'LATEST',
    pendingCheckpoint: null,
    ownerSwitchesSinceCheckpoint: 0,
    parentShardIds: [],
    childShardIds: [],
    hashKeyRange: null,
  });
  await expectStored(store, lease);
});

define(
  'create',
  'a second create of the same key loses with already-exists and changes nothing',
  async ({ store }) => {
    const first = await create(store, { leaseKey: SHARD(1), checkpoint: esn('100') });
    const second = await store.createLeaseIfAbsent({
      leaseKey: SHARD(1),
      checkpoint: ExtendedSequenceNumber.LATEST,
    });
    expectLost(second, 'already-exists', 'second create');
    await expectStored(store, first);
  },
);

define('create', 'concurrent creates of one key: exactly one wins', async ({ store }) => {
  const results = await Promise.all(
    Array.from({ length: 10 }, (_, index) =>
      store.createLeaseIfAbsent({ leaseKey: SHARD(2), checkpoint: esn(String(index + 1)) }),
    ),
  );
  const winners = results.filter((result) => result.ok);
  assert.equal(winners.length, 1, 'one winner');
  assert.equal(
    results.filter((result) => !result.ok && result.reason === 'already-exists').length,
    9,
    'nine already-exists',
  );
  const winner = winners[0];
  if (winner?.ok) await expectStored(store, winner.lease);
});

define('create', 'creates a lease with every field set and reads it back exactly', async ({ store }) => {
  const lease = await create(store, {
    leaseKey: SHARD(3),
    checkpoint: esn(LONG_SEQUENCE, 7),
    pendingCheckpoint: esn(`${LONG_SEQUENCE.slice(0, -1)}9`, 2),
    parentShardIds: [SHARD(1), SHARD(0)],
    childShardIds: [SHARD(9)],
    hashKeyRange: hashKeyRange(5n, MAX_HASH_KEY),
    owner: 'worker-x',
    leaseCounter: 41,
    ownerSwitchesSinceCheckpoint: 3,
  });
  assert.equal(leaseSnapshot(lease), {
    leaseKey: SHARD(3),
    owner: 'worker-x',
    leaseCounter: 41,
    checkpoint: `${LONG_SEQUENCE}/7`,
    pendingCheckpoint: `${LONG_SEQUENCE.slice(0, -1)}9/2`,
    ownerSwitchesSinceCheckpoint: 3,
    parentShardIds: [SHARD(0), SHARD(1)],
    childShardIds: [SHARD(9)],
    hashKeyRange: `5-${MAX_HASH_KEY}`,
  });
  await expectStored(store, lease);
});

define('read', 'getLease of an absent key is null', async ({ store }) => {
  assert.equal(await store.getLease(SHARD(404)), null);
});

define('read', 'listLeases of a new application is empty', async ({ store }) => {
  assert.equal(await store.listLeases(), []);
});

define('read', 'listLeases returns every lease in lease-key order', async ({ store }) => {
  const keys = [SHARD(3), SHARD(1), SHARD(10), SHARD(2), 'b', 'a:shardId-1', 'Z'];
  for (const leaseKey of keys) await create(store, { leaseKey });
  const listed = (await store.listLeases()).map((lease) => lease.leaseKey);
  assert.equal(listed, [...keys].sort(compareLeaseKeys));
});

define('read', 'lists 1,000 leases, all fields intact', async ({ store }) => {
  const keys = Array.from({ length: 1_000 }, (_, index) => SHARD(index));
  await inBatches(keys, 50, (leaseKey) =>
    create(store, { leaseKey, checkpoint: esn(`${LONG_SEQUENCE}${leaseKey.slice(-3)}`) }),
  );
  const listed = await store.listLeases();
  assert.equal(listed.length, 1_000, 'all 1,000 listed');
  assert.equal(
    listed.map((lease) => lease.leaseKey),
    [...keys].sort(compareLeaseKeys),
    'in key order',
  );
  const sample = listed[777];
  assert.equal(sample?.checkpoint.toString(), `${LONG_SEQUENCE}777`, 'checkpoint of lease 777');
});

define('read', 'write results return the lease exactly as stored', async ({ store }) => {
  const created = await create(store, { leaseKey: SHARD(1), parentShardIds: [SHARD(0)] });
  await expectStored(store, created);
  const taken = expectOk(await store.takeLease(SHARD(1), created.leaseCounter, 'w'), 'take');
  await expectStored(store, taken);
  const renewed = expectOk(await store.renewLease(SHARD(1), taken.leaseCounter), 'renew');
  await expectStored(store, renewed);
  const checkpointed = expectOk(
    await store.updateCheckpoint(SHARD(1), renewed.leaseCounter, { checkpoint: esn('12') }),
    'checkpoint',
  );
  await expectStored(store, checkpointed);
  const released = expectOk(await store.releaseLease(SHARD(1), checkpointed.leaseCounter), 'release');
  await expectStored(store, released);
});

// ── renew ────────────────────────────────────────────────────────────────────────────────────────

define(
  'renew',
  'renew with the current counter increments it and changes nothing else',
  async ({ store }) => {
    const held = await createTaken(store, SHARD(1));
    const renewed = expectOk(await store.renewLease(SHARD(1), held.leaseCounter), 'renew');
    assert.equal(leaseSnapshot(renewed), { ...leaseSnapshot(held), leaseCounter: held.leaseCounter + 1 });
    await expectStored(store, renewed);
  },
);

define('renew', 'renew with a stale counter loses with counter-mismatch', async ({ store }) => {
  const held = await createTaken(store, SHARD(1));
  expectLost(await store.renewLease(SHARD(1), held.leaseCounter - 1), 'counter-mismatch', 'stale renew');
  expectLost(await store.renewLease(SHARD(1), held.leaseCounter + 1), 'counter-mismatch', 'future renew');
  await expectStored(store, held);
});

define('renew', 'renew of an absent lease loses with not-found', async ({ store }) => {
  expectLost(await store.renewLease(SHARD(404), 0), 'not-found', 'renew absent');
});

define('renew', 'fifty renews in a row count to fifty', async ({ store }) => {
  let lease = await create(store, { leaseKey: SHARD(1) });
  for (let index = 0; index < 50; index++) {
    lease = expectOk(await store.renewLease(SHARD(1), lease.leaseCounter), `renew ${index}`);
  }
  assert.equal(lease.leaseCounter, 50);
  await expectStored(store, lease);
});

define('renew', 'renewLeases reports each lease in the order given', async ({ store }) => {
  const a = await createTaken(store, SHARD(1));
  const b = await createTaken(store, SHARD(2));
  const c = await createTaken(store, SHARD(3));
  const results = await store.renewLeases([
    { leaseKey: SHARD(3), leaseCounter: c.leaseCounter },
    { leaseKey: SHARD(404), leaseCounter: 0 },
    { leaseKey: SHARD(1), leaseCounter: a.leaseCounter + 5 },
    { leaseKey: SHARD(2), leaseCounter: b.leaseCounter },
  ]);
  assert.equal(results.length, 4, 'one result per renewal');
  const [first, second, third, fourth] = results as [
    LeaseWriteResult,
    LeaseWriteResult,
    LeaseWriteResult,
    LeaseWriteResult,
  ];
  assert.equal(expectOk(first, 'renew 3').leaseKey, SHARD(3));
  expectLost(second, 'not-found', 'renew absent');
  expectLost(third, 'counter-mismatch', 'renew stale');
  assert.equal(expectOk(fourth, 'renew 2').leaseCounter, b.leaseCounter + 1);
  await expectStored(store, a);
  assert.equal((await store.getLease(SHARD(3)))?.leaseCounter, c.leaseCounter + 1, 'lease 3 renewed');
});

define('renew', 'renewLeases renews 100 leases and accepts an empty list', async ({ store }) => {
  const keys = Array.from({ length: 100 }, (_, index) => SHARD(index));
  await inBatches(keys, 25, (leaseKey) => createTaken(store, leaseKey, 'worker-batch'));
  const held = await store.listLeases();
  const results = await store.renewLeases(
    held.map(({ leaseKey, leaseCounter }) => ({ leaseKey, leaseCounter })),
  );
  assert.equal(results.filter((result) => result.ok).length, 100, 'all renewed');
  const after = await store.listLeases();
  assert.ok(
    after.every((lease, index) => lease.leaseCounter === (held[index]?.leaseCounter ?? -1) + 1),
    'every counter moved by one',
  );
  assert.equal(await store.renewLeases([]), []);
});

// ── take ─────────────────────────────────────────────────────────────────────────────────────────

define('take', 'take of a free lease sets the owner and increments the counter', async ({ store }) => {
  const lease = await create(store, { leaseKey: SHARD(1), checkpoint: esn('5') });
  const taken = expectOk(await store.takeLease(SHARD(1), lease.leaseCounter, 'worker-a'), 'take');
  assert.equal(leaseSnapshot(taken), {
    ...leaseSnapshot(lease),
    owner: 'worker-a',
    leaseCounter: 1,
  });
  await expectStored(store, taken);
});

// As the Java KCL's taker: only a change from another owner is a switch (a new or released lease has
// no owner to switch from), so a lease that merely changed hands through release reads as settled.
define('take', 'taking a free lease does not count an owner switch', async ({ store }) => {
  const lease = await create(store, { leaseKey: SHARD(1) });
  const taken = expectOk(await store.takeLease(SHARD(1), lease.leaseCounter, 'worker-a'), 'take new');
  assert.equal(taken.ownerSwitchesSinceCheckpoint, 0, 'a new lease taken: no switch');
  const stolen = expectOk(await store.takeLease(SHARD(1), taken.leaseCounter, 'worker-b'), 'steal');
  assert.equal(stolen.ownerSwitchesSinceCheckpoint, 1, 'from another owner: a switch');
  const released = expectOk(await store.releaseLease(SHARD(1), stolen.leaseCounter), 'release');
  const retaken = expectOk(
    await store.takeLease(SHARD(1), released.leaseCounter, 'worker-c'),
    'take released',
  );
  assert.equal(
    retaken.ownerSwitchesSinceCheckpoint,
    1,
    'a released lease taken: the count is kept, not raised',
  );
  await expectStored(store, retaken);
  const withSwitches = await create(store, { leaseKey: SHARD(2), ownerSwitchesSinceCheckpoint: 4 });
  const takenFree = expectOk(
    await store.takeLease(SHARD(2), withSwitches.leaseCounter, 'worker-a'),
    'take free with switches',
  );
  assert.equal(takenFree.ownerSwitchesSinceCheckpoint, 4, 'a free lease with switches keeps its count');
  await expectStored(store, takenFree);
});

define('take', 'take by the current owner does not count an owner switch', async ({ store }) => {
  const held = await createTaken(store, SHARD(1), 'worker-a');
  const again = expectOk(await store.takeLease(SHARD(1), held.leaseCounter, 'worker-a'), 'retake');
  assert.equal(again.ownerSwitchesSinceCheckpoint, held.ownerSwitchesSinceCheckpoint);
  assert.equal(again.leaseCounter, held.leaseCounter + 1);
});

define('take', 'take from another owner (a steal) switches the owner', async ({ store }) => {
  const held = await createTaken(store, SHARD(1), 'worker-a');
  const stolen = expectOk(await store.takeLease(SHARD(1), held.leaseCounter, 'worker-b'), 'steal');
  assert.equal(stolen.owner, 'worker-b');
  assert.equal(stolen.ownerSwitchesSinceCheckpoint, held.ownerSwitchesSinceCheckpoint + 1);
  await expectStored(store, stolen);
});

define('take', 'take with a stale counter loses with counter-mismatch', async ({ store }) => {
  const held = await createTaken(store, SHARD(1), 'worker-a');
  expectLost(
    await store.takeLease(SHARD(1), held.leaseCounter - 1, 'worker-b'),
    'counter-mismatch',
    'stale take',
  );
  await expectStored(store, held);
});

define('take', 'take of an absent lease loses with not-found', async ({ store }) => {
  expectLost(await store.takeLease(SHARD(404), 0, 'worker-a'), 'not-found', 'take absent');
  assert.equal(await store.getLease(SHARD(404)), null, 'take does not create');
});

define('take', '20 concurrent takes of one lease: exactly one wins', async ({ store }) => {
  const lease = await create(store, { leaseKey: SHARD(1) });
  const results = await Promise.all(
    Array.from({ length: 20 }, (_, index) =>
      store.takeLease(SHARD(1), lease.leaseCounter, `worker-${index}`),
    ),
  );
  const winners = results.flatMap((result, index) => (result.ok ? [index] : []));
  assert.equal(winners.length, 1, 'one winner');
  assert.equal(
    results.filter((result) => !result.ok && result.reason === 'counter-mismatch').length,
    19,
    'nineteen counter-mismatch',
  );
  const stored = await store.getLease(SHARD(1));
  assert.equal(stored?.owner, `worker-${winners[0]}`, 'the winner owns it');
  assert.equal(stored?.leaseCounter, 1, 'counter moved once');
});

define('take', 'a writer holding a stale counter loses every conditional write', async ({ store }) => {
  const seenByA = await createTaken(store, SHARD(1), 'worker-a');
  // Worker b writes in between (takes the lease after it expired, say).
  const byB = expectOk(await store.takeLease(SHARD(1), seenByA.leaseCounter, 'worker-b'), 'b takes');
  expectLost(await store.renewLease(SHARD(1), seenByA.leaseCounter), 'counter-mismatch', 'a renews');
  expectLost(
    await store.updateCheckpoint(SHARD(1), seenByA.leaseCounter, { checkpoint: esn('99') }),
    'counter-mismatch',
    'a checkpoints',
  );
  expectLost(await store.releaseLease(SHARD(1), seenByA.leaseCounter), 'counter-mismatch', 'a releases');
  expectLost(
    await store.takeLease(SHARD(1), seenByA.leaseCounter, 'worker-a'),
    'counter-mismatch',
    'a retakes',
  );
  const [renewA] = await store.renewLeases([{ leaseKey: SHARD(1), leaseCounter: seenByA.leaseCounter }]);
  expectLost(renewA as LeaseWriteResult, 'counter-mismatch', 'a batch-renews');
  await expectStored(store, byB);
});

// ── release ──────────────────────────────────────────────────────────────────────────────────────

define(
  'release',
  'release clears the owner, keeps the checkpoint, increments the counter',
  async ({ store }) => {
    const held = await createTaken(store, SHARD(1));
    const checkpointed = expectOk(
      await store.updateCheckpoint(SHARD(1), held.leaseCounter, { checkpoint: esn('777', 3) }),
      'checkpoint',
    );
    const released = expectOk(await store.releaseLease(SHARD(1), checkpointed.leaseCounter), 'release');
    assert.equal(leaseSnapshot(released), {
      ...leaseSnapshot(checkpointed),
      owner: null,
      leaseCounter: checkpointed.leaseCounter + 1,
    });
    await expectStored(store, released);
    const retaken = expectOk(
      await store.takeLease(SHARD(1), released.leaseCounter, 'worker-b'),
      'take after release',
    );
    assert.equal(retaken.owner, 'worker-b');
  },
);

define('release', 'release with a stale counter or of an absent lease loses', async ({ store }) => {
  const held = await createTaken(store, SHARD(1));
  expectLost(await store.releaseLease(SHARD(1), held.leaseCounter - 1), 'counter-mismatch', 'stale release');
  expectLost(await store.releaseLease(SHARD(404), 0), 'not-found', 'release absent');
  await expectStored(store, held);
});

// ── checkpoints ──────────────────────────────────────────────────────────────────────────────────

define(
  'checkpoint',
  'a checkpoint is stored, resets owner switches and keeps owner and lineage',
  async ({ store }) => {
    const lease = await create(store, {
      leaseKey: SHARD(4),
      parentShardIds: [SHARD(1)],
      hashKeyRange: hashKeyRange(0n, 99n),
    });
    const first = expectOk(await store.takeLease(SHARD(4), lease.leaseCounter, 'worker-a'), 'take');
    const held = expectOk(await store.takeLease(SHARD(4), first.leaseCounter, 'worker-b'), 'steal');
    assert.equal(held.ownerSwitchesSinceCheckpoint, 1);
    const checkpointed = expectOk(
      await store.updateCheckpoint(SHARD(4), held.leaseCounter, { checkpoint: esn('1234') }),
      'checkpoint',
    );
    assert.equal(leaseSnapshot(checkpointed), {
      ...leaseSnapshot(held),
      checkpoint: '1234',
      ownerSwitchesSinceCheckpoint: 0,
      leaseCounter: held.leaseCounter + 1,
    });
    await expectStored(store, checkpointed);
  },
);

define('checkpoint', 'every sentinel round-trips', async ({ store }) => {
  let lease = await createTaken(store, SHARD(1));
  for (const sentinel of ['TRIM_HORIZON', 'LATEST', 'AT_TIMESTAMP', 'SHARD_END'] as const) {
    lease = expectOk(
      await store.updateCheckpoint(SHARD(1), lease.leaseCounter, {
        checkpoint: ExtendedSequenceNumber[sentinel],
      }),
      sentinel,
    );
    const stored = await store.getLease(SHARD(1));
    assert.equal(stored?.checkpoint.sentinel, sentinel, `${sentinel} read back`);
    assert.equal(stored?.checkpoint.subSequenceNumber, 0, `${sentinel} sub-sequence`);
  }
  for (const sentinel of ['TRIM_HORIZON', 'LATEST', 'AT_TIMESTAMP', 'SHARD_END'] as const) {
    const leaseKey = `created-${sentinel}`;
    await create(store, { leaseKey, checkpoint: ExtendedSequenceNumber[sentinel] });
    assert.equal((await store.getLease(leaseKey))?.checkpoint.sentinel, sentinel, `created at ${sentinel}`);
  }
});

define('checkpoint', 'sub-sequence numbers round-trip', async ({ store }) => {
  let lease = await createTaken(store, SHARD(1));
  for (const sub of [0, 1, 17, 2_147_483_647, 9_007_199_254_740_991]) {
    lease = expectOk(
      await store.updateCheckpoint(SHARD(1), lease.leaseCounter, { checkpoint: esn('500', sub) }),
      `sub ${sub}`,
    );
    const stored = await store.getLease(SHARD(1));
    assert.equal(stored?.checkpoint.subSequenceNumber, sub, `sub-sequence ${sub}`);
    assert.equal(stored?.checkpoint.sequenceNumber, '500');
  }
});

define('checkpoint', '56-digit and longer sequence numbers are stored exactly', async ({ store }) => {
  let lease = await createTaken(store, SHARD(1));
  const values = [
    LONG_SEQUENCE,
    `${LONG_SEQUENCE.slice(0, -1)}9`,
    '9'.repeat(80),
    '18446744073709551616', // 2^64
    '0',
  ];
  for (const value of values) {
    lease = expectOk(
      await store.updateCheckpoint(SHARD(1), lease.leaseCounter, { checkpoint: esn(value, 1) }),
      value,
    );
    assert.equal((await store.getLease(SHARD(1)))?.checkpoint.sequenceNumber, value, `stored ${value}`);
  }
});

define(
  'checkpoint',
  'a pending checkpoint is stored beside the checkpoint and cleared',
  async ({ store }) => {
    let lease = await createTaken(store, SHARD(1));
    lease = expectOk(
      await store.updateCheckpoint(SHARD(1), lease.leaseCounter, {
        checkpoint: esn('100'),
        pendingCheckpoint: esn(LONG_SEQUENCE, 4),
      }),
      'prepare',
    );
    let stored = await store.getLease(SHARD(1));
    assert.equal(stored?.pendingCheckpoint?.toString(), `${LONG_SEQUENCE}/4`, 'pending stored');
    assert.equal(stored?.checkpoint.toString(), '100', 'checkpoint kept');
    lease = expectOk(
      await store.updateCheckpoint(SHARD(1), lease.leaseCounter, {
        checkpoint: esn(LONG_SEQUENCE, 4),
        pendingCheckpoint: null,
      }),
      'commit',
    );
    stored = await store.getLease(SHARD(1));
    assert.equal(stored?.pendingCheckpoint ?? null, null, 'pending cleared by null');
    lease = expectOk(
      await store.updateCheckpoint(SHARD(1), lease.leaseCounter, {
        checkpoint: esn('1'),
        pendingCheckpoint: esn('2'),
      }),
      'prepare again',
    );
    expectOk(
      await store.updateCheckpoint(SHARD(1), lease.leaseCounter, { checkpoint: esn('2') }),
      'commit without field',
    );
    assert.equal(
      (await store.getLease(SHARD(1)))?.pendingCheckpoint ?? null,
      null,
      'pending cleared when absent',
    );
  },
);

define('checkpoint', 'SHARD_END is stored and read back as complete', async ({ store }) => {
  const held = await createTaken(store, SHARD(1));
  const ended = expectOk(
    await store.updateCheckpoint(SHARD(1), held.leaseCounter, {
      checkpoint: ExtendedSequenceNumber.SHARD_END,
      pendingCheckpoint: null,
    }),
    'SHARD_END',
  );
  const stored = await store.getLease(SHARD(1));
  assert.ok(stored?.checkpoint.isShardEnd, 'stored as SHARD_END');
  assert.equal(leaseSnapshot(stored), leaseSnapshot(ended));
});

define('checkpoint', 'a checkpoint with a stale counter or of an absent lease loses', async ({ store }) => {
  const held = await createTaken(store, SHARD(1));
  expectLost(
    await store.updateCheckpoint(SHARD(1), held.leaseCounter + 1, { checkpoint: esn('1') }),
    'counter-mismatch',
    'stale checkpoint',
  );
  expectLost(await store.updateCheckpoint(SHARD(404), 0, { checkpoint: esn('1') }), 'not-found', 'absent');
  await expectStored(store, held);
});

// ── meta (lineage, hash ranges) ──────────────────────────────────────────────────────────────────

define('meta', 'child shard ids are recorded without touching the counter or owner', async ({ store }) => {
  const held = await createTaken(store, SHARD(1));
  const updated = await store.updateLeaseMeta(SHARD(1), { childShardIds: [SHARD(3), SHARD(2)] });
  assert.equal(leaseSnapshot(updated), { ...leaseSnapshot(held), childShardIds: [SHARD(2), SHARD(3)] });
  await expectStored(store, updated as Lease);
  expectOk(await store.renewLease(SHARD(1), held.leaseCounter), 'renew with the old counter still works');
});

define(
  'meta',
  'the hash range is recorded; an absent lease gives null and is not created',
  async ({ store }) => {
    const lease = await create(store, { leaseKey: SHARD(1) });
    const range = hashKeyRange(170141183460469231731687303715884105728n, MAX_HASH_KEY);
    const updated = await store.updateLeaseMeta(SHARD(1), { hashKeyRange: range });
    assert.equal(leaseSnapshot(updated), {
      ...leaseSnapshot(lease),
      hashKeyRange: `${range.startingHashKey}-${MAX_HASH_KEY}`,
    });
    assert.equal(await store.updateLeaseMeta(SHARD(404), { childShardIds: [SHARD(5)] }), null);
    assert.equal(await store.getLease(SHARD(404)), null, 'not created');
  },
);

define('meta', 'parent ids of a split and of a merge round-trip as sets', async ({ store }) => {
  await create(store, { leaseKey: SHARD(2), parentShardIds: [SHARD(0)] });
  await create(store, { leaseKey: SHARD(3), parentShardIds: [SHARD(1), SHARD(0)] });
  await create(store, { leaseKey: SHARD(4), parentShardIds: [], childShardIds: [] });
  assert.equal((await store.getLease(SHARD(2)))?.parentShardIds, [SHARD(0)]);
  assert.equal([...((await store.getLease(SHARD(3)))?.parentShardIds ?? [])].sort(), [SHARD(0), SHARD(1)]);
  const empty = await store.getLease(SHARD(4));
  assert.equal([empty?.parentShardIds, empty?.childShardIds], [[], []]);
});

define('meta', 'hash ranges at both ends of 0 … 2^128 − 1 round-trip', async ({ store }) => {
  const half = 1n << 127n;
  const ranges = [
    hashKeyRange(0n, 0n),
    hashKeyRange(0n, half - 1n),
    hashKeyRange(half, MAX_HASH_KEY),
    hashKeyRange(MAX_HASH_KEY, MAX_HASH_KEY),
    hashKeyRange(0n, MAX_HASH_KEY),
  ];
  for (const [index, range] of ranges.entries()) {
    await create(store, { leaseKey: SHARD(index), hashKeyRange: range });
    const stored = await store.getLease(SHARD(index));
    assert.equal(stored?.hashKeyRange?.startingHashKey, range.startingHashKey, `start of range ${index}`);
    assert.equal(stored?.hashKeyRange?.endingHashKey, range.endingHashKey, `end of range ${index}`);
  }
});

// ── delete ───────────────────────────────────────────────────────────────────────────────────────

define(
  'delete',
  'delete removes the lease; deleting again is fine; the key can be created anew',
  async ({ store }) => {
    await createTaken(store, SHARD(1));
    await create(store, { leaseKey: SHARD(2) });
    await store.deleteLease(SHARD(1));
    assert.equal(await store.getLease(SHARD(1)), null, 'gone');
    assert.equal(
      (await store.listLeases()).map((lease) => lease.leaseKey),
      [SHARD(2)],
      'not listed',
    );
    await store.deleteLease(SHARD(1));
    await store.deleteLease(SHARD(404));
    const again = await create(store, { leaseKey: SHARD(1) });
    assert.equal([again.leaseCounter, again.owner], [0, null], 'recreated fresh');
  },
);

define('delete', 'conditional writes on a deleted lease lose with not-found', async ({ store }) => {
  const held = await createTaken(store, SHARD(1));
  await store.deleteLease(SHARD(1));
  expectLost(await store.renewLease(SHARD(1), held.leaseCounter), 'not-found', 'renew');
  expectLost(await store.takeLease(SHARD(1), held.leaseCounter, 'w'), 'not-found', 'take');
  expectLost(await store.releaseLease(SHARD(1), held.leaseCounter), 'not-found', 'release');
  expectLost(
    await store.updateCheckpoint(SHARD(1), held.leaseCounter, { checkpoint: esn('1') }),
    'not-found',
    'checkpoint',
  );
  assert.equal(await store.getLease(SHARD(1)), null, 'still absent');
});

// ── workers ──────────────────────────────────────────────────────────────────────────────────────

define('workers', 'a heartbeat registers the worker and increments on every beat', async ({ store }) => {
  const first = await store.heartbeatWorker('worker-a', { host: 'h1', pid: '42' });
  assert.equal([first.workerId, first.heartbeat], ['worker-a', 1]);
  assert.equal(first.metadata, { host: 'h1', pid: '42' });
  assert.ok(
    first.lastHeartbeatAt instanceof Date && !Number.isNaN(first.lastHeartbeatAt.getTime()),
    'a date',
  );
  const second = await store.heartbeatWorker('worker-a', { host: 'h1', pid: '42' });
  assert.equal(second.heartbeat, 2);
  const listed = await store.listWorkers();
  assert.equal(
    listed.map((worker) => [worker.workerId, worker.heartbeat, worker.metadata]),
    [['worker-a', 2, { host: 'h1', pid: '42' }]],
  );
});

define('workers', 'concurrent heartbeats of one worker each count', async ({ store }) => {
  await Promise.all(Array.from({ length: 10 }, () => store.heartbeatWorker('worker-a')));
  const [worker] = await store.listWorkers();
  assert.equal(worker?.heartbeat, 10);
});

define('workers', 'workers are listed by id and removed', async ({ store }) => {
  for (const workerId of ['w-3', 'w-1', 'w-2']) await store.heartbeatWorker(workerId);
  assert.equal(
    (await store.listWorkers()).map((worker) => worker.workerId),
    ['w-1', 'w-2', 'w-3'],
  );
  await store.removeWorker('w-2');
  await store.removeWorker('w-404');
  assert.equal(
    (await store.listWorkers()).map((worker) => worker.workerId),
    ['w-1', 'w-3'],
  );
  const back = await store.heartbeatWorker('w-2');
  assert.equal(back.heartbeat, 1, 'a removed worker starts again at 1');
});

define('workers', 'an empty registry lists no workers', async ({ store }) => {
  assert.equal(await store.listWorkers(), []);
});

// ── migration marker ─────────────────────────────────────────────────────────────────────────────

define('marker', 'the migration marker is set, read and cleared', async ({ store }) => {
  assert.equal(await store.getMigrationMarker(), null, 'none at first');
  const migratedAt = new Date('2026-01-02T03:04:05.000Z');
  await store.setMigrationMarker({ migratedTo: 'postgres table "kcl_leases"', migratedAt });
  const marker = await store.getMigrationMarker();
  assert.equal(marker?.migratedTo, 'postgres table "kcl_leases"');
  assert.equal(marker?.migratedAt.toISOString(), migratedAt.toISOString());
  await store.setMigrationMarker(null);
  assert.equal(await store.getMigrationMarker(), null, 'cleared');
  await create(store, { leaseKey: SHARD(1) });
  assert.equal((await store.listLeases()).length, 1, 'the marker is not a lease');
  assert.equal(await store.listWorkers(), [], 'the marker is not a worker');
});

// ── sharing one table between applications ───────────────────────────────────────────────────────

define(
  'sharing',
  'two applications on one table never see or touch each other’s leases',
  async ({ store, otherStore }) => {
    const other = await otherStore();
    const mine = await createTaken(store, SHARD(1), 'mine');
    const theirs = await create(other, { leaseKey: SHARD(1), checkpoint: esn('42') });
    await create(other, { leaseKey: SHARD(2) });
    assert.equal(
      (await store.listLeases()).map((lease) => lease.leaseKey),
      [SHARD(1)],
      'I list only mine',
    );
    assert.equal((await other.listLeases()).length, 2, 'they list only theirs');
    expectOk(await other.takeLease(SHARD(1), theirs.leaseCounter, 'theirs'), 'they take theirs');
    await expectStored(store, mine);
    expectOk(await store.renewLease(SHARD(1), mine.leaseCounter), 'my counter is mine alone');
    await other.deleteLease(SHARD(2));
    await other.deleteLease(SHARD(1));
    assert.equal((await store.getLease(SHARD(1)))?.owner, 'mine', 'their delete left mine');
    assert.equal(await store.getLease(SHARD(2)), null, 'their lease never appeared here');
  },
);

define('sharing', 'workers and markers are per application', async ({ store, otherStore }) => {
  const other = await otherStore();
  await store.heartbeatWorker('worker-1');
  await other.heartbeatWorker('worker-1');
  await other.heartbeatWorker('worker-2');
  assert.equal(
    (await store.listWorkers()).map((worker) => [worker.workerId, worker.heartbeat]),
    [['worker-1', 1]],
  );
  await other.removeWorker('worker-1');
  assert.equal((await store.listWorkers()).length, 1, 'their removal left mine');
  await other.setMigrationMarker({ migratedTo: 'elsewhere', migratedAt: new Date(0) });
  assert.equal(await store.getMigrationMarker(), null, 'their marker is not mine');
});

define(
  'sharing',
  'application names that prefix or extend each other stay apart',
  async ({ otherStore, freshApplicationName }) => {
    const base = freshApplicationName('team');
    const names = [base, `${base}:x`, `${base}#x`, `${base}/x`, `${base}x`, `${base} x`];
    const stores = await Promise.all(names.map((name) => otherStore(name)));
    for (const [index, store] of stores.entries()) {
      // Keys chosen so that naive "app + separator + key" layouts would collide.
      await create(store, { leaseKey: `x:${SHARD(1)}`, checkpoint: esn(String(index + 1)) });
      await create(store, { leaseKey: SHARD(1), checkpoint: esn(String(index + 100)) });
      await store.heartbeatWorker(`w${index}`);
    }
    for (const [index, store] of stores.entries()) {
      const leases = await store.listLeases();
      assert.equal(leases.length, 2, `${names[index]} has two leases`);
      assert.equal(
        leases.map((lease) => lease.checkpoint.toString()).sort(),
        [String(index + 1), String(index + 100)].sort(),
        `${names[index]} reads its own checkpoints`,
      );
      assert.equal(
        (await store.listWorkers()).map((worker) => worker.workerId),
        [`w${index}`],
      );
    }
  },
);

define(
  'sharing',
  'an application name with quotes, spaces and non-ASCII characters works',
  async ({ otherStore, freshApplicationName }) => {
    const name = freshApplicationName(`it's "billing" – Zürich ✓ %_\\`);
    const store = await otherStore(name);
    assert.equal(store.applicationName, name);
    const lease = await createTaken(store, SHARD(1));
    await expectStored(store, lease);
    await store.heartbeatWorker('w');
    assert.equal((await store.listLeases()).length, 1);
    assert.equal((await store.listWorkers()).length, 1);
  },
);

// ── unusual keys ─────────────────────────────────────────────────────────────────────────────────

define('keys', 'unusual but legal lease keys round-trip and sort by bytes', async ({ store }) => {
  const keys = [
    '123456789012:orders:1600000000:shardId-000000000007',
    "shard'; DROP TABLE leases; --",
    'shard "quoted" \\ backslash',
    'space in key',
    'ünïcödé-shard-😀',
    '%_wildcards_%',
    `long-${'k'.repeat(200)}`,
    'a',
  ];
  for (const leaseKey of keys) {
    const lease = await createTaken(store, leaseKey, `owner of ${leaseKey.slice(0, 10)}`);
    await expectStored(store, lease);
  }
  assert.equal(
    (await store.listLeases()).map((lease) => lease.leaseKey),
    [...keys].sort(compareLeaseKeys),
  );
  for (const leaseKey of keys) await store.deleteLease(leaseKey);
  assert.equal(await store.listLeases(), []);
});

define('keys', 'keys that differ only in trailing spaces or case are distinct leases', async ({ store }) => {
  const keys = ['shard', 'shard ', 'shard  ', 'Shard', 'shard\t'];
  for (const [index, leaseKey] of keys.entries()) {
    await create(store, { leaseKey, checkpoint: esn(String(index + 1)) });
  }
  for (const [index, leaseKey] of keys.entries()) {
    assert.equal(
      (await store.getLease(leaseKey))?.checkpoint.toString(),
      String(index + 1),
      `lease ${JSON.stringify(leaseKey)}`,
    );
  }
  assert.equal(
    (await store.listLeases()).map((lease) => lease.leaseKey),
    [...keys].sort(compareLeaseKeys),
  );
  await store.deleteLease('shard ');
  assert.equal((await store.listLeases()).length, keys.length - 1, 'only the one key deleted');
});

define('keys', 'unusual worker ids round-trip', async ({ store }) => {
  const workerIds = ["host-1:pid'7", 'worker with spaces', 'wörker-✓', 'x'.repeat(200)];
  for (const workerId of workerIds) {
    await store.heartbeatWorker(workerId, { note: 'quote " and \' and \\' });
    await createTaken(store, `lease-of-${workerIds.indexOf(workerId)}`, workerId);
  }
  const listed = await store.listWorkers();
  assert.equal(listed.map((worker) => worker.workerId).sort(), [...workerIds].sort());
  assert.equal(listed[0]?.metadata, { note: 'quote " and \' and \\' });
  const owners = (await store.listLeases()).map((lease) => lease.owner).sort();
  assert.equal(owners, [...workerIds].sort());
});

// ── raw rows ─────────────────────────────────────────────────────────────────────────────────────

define(
  'raw',
  'the stored row exists, names the lease, and disappears on delete',
  async ({ store, harness, applicationName }) => {
    if (harness.readRawLease === undefined) {
      // Nothing to compare for adapters without a raw view; the typed round trips above still apply.
      assert.equal(typeof harness.createStore, 'function');
      return;
    }
    await createTaken(store, SHARD(1), 'raw-owner');
    const row = await harness.readRawLease(applicationName, SHARD(1));
    assert.ok(row !== null, 'a raw row exists');
    const values = JSON.stringify(row, (_key, value: unknown) =>
      typeof value === 'bigint' ? value.toString() : value,
    );
    assert.ok(values.includes(SHARD(1)), 'the row holds the lease key');
    assert.ok(values.includes('raw-owner'), 'the row holds the owner');
    await store.deleteLease(SHARD(1));
    assert.equal(await harness.readRawLease(applicationName, SHARD(1)), null, 'the row is gone');
  },
);

define('raw', 'a lost race writes nothing', async ({ store, harness, applicationName }) => {
  const held = await createTaken(store, SHARD(1), 'owner-1');
  const before = (await harness.readRawLease?.(applicationName, SHARD(1))) ?? leaseSnapshot(held);
  expectLost(await store.takeLease(SHARD(1), held.leaseCounter + 3, 'intruder'), 'counter-mismatch', 'take');
  expectLost(
    await store.updateCheckpoint(SHARD(1), held.leaseCounter - 1, {
      checkpoint: ExtendedSequenceNumber.SHARD_END,
    }),
    'counter-mismatch',
    'checkpoint',
  );
  const after =
    (await harness.readRawLease?.(applicationName, SHARD(1))) ??
    leaseSnapshot(await store.getLease(SHARD(1)));
  assert.equal(
    JSON.stringify(after, (_key, value: unknown) => (typeof value === 'bigint' ? value.toString() : value)),
    JSON.stringify(before, (_key, value: unknown) => (typeof value === 'bigint' ? value.toString() : value)),
    'row unchanged',
  );
});

/** Every case of the conformance suite, in a stable order. */
export const conformanceCases: readonly ConformanceCase[] = cases;
