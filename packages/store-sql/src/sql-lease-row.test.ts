import type { Lease } from '@kcl/core';
import {
  ExtendedSequenceNumber,
  hashKeyRange,
  LeaseDataError,
  leaseFromInit,
  leasesEqual,
  MAX_HASH_KEY,
} from '@kcl/core';
import { describe, expect, it } from 'vitest';
import {
  leaseFromRow,
  leaseToRowValues,
  migrationMarkerFromRow,
  readLeaseRow,
  workerFromRow,
} from './sql-lease-row.js';
import type { SqlRow } from './sql-types.js';

const STORE = '@kcl/store-sql (test)';
const LONG = '49590338271490256608559692538361571095921575989136588898';

const full: Lease = leaseFromInit({
  leaseKey: "shard'; --",
  owner: 'worker-✓',
  leaseCounter: 9_007_199_254_740_991,
  checkpoint: ExtendedSequenceNumber.of(LONG, 7),
  pendingCheckpoint: ExtendedSequenceNumber.of('9'.repeat(129), 2),
  ownerSwitchesSinceCheckpoint: 3,
  parentShardIds: ['b', 'a', 'a'],
  childShardIds: ['c'],
  hashKeyRange: hashKeyRange(0n, MAX_HASH_KEY),
  streamIdentifier: '123456789012:orders:1700000000',
  handoff: { from: 'worker-✓', to: 'worker-b', deadline: new Date('2030-01-02T03:04:05.678Z') },
});

function row(overrides: Record<string, unknown>): SqlRow {
  return { ...leaseToRowValues('app', full), ...overrides };
}

function dataErrorOf(candidate: SqlRow): LeaseDataError {
  try {
    leaseFromRow(candidate, STORE);
  } catch (error) {
    expect(LeaseDataError.is(error)).toBe(true);
    return error as LeaseDataError;
  }
  throw new Error('the row was accepted');
}

describe('lease rows', () => {
  it('stores sequence numbers and hash keys as exact decimal text and shard ids as sorted JSON', () => {
    const values = leaseToRowValues('app', full);
    expect(values).toMatchObject({
      application_name: 'app',
      checkpoint_sequence_number: LONG,
      checkpoint_sub_sequence_number: 7,
      pending_checkpoint_sequence_number: '9'.repeat(129),
      parent_shard_ids: '["a","b"]',
      child_shard_ids: '["c"]',
      hash_key_range_start: '0',
      hash_key_range_end: '340282366920938463463374607431768211455',
      stream_identifier: '123456789012:orders:1700000000',
      handoff_from: 'worker-✓',
      handoff_to: 'worker-b',
      handoff_deadline_ms: Date.UTC(2030, 0, 2, 3, 4, 5, 678),
    });
  });

  it('reads a hand-off without a deadline, with the deadline as a decimal string (pg), and none at all', () => {
    expect(leaseFromRow(row({ handoff_deadline_ms: null }), STORE).handoff).toEqual({
      from: 'worker-✓',
      to: 'worker-b',
      deadline: null,
    });
    expect(leaseFromRow(row({ handoff_deadline_ms: '1893553445678' }), STORE).handoff?.deadline).toEqual(
      new Date(1_893_553_445_678),
    );
    const none = leaseFromRow(
      row({ handoff_from: null, handoff_to: null, handoff_deadline_ms: null, stream_identifier: null }),
      STORE,
    );
    expect([none.handoff, none.streamIdentifier]).toEqual([null, null]);
  });

  it('tells a readable row from an unreadable one without throwing (what a scan needs)', () => {
    const readable = readLeaseRow(row({}));
    expect(readable.ok && leasesEqual(readable.lease, full)).toBe(true);
    expect(readLeaseRow(row({ parent_shard_ids: '[' }))).toEqual({
      ok: false,
      leaseKey: "shard'; --",
      problem: 'parent_shard_ids is not JSON: "["',
      cause: expect.any(SyntaxError),
    });
    expect(readLeaseRow(row({ lease_key: 42 }))).toMatchObject({ ok: false, leaseKey: '42' });
  });

  it('reads back what it writes, with counters as numbers, decimal strings or bigints', () => {
    expect(leasesEqual(leaseFromRow(row({}), STORE), full)).toBe(true);
    const asStrings = row({ lease_counter: '9007199254740991', owner_switches_since_checkpoint: '3' });
    expect(leaseFromRow(asStrings, STORE).leaseCounter).toBe(9_007_199_254_740_991);
    expect(
      leaseFromRow(row({ checkpoint_sub_sequence_number: 7n }), STORE).checkpoint.subSequenceNumber,
    ).toBe(7);
  });

  it('reads a free lease without pending checkpoint or hash range', () => {
    const free = leaseFromInit({ leaseKey: 'k', checkpoint: ExtendedSequenceNumber.TRIM_HORIZON });
    const read = leaseFromRow(leaseToRowValues('app', free), STORE);
    expect(leasesEqual(read, free)).toBe(true);
    expect([
      read.owner,
      read.pendingCheckpoint,
      read.hashKeyRange,
      read.streamIdentifier,
      read.handoff,
    ]).toEqual([null, null, null, null, null]);
  });

  it.each<[string, Record<string, unknown>, RegExp]>([
    [
      'a checkpoint that is not a position',
      { checkpoint_sequence_number: 'not-a-number' },
      /checkpoint "not-a-number"/,
    ],
    ['a negative sub-sequence number', { checkpoint_sub_sequence_number: -1 }, /checkpoint/],
    [
      'a pending checkpoint that is not a position',
      { pending_checkpoint_sequence_number: '12x' },
      /pending checkpoint/,
    ],
    ['a counter beyond 2^53', { lease_counter: '9007199254740993' }, /lease_counter is "9007199254740993"/],
    ['a fractional counter', { lease_counter: 1.5 }, /lease_counter is 1.5/],
    ['a NULL counter', { lease_counter: null }, /lease_counter is NULL/],
    ['parent ids that are not JSON', { parent_shard_ids: '[shardId-1' }, /parent_shard_ids is not JSON/],
    [
      'child ids that are not an array of strings',
      { child_shard_ids: '[1,2]' },
      /child_shard_ids is not a JSON array/,
    ],
    ['half a hash range', { hash_key_range_end: null }, /both or neither/],
    ['a hash key beyond 2^128', { hash_key_range_end: `${MAX_HASH_KEY + 1n}` }, /hash key range/],
    ['an owner that is not text', { lease_owner: 42 }, /lease_owner is 42/],
    ['a stream identifier that is not text', { stream_identifier: 7 }, /stream_identifier is 7/],
    ['a hand-off without its target', { handoff_to: null }, /handoff_from and handoff_to must both be set/],
    [
      'a hand-off deadline without a hand-off',
      { handoff_from: null, handoff_to: null },
      /from NULL to NULL \(deadline 1893553445678\)/,
    ],
    [
      'a hand-off deadline that is not a time',
      { handoff_deadline_ms: 'soon' },
      /handoff_deadline_ms is "soon"/,
    ],
    [
      'a hand-off deadline beyond any date',
      { handoff_deadline_ms: 9e15 },
      /handoff_deadline_ms is 9000000000000000/,
    ],
  ])('refuses %s, naming the lease key', (_label, overrides, problem) => {
    const error = dataErrorOf(row(overrides));
    expect(error.leaseKey).toBe("shard'; --");
    expect(error.code).toBe('LEASE_DATA_INVALID');
    expect(error.retryable).toBe(false);
    expect(error.message).toContain(`lease "shard'; --" cannot be read`);
    expect(error.message).toMatch(problem);
  });

  it('refuses a row without a text key', () => {
    expect(() => leaseFromRow(row({ lease_key: null }), STORE)).toThrow(
      /a lease row has a lease_key that is not text \(NULL\)/,
    );
  });
});

describe('worker and marker rows', () => {
  it('reads a worker with its metadata', () => {
    const worker = workerFromRow(
      { worker_id: 'w', heartbeat: '3', last_heartbeat_at_ms: 1_700_000_000_000, metadata: '{"host":"h"}' },
      STORE,
    );
    expect(worker).toEqual({
      workerId: 'w',
      heartbeat: 3,
      lastHeartbeatAt: new Date(1_700_000_000_000),
      metadata: { host: 'h' },
    });
  });

  it.each([
    ['metadata that is not JSON', { metadata: '{' }, /metadata is not JSON/],
    ['metadata with a number', { metadata: '{"pid":42}' }, /not a JSON object of strings/],
    ['a negative heartbeat', { heartbeat: -1 }, /heartbeat is -1/],
  ])('refuses a worker row with %s', (_label, overrides, problem) => {
    const candidate = { worker_id: 'w', heartbeat: 1, last_heartbeat_at_ms: 0, metadata: '{}', ...overrides };
    expect(() => workerFromRow(candidate, STORE)).toThrow(problem);
    expect(() => workerFromRow(candidate, STORE)).toThrow(/worker "w" cannot be read/);
  });

  it('reads a marker, and no marker from cleared columns', () => {
    expect(migrationMarkerFromRow({ migrated_to: 'dynamo', migrated_at_ms: '0' }, STORE)).toEqual({
      migratedTo: 'dynamo',
      migratedAt: new Date(0),
    });
    expect(migrationMarkerFromRow({ migrated_to: null, migrated_at_ms: null }, STORE)).toBeNull();
    expect(() => migrationMarkerFromRow({ migrated_to: 'x', migrated_at_ms: 'soon' }, STORE)).toThrow(
      /migrated_at_ms is "soon"/,
    );
  });
});
