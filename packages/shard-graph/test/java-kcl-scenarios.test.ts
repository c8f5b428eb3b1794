/**
 * The Java KCL's own shard-sync scenarios, run against kcl's planners.
 *
 * Source: github.com/awslabs/amazon-kinesis-client, commit 024eb86e2163a3d211cacf21f44f5411b6c41c53,
 * amazon-kinesis-client/src/test/java/software/amazon/kinesis/…
 * - leases/HierarchicalShardSyncerTest.java      → planInitialLeases, planMissingLeases, shardFilterFor
 * - lifecycle/ShutdownTaskTest.java              → planShardEnd
 * - leases/LeaseCleanupManagerTest.java          → checkLeaseDeletable, findDeletableLeases
 * - lifecycle/BlockOnParentShardTaskTest.java    → checkParentReadiness
 * - coordinator/PeriodicShardSyncManagerTest.java → auditHashRangeCoverage, HashRangeAuditor
 *
 * Every test names the Java test method it comes from, and expects what the Java test expects. The
 * shard graphs are written out as data below. Where kcl differs on purpose, the test asserts kcl's
 * behaviour and a `DIFFERENCE:` comment says how and why (the README lists them all). Java tests that
 * only check I/O, retries, metrics or mocks (which API was called, how often) have no counterpart in
 * pure planners and are not ported; the README names them.
 *
 * Java distinguishes an empty lease table (EmptyLeaseTableSynchronizer, fed by a filtered listing) from
 * a non-empty one (NonEmptyLeaseTableSynchronizer, fed by the whole listing). Many Java tests reach the
 * non-empty rules with no leases at all, because their mocked `isLeaseTableEmpty()` answers false;
 * those are ported to `planMissingLeases` with no leases, which is what they exercise.
 */
import type { HashKeyRange, Lease, LeaseInit } from '@kcl/core';
import { ExtendedSequenceNumber, hashKeyRange, leaseFromInit, MAX_HASH_KEY, seededRandom } from '@kcl/core';
import { describe, expect, it } from 'vitest';
import type { AuditedLease, ChildShardDescription, InitialPosition, ShardDescription } from '../src/index.js';
import {
  auditHashRangeCoverage,
  checkLeaseDeletable,
  checkParentReadiness,
  childShardFromKinesis,
  findDeletableLeases,
  HashRangeAuditor,
  leaseLookupOf,
  planInitialLeases,
  planMissingLeases,
  planShardEnd,
  ShardDescriptionError,
  shardFilterFor,
} from '../src/index.js';

// ── shard graphs ─────────────────────────────────────────────────────────────────────────────────

/**
 * One shard as a row: number (id `shardId-<n>`), parent, adjacent parent, starting and ending sequence
 * number (null while open), first and last hash key. The Java graphs use small sequence numbers that
 * its ListShards stand-in also reads as timestamps (epoch milliseconds).
 */
type ShardRow = readonly [
  shard: number,
  parent: number | null,
  adjacentParent: number | null,
  start: number,
  end: number | null,
  firstHashKey: bigint,
  lastHashKey: bigint,
];

const MAX = MAX_HASH_KEY;

function shardId(shard: number): string {
  return `shardId-${shard}`;
}

function shardsOf(rows: readonly ShardRow[]): ShardDescription[] {
  return rows.map(([shard, parent, adjacentParent, start, end, first, last]) => ({
    shardId: shardId(shard),
    parentShardId: parent === null ? undefined : shardId(parent),
    adjacentParentShardId: adjacentParent === null ? undefined : shardId(adjacentParent),
    hashKeyRange: hashKeyRange(first, last),
    startingSequenceNumber: String(start),
    endingSequenceNumber: end === null ? undefined : String(end),
  }));
}

/**
 * Java's SHARD_GRAPH_A (y-axis is time):
 * ```
 * 0 1 2 3 4   5     shards 0-3 end at 102; 5 ends at 205; 4 stays open
 * \ / \ / |   |
 *  6   7  4   5     6 = merge(0, 1), 7 = merge(2, 3): 103-205
 *   \ /   |  / \
 *    8    4 9  10   8 = merge(6, 7); 9, 10 = split(5): open from 206
 * ```
 * Shard 10 names 5 as its *adjacent* parent only, as in the Java graph.
 */
const GRAPH_A_ROWS: readonly ShardRow[] = [
  [0, null, null, 11, 102, 0n, 99n],
  [1, null, null, 11, 102, 100n, 199n],
  [2, null, null, 11, 102, 200n, 299n],
  [3, null, null, 11, 102, 300n, 399n],
  [4, null, null, 11, null, 400n, 499n],
  [5, null, null, 11, 205, 500n, MAX],
  [6, 0, 1, 103, 205, 0n, 199n],
  [7, 2, 3, 103, 205, 200n, 399n],
  [8, 6, 7, 206, null, 0n, 399n],
  [9, 5, null, 206, null, 500n, 799n],
  [10, null, 5, 206, null, 800n, MAX],
];
const GRAPH_A = shardsOf(GRAPH_A_ROWS);

/**
 * Java's SHARD_GRAPH_B (x-axis is time): the whole key space merged and split over and over.
 * ```
 * 0  3   6   9
 *  \/ \ / \ /
 *  2   5   8         2 = merge(0, 1), 3, 4 = split(2), 5 = merge(3, 4), …
 *  /\ / \ / \
 * 1  4   7  10       9, 10 = split(8) are open
 * ```
 */
const LOW = [0n, 499n] as const;
const HIGH = [500n, MAX] as const;
const ALL = [0n, MAX] as const;
const GRAPH_B = shardsOf([
  [0, null, null, 1000, 1049, ...LOW],
  [1, null, null, 1000, 1049, ...HIGH],
  [2, 0, 1, 1050, 1099, ...ALL],
  [3, 2, null, 1100, 1149, ...LOW],
  [4, 2, null, 1100, 1149, ...HIGH],
  [5, 3, 4, 1150, 1199, ...ALL],
  [6, 5, null, 1200, 1249, ...LOW],
  [7, 5, null, 1200, 1249, ...HIGH],
  [8, 6, 7, 1250, 1299, ...ALL],
  [9, 8, null, 1300, null, ...LOW],
  [10, null, 8, 1300, null, ...HIGH],
]);

/**
 * Java's SHARD_GRAPH_C (y-axis is time):
 * ```
 *      0      1  2  3     0, 2, 3 end at 102; 1 stays open
 *    /   \    |  \ /
 *   4     5   1   6       4, 5 = split(0): 103-205; 6 = merge(2, 3): open from 103
 *  / \   / \  |   |
 * 7   8 9  10 1   6       7, 8 = split(4); 9, 10 = split(5): open from 206
 * ```
 */
const GRAPH_C = shardsOf([
  [0, null, null, 11, 102, 0n, 399n],
  [1, null, null, 11, null, 400n, 499n],
  [2, null, null, 11, 102, 500n, 599n],
  [3, null, null, 11, 102, 600n, MAX],
  [4, 0, null, 103, 205, 0n, 199n],
  [5, 0, null, 103, 205, 200n, 399n],
  [6, 2, 3, 103, null, 500n, MAX],
  [7, 4, null, 206, null, 0n, 99n],
  [8, 4, null, 206, null, 100n, 199n],
  [9, 5, null, 206, null, 200n, 299n],
  [10, 5, null, 206, null, 300n, 399n],
]);

const GRAPHS = { A: GRAPH_A, B: GRAPH_B, C: GRAPH_C } as const;

/** Graph A with one shard's ending sequence number removed (reopened). */
function graphAWithOpen(shard: number): ShardDescription[] {
  return GRAPH_A.map((description) =>
    description.shardId === shardId(shard)
      ? { ...description, endingSequenceNumber: undefined }
      : description,
  );
}

// ── positions, listings and helpers ──────────────────────────────────────────────────────────────

const STREAM = '123456789012:stream:1';
const AT_TIMESTAMP_1000: InitialPosition = { timestamp: new Date(1000) };
const AT_TIMESTAMP_200: InitialPosition = { timestamp: new Date(200) };

/**
 * What ListShards returns with the ShardFilter of an initial position, the way the Java test's
 * `getFilteredShards` imitates it: LATEST lists the open shards, TRIM_HORIZON the oldest generation,
 * AT_TIMESTAMP the shards alive at that moment (sequence numbers read as epoch milliseconds).
 */
function listAtInitialPosition(
  shards: readonly ShardDescription[],
  position: InitialPosition,
): ShardDescription[] {
  if (position === 'LATEST') return shards.filter((shard) => shard.endingSequenceNumber === undefined);
  if (position === 'TRIM_HORIZON') {
    let oldest: bigint | undefined;
    for (const shard of shards) {
      const start = BigInt(shard.startingSequenceNumber);
      if (oldest === undefined || start < oldest) oldest = start;
    }
    return shards.filter((shard) => BigInt(shard.startingSequenceNumber) === oldest);
  }
  const at = BigInt(position.timestamp.getTime());
  return shards.filter(
    (shard) =>
      BigInt(shard.startingSequenceNumber) <= at &&
      (shard.endingSequenceNumber === undefined || BigInt(shard.endingSequenceNumber) > at),
  );
}

/** `{ leaseKey: checkpoint }` of planned leases: the Java tests compare sets, not order. */
function checkpointsByKey(leases: readonly LeaseInit[]): Record<string, string> {
  return Object.fromEntries(leases.map((init) => [init.leaseKey, init.checkpoint.toString()]));
}

/** The expected `{ leaseKey: checkpoint }` for shard numbers that all get one checkpoint. */
function expectAll(shards: readonly number[], checkpoint: string, stream?: string): Record<string, string> {
  return Object.fromEntries(shards.map((shard) => [keyOf(shard, stream), checkpoint]));
}

function keyOf(shard: number | string, stream?: string): string {
  const id = typeof shard === 'number' ? shardId(shard) : shard;
  return stream === undefined ? id : `${stream}:${id}`;
}

function leaseKeys(shards: readonly number[], stream?: string): Array<Pick<Lease, 'leaseKey'>> {
  return shards.map((shard) => ({ leaseKey: keyOf(shard, stream) }));
}

function initialPlan(shards: readonly ShardDescription[], position: InitialPosition, stream?: string) {
  const plan = planInitialLeases(shards, {
    initialPosition: position,
    ...(stream === undefined ? {} : { streamIdentifier: stream }),
  });
  if (!plan.ok) throw new Error(plan.message);
  return plan.leases;
}

function missingPlan(
  shards: readonly ShardDescription[],
  leased: readonly number[],
  position: InitialPosition,
  options: { stream?: string; ignoreUnexpectedChildShards?: boolean } = {},
) {
  const plan = planMissingLeases(shards, leaseKeys(leased, options.stream), {
    initialPosition: position,
    ...(options.stream === undefined ? {} : { streamIdentifier: options.stream }),
    ...(options.ignoreUnexpectedChildShards === undefined
      ? {}
      : { ignoreUnexpectedChildShards: options.ignoreUnexpectedChildShards }),
  });
  if (!plan.ok) throw new Error(plan.message);
  return plan;
}

/** The title of a scenario: the Java test method in full, then what it shows. */
function titleOf<Row extends { readonly java: string }>(
  row: Row,
  title: string | ((row: Row) => string),
): string {
  const text = typeof title === 'string' ? title : title(row);
  return text === '' ? row.java : `${row.java}: ${text}`;
}

/** One test per row, like `it.each`, whose `$java` titles vitest would cut short. */
function scenarios<Row extends { readonly java: string }>(
  rows: readonly Row[],
  title: string | ((row: Row) => string),
  body: (row: Row) => void,
): void {
  for (const row of rows) it(titleOf(row, title), () => body(row));
}

/** One `describe` per row, titled with the Java test method in full. */
function describeScenarios<Row extends { readonly java: string }>(
  rows: readonly Row[],
  title: string,
  body: (row: Row) => void,
): void {
  for (const row of rows) describe(titleOf(row, title), () => body(row));
}

/** A lease with the fields the lifecycle rules read. */
function lease(
  leaseKey: string,
  checkpoint: string,
  relations: { parents?: readonly string[]; children?: readonly string[]; range?: HashKeyRange | null } = {},
): Lease {
  return leaseFromInit({
    leaseKey,
    checkpoint: ExtendedSequenceNumber.of(checkpoint),
    parentShardIds: relations.parents ?? [],
    childShardIds: relations.children ?? [],
    hashKeyRange: relations.range ?? null,
  });
}

// ── HierarchicalShardSyncerTest: empty lease table ───────────────────────────────────────────────

describe('HierarchicalShardSyncerTest, empty lease table → planInitialLeases', () => {
  // Two open shards that together cover the key space. The Java unit tests of the lease choice
  // (testDetermineNewLeasesToCreate0Leases0Reshards*, …StartingPosition) give both shards the
  // default range 1-100, because their call skips the coverage check that Java runs on the listing
  // (isHashRangeOfShardsComplete); kcl checks coverage inside the planner, so the topology here
  // covers the key space. The literal Java ranges are refused by both, see the test below.
  const twoOpenShards = shardsOf([
    [0, null, null, 342980, null, 0n, 1n],
    [1, null, null, 342980, null, 2n, MAX],
  ]);

  scenarios(
    [
      { java: 'testDetermineNewLeasesToCreate0Leases0Reshards', position: 'LATEST', stream: undefined },
      {
        java: 'testDetermineNewLeasesToCreate0Leases0ReshardsForMultiStream',
        position: 'LATEST',
        stream: STREAM,
      },
      {
        java: 'testDetermineNewLeasesToCreateStartingPosition (LATEST)',
        position: 'LATEST',
        stream: undefined,
      },
      {
        java: 'testDetermineNewLeasesToCreateStartingPosition (TRIM_HORIZON)',
        position: 'TRIM_HORIZON',
        stream: undefined,
      },
      { java: 'testBootstrapShardLeasesAtLatest', position: 'LATEST', stream: undefined },
      { java: 'testBootstrapShardLeasesAtTrimHorizon', position: 'TRIM_HORIZON', stream: undefined },
    ] as const,
    'both shards at the position sentinel',
    ({ position, stream }) => {
      const leases = initialPlan(listAtInitialPosition(twoOpenShards, position), position, stream);
      expect(checkpointsByKey(leases)).toEqual(expectAll([0, 1], position, stream));
    },
  );

  it('testDetermineNewLeasesToCreate0Leases0Reshards with its literal ranges (both 1-100): refused, as the Java listing check refuses them', () => {
    const literal = twoOpenShards.map((shard) => ({ ...shard, hashKeyRange: hashKeyRange(1n, 100n) }));
    expect(planInitialLeases(literal, { initialPosition: 'LATEST' })).toMatchObject({
      ok: false,
      reason: 'incomplete-hash-range',
    });
  });

  scenarios(
    [
      { java: 'testDetermineNewLeasesToCreateNoShards', stream: undefined },
      { java: 'testDetermineNewLeasesToCreateNoShardsForMultiStream', stream: STREAM },
    ],
    'no shards, no leases',
    ({ stream }) => {
      // DIFFERENCE (form only): Java's lease choice returns an empty list and its sync returns false
      // ("no shards found"); kcl returns ok: false with nothing to create, so the caller lists again.
      const plan = planInitialLeases([], {
        initialPosition: 'LATEST',
        ...(stream === undefined ? {} : { streamIdentifier: stream }),
      });
      expect(plan).toMatchObject({ ok: false, reason: 'no-shards' });
      expect('leases' in plan).toBe(false);
    },
  );

  scenarios(
    [
      {
        java: 'testCheckAndCreateLeasesForNewShardsAtTrimHorizonWithEmptyLeaseTable',
        position: 'TRIM_HORIZON',
        expected: expectAll([0, 1, 2, 3, 4, 5], 'TRIM_HORIZON'),
      },
      {
        java: 'testCheckAndCreateLeasesForNewShardsAtTimestampWithEmptyLeaseTable1',
        position: AT_TIMESTAMP_1000,
        expected: expectAll([8, 4, 9, 10], 'AT_TIMESTAMP'),
      },
      {
        java: 'testCheckAndCreateLeasesForNewShardsAtTimestampWithEmptyLeaseTable2',
        position: AT_TIMESTAMP_200,
        expected: expectAll([6, 7, 4, 5], 'AT_TIMESTAMP'),
      },
      {
        java: 'testCheckAndCreateLeasesForNewShardsAtLatestWithEmptyLeaseTable',
        position: 'LATEST',
        expected: expectAll([8, 4, 9, 10], 'LATEST'),
      },
    ] as const,
    'graph A listed with the position filter',
    ({ position, expected }) => {
      const leases = initialPlan(listAtInitialPosition(GRAPH_A, position), position);
      expect(checkpointsByKey(leases)).toEqual(expected);
      // Every lease carries its shard's parents and hash range (Java's validateHashRangeInLease and
      // newKCLLease), and leases come in starting-sequence order.
      for (const init of leases) {
        const shard = GRAPH_A.find((candidate) => candidate.shardId === init.leaseKey) as ShardDescription;
        expect(init.hashKeyRange).toEqual(shard.hashKeyRange);
        expect(init.parentShardIds).toEqual(
          [shard.parentShardId, shard.adjacentParentShardId].filter((id) => id !== undefined),
        );
      }
      const starts = leases.map((init) =>
        BigInt(GRAPH_A.find((shard) => shard.shardId === init.leaseKey)?.startingSequenceNumber as string),
      );
      expect([...starts].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))).toEqual(starts);
    },
  );

  scenarios(
    [
      {
        java: 'testEmptyLeaseTableBootstrapUsesShardFilterWithAtLatest',
        position: 'LATEST',
        filter: { Type: 'AT_LATEST' },
      },
      {
        java: 'testEmptyLeaseTableBootstrapUsesShardFilterWithAtTrimHorizon',
        position: 'TRIM_HORIZON',
        filter: { Type: 'AT_TRIM_HORIZON' },
      },
      {
        java: 'testEmptyLeaseTableBootstrapUsesShardFilterWithAtTimestamp',
        position: AT_TIMESTAMP_1000,
        filter: { Type: 'AT_TIMESTAMP', Timestamp: new Date(1000) },
      },
    ] as const,
    'the listing filter of the position',
    ({ position, filter }) => {
      expect(shardFilterFor(position)).toEqual(filter);
    },
  );

  it('testEmptyLeaseTableThrowsExceptionWhenHashRangeIsStillIncompleteAfterRetries: a listing with a hole is refused', () => {
    const holed = shardsOf([
      [0, null, null, 1, 2, 0n, 1n],
      [1, null, null, 1, 2, 2n, 3n],
    ]);
    expect(planInitialLeases(holed, { initialPosition: 'LATEST' })).toMatchObject({
      ok: false,
      reason: 'incomplete-hash-range',
      coverage: { holes: [hashKeyRange(4n, MAX)] },
    });
  });

  it('testEmptyLeaseTablePopulatesLeasesWithCompleteHashRangeAfterTwoRetries: refused while holed, two leases once complete', () => {
    const holed = shardsOf([
      [0, null, null, 1, 2, 0n, 69n],
      [1, null, null, 1, 2, 71n, MAX],
    ]);
    const complete = shardsOf([
      [2, null, null, 1, 2, 0n, 420n],
      [3, null, null, 1, 2, 421n, MAX],
    ]);
    // The caller lists again on `ok: false` (three attempts a second apart, as in Java).
    for (let attempt = 1; attempt <= 2; attempt++) {
      expect(planInitialLeases(holed, { initialPosition: 'LATEST' })).toMatchObject({
        ok: false,
        coverage: { holes: [hashKeyRange(70n, 70n)] },
      });
    }
    expect(checkpointsByKey(initialPlan(complete, 'LATEST'))).toEqual(expectAll([2, 3], 'LATEST'));
  });

  it('testEmptyLeaseTablePopulatesLeasesWithCompleteHashRange: two leases', () => {
    const complete = shardsOf([
      [2, null, null, 1, 2, 0n, 420n],
      [3, null, null, 1, 2, 421n, MAX],
    ]);
    expect(initialPlan(complete, 'LATEST')).toHaveLength(2);
  });

  it('DIFFERENCE (no Java test; Java source isHashRangeOfShardsComplete): overlapping shards are accepted', () => {
    // Java requires the listed ranges to be exactly adjacent, so an emulator that ignores the
    // ShardFilter and returns the whole history (parents overlapping their children) never bootstraps.
    // kcl only requires the union to cover the key space; children wait for their listed parents.
    const leases = initialPlan(GRAPH_A, 'TRIM_HORIZON');
    expect(leases).toHaveLength(GRAPH_A.length);
    expect(leases.every((init) => init.checkpoint.equals(ExtendedSequenceNumber.TRIM_HORIZON))).toBe(true);
  });
});

// ── HierarchicalShardSyncerTest: non-empty lease table ───────────────────────────────────────────

describe('HierarchicalShardSyncerTest, non-empty lease table → planMissingLeases', () => {
  /**
   * The `testDetermineNewLeasesToCreateSplitMerge*` family: graph, shards with leases, position →
   * the leases to create with their checkpoints (Java's `expectedShardIdCheckpointMap`).
   */
  const SPLIT_MERGE: ReadonlyArray<{
    java: string;
    graph: keyof typeof GRAPHS;
    leased: readonly number[];
    position: InitialPosition;
    expected: Record<string, string>;
  }> = [
    // LATEST
    {
      java: 'testDetermineNewLeasesToCreateSplitMergeLatestA_PartialHashRange1',
      graph: 'A',
      leased: [3, 4, 5],
      position: 'LATEST',
      expected: expectAll([2, 6], 'LATEST'),
    },
    {
      java: 'testDetermineNewLeasesToCreateSplitMergeLatestA_PartialHashRange2',
      graph: 'A',
      leased: [4, 5, 7],
      position: 'LATEST',
      expected: expectAll([6], 'LATEST'),
    },
    {
      java: 'testDetermineNewLeasesToCreateSplitMergeLatestA_PartialHashRange3',
      graph: 'A',
      leased: [2, 6],
      position: 'LATEST',
      expected: expectAll([3, 4, 9, 10], 'LATEST'),
    },
    {
      java: 'testDetermineNewLeasesToCreateSplitMergeLatestA_PartialHashRange4',
      graph: 'A',
      leased: [4, 9, 10],
      position: 'LATEST',
      expected: expectAll([8], 'LATEST'),
    },
    {
      java: 'testDetermineNewLeasesToCreateSplitMergeLatestC_PartialHashRange5',
      graph: 'C',
      leased: [9, 10],
      position: 'LATEST',
      expected: expectAll([1, 6, 7, 8], 'LATEST'),
    },
    {
      java: 'testDetermineNewLeasesToCreateSplitMergeLatestA_CompleteHashRange',
      graph: 'A',
      leased: [4, 5, 6, 7],
      position: 'LATEST',
      expected: {},
    },
    {
      java: 'testDetermineNewLeasesToCreateSplitMergeLatestA_CompleteHashRangeWithoutGC',
      graph: 'A',
      leased: [0, 1, 2, 3, 4, 5, 6, 7],
      position: 'LATEST',
      expected: {},
    },
    {
      java: 'testDetermineNewLeasesToCreateSplitMergeLatestA_EmptyLeaseTable',
      graph: 'A',
      leased: [],
      position: 'LATEST',
      expected: expectAll([4, 8, 9, 10], 'LATEST'),
    },
    {
      java: 'testDetermineNewLeasesToCreateSplitMergeLatestA_CompleteHashRangeAcrossDifferentEpochs',
      graph: 'A',
      leased: [0, 1, 4, 7, 9, 10],
      position: 'LATEST',
      expected: {},
    },
    {
      java: 'testDetermineNewLeasesToCreateSplitMergeLatestB_PartialHashRange',
      graph: 'B',
      leased: [6],
      position: 'LATEST',
      expected: expectAll([7], 'LATEST'),
    },
    {
      java: 'testDetermineNewLeasesToCreateSplitMergeLatestB_CompleteHashRange',
      graph: 'B',
      leased: [5],
      position: 'LATEST',
      expected: {},
    },
    {
      java: 'testDetermineNewLeasesToCreateSplitMergeLatestB_CompleteHashRangeWithoutGC',
      graph: 'B',
      leased: [0, 1, 2, 3, 4, 5],
      position: 'LATEST',
      expected: {},
    },
    {
      java: 'testDetermineNewLeasesToCreateSplitMergeLatestB_EmptyLeaseTable',
      graph: 'B',
      leased: [],
      position: 'LATEST',
      expected: expectAll([9, 10], 'LATEST'),
    },
    // TRIM_HORIZON
    {
      java: 'testDetermineNewLeasesToCreateSplitMergeHorizonA_PartialHashRange1',
      graph: 'A',
      leased: [3, 4, 5],
      position: 'TRIM_HORIZON',
      expected: expectAll([0, 1, 2], 'TRIM_HORIZON'),
    },
    {
      java: 'testDetermineNewLeasesToCreateSplitMergeHorizonA_PartialHashRange2',
      graph: 'A',
      leased: [4, 5, 7],
      position: 'TRIM_HORIZON',
      expected: expectAll([0, 1], 'TRIM_HORIZON'),
    },
    {
      java: 'testDetermineNewLeasesToCreateSplitMergeHorizonA_PartialHashRange3',
      graph: 'A',
      leased: [2, 6],
      position: 'TRIM_HORIZON',
      expected: expectAll([3, 4, 5], 'TRIM_HORIZON'),
    },
    {
      java: 'testDetermineNewLeasesToCreateSplitMergeHorizonA_PartialHashRange4',
      graph: 'A',
      leased: [4, 9, 10],
      position: 'TRIM_HORIZON',
      expected: expectAll([0, 1, 2, 3], 'TRIM_HORIZON'),
    },
    {
      java: 'testDetermineNewLeasesToCreateSplitMergeHorizonA_CompleteHashRange',
      graph: 'A',
      leased: [4, 5, 6, 7],
      position: 'TRIM_HORIZON',
      expected: {},
    },
    {
      java: 'testDetermineNewLeasesToCreateSplitMergeHorizonA_CompleteHashRangeWithoutGC',
      graph: 'A',
      leased: [0, 1, 2, 3, 4, 5, 6, 7],
      position: 'TRIM_HORIZON',
      expected: {},
    },
    {
      java: 'testDetermineNewLeasesToCreateSplitMergeHorizonA_EmptyLeaseTable',
      graph: 'A',
      leased: [],
      position: 'TRIM_HORIZON',
      expected: expectAll([0, 1, 2, 3, 4, 5], 'TRIM_HORIZON'),
    },
    {
      java: 'testDetermineNewLeasesToCreateSplitMergeHorizonA_CompleteHashRangeAcrossDifferentEpochs',
      graph: 'A',
      leased: [0, 1, 4, 7, 9, 10],
      position: 'TRIM_HORIZON',
      expected: {},
    },
    {
      java: 'testDetermineNewLeasesToCreateSplitMergeHorizonB_CompleteHashRange',
      graph: 'B',
      leased: [5],
      position: 'TRIM_HORIZON',
      expected: {},
    },
    {
      java: 'testDetermineNewLeasesToCreateSplitMergeHorizonB_CompleteHashRangeWithoutGC',
      graph: 'B',
      leased: [0, 1, 2, 3, 4, 5],
      position: 'TRIM_HORIZON',
      expected: {},
    },
    {
      java: 'testDetermineNewLeasesToCreateSplitMergeHorizonB_EmptyLeaseTable',
      graph: 'B',
      leased: [],
      position: 'TRIM_HORIZON',
      expected: expectAll([0, 1], 'TRIM_HORIZON'),
    },
    // AT_TIMESTAMP(1000)
    {
      java: 'testDetermineNewLeasesToCreateSplitMergeAtTimestampA_PartialHashRange1',
      graph: 'A',
      leased: [3, 4, 5],
      position: AT_TIMESTAMP_1000,
      expected: expectAll([0, 1, 2], 'AT_TIMESTAMP'),
    },
    {
      java: 'testDetermineNewLeasesToCreateSplitMergeAtTimestampA_PartialHashRange2',
      graph: 'A',
      leased: [4, 5, 7],
      position: AT_TIMESTAMP_1000,
      expected: expectAll([0, 1], 'AT_TIMESTAMP'),
    },
    {
      java: 'testDetermineNewLeasesToCreateSplitMergeAtTimestampA_PartialHashRange3',
      graph: 'A',
      leased: [2, 6],
      position: AT_TIMESTAMP_1000,
      expected: expectAll([3, 4, 5], 'AT_TIMESTAMP'),
    },
    {
      java: 'testDetermineNewLeasesToCreateSplitMergeAtTimestampA_PartialHashRange4',
      graph: 'A',
      leased: [4, 9, 10],
      position: AT_TIMESTAMP_1000,
      expected: expectAll([0, 1, 2, 3], 'AT_TIMESTAMP'),
    },
    {
      java: 'testDetermineNewLeasesToCreateSplitMergeAtTimestampA_CompleteHashRange',
      graph: 'A',
      leased: [4, 5, 6, 7],
      position: AT_TIMESTAMP_1000,
      expected: {},
    },
    {
      java: 'testDetermineNewLeasesToCreateSplitMergeAtTimestampA_CompleteHashRangeWithoutGC',
      graph: 'A',
      leased: [0, 1, 2, 3, 4, 5, 6, 7],
      position: AT_TIMESTAMP_1000,
      expected: {},
    },
    {
      java: 'testDetermineNewLeasesToCreateSplitMergeAtTimestampA_EmptyLeaseTable',
      graph: 'A',
      leased: [],
      position: AT_TIMESTAMP_1000,
      expected: expectAll([0, 1, 2, 3, 4, 5], 'AT_TIMESTAMP'),
    },
    {
      java: 'testDetermineNewLeasesToCreateSplitMergeAtTimestampA_CompleteHashRangeAcrossDifferentEpochs',
      graph: 'A',
      leased: [0, 1, 4, 7, 9, 10],
      position: AT_TIMESTAMP_1000,
      expected: {},
    },
    {
      java: 'testDetermineNewLeasesToCreateSplitMergeAtTimestampB_CompleteHashRange',
      graph: 'B',
      leased: [5],
      position: AT_TIMESTAMP_1000,
      expected: {},
    },
    {
      java: 'testDetermineNewLeasesToCreateSplitMergeAtTimestampB_CompleteHashRangeWithoutGC',
      graph: 'B',
      leased: [0, 1, 2, 3, 4, 5],
      position: AT_TIMESTAMP_1000,
      expected: {},
    },
    {
      java: 'testDetermineNewLeasesToCreateSplitMergeAtTimestampB_EmptyLeaseTable',
      graph: 'B',
      leased: [],
      position: AT_TIMESTAMP_1000,
      expected: expectAll([0, 1], 'AT_TIMESTAMP'),
    },
  ];

  scenarios(
    SPLIT_MERGE,
    (row) => `graph ${row.graph}, leases [${row.leased.join(', ')}]`,
    ({ graph, leased, position, expected }) => {
      const shards = GRAPHS[graph];
      const plan = missingPlan(shards, leased, position);
      expect(checkpointsByKey(plan.leases)).toEqual(expected);
      // kcl also promises the Java creation order: by starting sequence number, then shard id.
      const order = plan.leases.map(
        (init) => shards.find((shard) => shard.shardId === init.leaseKey) as ShardDescription,
      );
      expect(order.map((shard) => shard.shardId)).toEqual(
        [...order]
          .sort((a, b) => {
            const difference = BigInt(a.startingSequenceNumber) - BigInt(b.startingSequenceNumber);
            if (difference !== 0n) return difference < 0n ? -1 : 1;
            return a.shardId < b.shardId ? -1 : a.shardId > b.shardId ? 1 : 0;
          })
          .map((shard) => shard.shardId),
      );
    },
  );

  scenarios(
    [
      { java: 'testDetermineNewLeasesToCreateSplitMergeHorizonB_PartialHashRange', position: 'TRIM_HORIZON' },
      {
        java: 'testDetermineNewLeasesToCreateSplitMergeAtTimestampB_PartialHashRange',
        position: AT_TIMESTAMP_1000,
      },
    ] as const,
    '(commented out in Java) the roots 0 and 1, as the Java code itself decides',
    ({ position }) => {
      // These Java tests are disabled with "TODO: Account for out-of-order lease creation in
      // TRIM_HORIZON and AT_TIMESTAMP cases"; their expectation, (7), is not what the Java code does.
      // The Java algorithm, which kcl follows, walks from the leased 6 up to the unleased roots 0 and
      // 1 and creates those; 7 is created later, at the end of 5. Asserted here so a change to either
      // rule is noticed.
      const checkpoint = position === 'TRIM_HORIZON' ? 'TRIM_HORIZON' : 'AT_TIMESTAMP';
      expect(checkpointsByKey(missingPlan(GRAPH_B, [6], position).leases)).toEqual(
        expectAll([0, 1], checkpoint),
      );
    },
  );

  scenarios(
    [
      { java: 'testCheckAndCreateLeasesForShardsIfMissingAtLatest', stream: undefined },
      { java: 'testCheckAndCreateLeasesForShardsIfMissingAtLatestMultiStream', stream: STREAM },
      { java: 'testCheckAndCreateLeasesForShardsWithShardList', stream: undefined },
      { java: 'testCheckAndCreateLeasesForShardsWithShardListMultiStream', stream: STREAM },
    ],
    'graph A with no leases, LATEST → the open shards at LATEST',
    ({ stream }) => {
      const plan = missingPlan(GRAPH_A, [], 'LATEST', stream === undefined ? {} : { stream });
      expect(checkpointsByKey(plan.leases)).toEqual(expectAll([4, 8, 9, 10], 'LATEST', stream));
    },
  );

  it('testCheckAndCreateLeasesForShardsWithEmptyShardList: no shards, nothing to create', () => {
    expect(missingPlan([], [], 'LATEST').leases).toEqual([]);
  });

  scenarios(
    [
      {
        java: 'testCheckAndCreateLeasesForNewShardsAtTrimHorizonWithPartialLeaseTable',
        position: 'TRIM_HORIZON',
        checkpoint: 'TRIM_HORIZON',
      },
      {
        java: 'testCheckAndCreateLeasesForNewShardsAtTimestampWithPartialLeaseTable1',
        position: AT_TIMESTAMP_1000,
        checkpoint: 'AT_TIMESTAMP',
      },
      {
        java: 'testCheckAndCreateLeasesForNewShardsAtTimestampWithPartialLeaseTable2',
        position: AT_TIMESTAMP_200,
        checkpoint: 'AT_TIMESTAMP',
      },
      {
        java: 'testCheckAndCreateLeasesForNewShardsAtLatestWithPartialLeaseTable',
        position: 'LATEST',
        checkpoint: 'LATEST',
      },
    ] as const,
    'leases of 0, 6 and 8 missing → 0 is recreated',
    ({ position, checkpoint }) => {
      const leased = [1, 2, 3, 4, 5, 7, 9, 10];
      expect(checkpointsByKey(missingPlan(GRAPH_A, leased, position).leases)).toEqual(
        expectAll([0], checkpoint),
      );
    },
  );

  scenarios(
    [
      { java: 'testCheckAndCreateLeasesForNewShardsWhenParentIsOpen', stream: undefined },
      { java: 'testCheckAndCreateLeasesForNewShardsWhenParentIsOpenForMultiStream', stream: STREAM },
    ],
    'shard 3 reopened makes its child 7 inconsistent → refused',
    ({ stream }) => {
      const plan = planMissingLeases(graphAWithOpen(3), [], {
        initialPosition: 'TRIM_HORIZON',
        ...(stream === undefined ? {} : { streamIdentifier: stream }),
      });
      expect(plan).toMatchObject({
        ok: false,
        reason: 'inconsistent-shards',
        inconsistentShardIds: ['shardId-7'],
      });
    },
  );

  scenarios(
    [
      {
        java: 'testCheckAndCreateLeasesForNewShardsWhenParentIsOpenAndIgnoringInconsistentChildren',
        stream: undefined,
      },
      {
        java: 'testCheckAndCreateLeasesForNewShardsWhenParentIsOpenAndIgnoringInconsistentChildrenMultiStream',
        stream: STREAM,
      },
    ],
    'shard 5 reopened, its children ignored → 4, 5 and 8 at LATEST',
    ({ stream }) => {
      const plan = missingPlan(graphAWithOpen(5), [], 'LATEST', {
        ignoreUnexpectedChildShards: true,
        ...(stream === undefined ? {} : { stream }),
      });
      expect(checkpointsByKey(plan.leases)).toEqual(expectAll([4, 5, 8], 'LATEST', stream));
      expect(plan.skippedShardIds).toEqual(['shardId-10', 'shardId-9']);
      // Without the option the same listing is refused.
      expect(planMissingLeases(graphAWithOpen(5), [], { initialPosition: 'LATEST' })).toMatchObject({
        ok: false,
      });
    },
  );

  scenarios(
    [
      { java: 'testDetermineNewLeasesToCreate0Leases0Reshards1Inconsistent', stream: undefined },
      { java: 'testDetermineNewLeasesToCreate0Leases0Reshards1InconsistentMultiStream', stream: STREAM },
    ],
    'the open child 2 of the open shard 1 is skipped; 0 and 1 at LATEST',
    ({ stream }) => {
      // Java passes the inconsistent ids straight to the lease choice, which is what
      // ignoreUnexpectedChildShards does in both implementations.
      const shards = shardsOf([
        [3, null, null, 342980, null, 1n, 100n],
        [0, null, null, 342980, null, 1n, 100n],
        [1, null, null, 342980, null, 1n, 100n],
        [2, 1, null, 342980, null, 1n, 100n],
      ]);
      const plan = missingPlan(shards, [3], 'LATEST', {
        ignoreUnexpectedChildShards: true,
        ...(stream ? { stream } : {}),
      });
      expect(checkpointsByKey(plan.leases)).toEqual(expectAll([0, 1], 'LATEST', stream));
      expect(plan.skippedShardIds).toEqual(['shardId-2']);
    },
  );

  it('testDetermineNewLeasesToCreateIgnoreClosedShard: only the open shard without a lease', () => {
    const shards = shardsOf([
      [2, null, null, 202, 302, 1n, 100n],
      [0, null, null, 303, 404, 1n, 100n],
      [1, null, null, 405, null, 1n, 100n],
    ]);
    expect(checkpointsByKey(missingPlan(shards, [2], 'LATEST').leases)).toEqual(expectAll([1], 'LATEST'));
  });

  describeScenarios(
    [
      {
        java: 'testCheckAndCreateLeasesForNewShardsAtTrimHorizonAndClosedShard',
        position: 'TRIM_HORIZON',
        checkpoint: 'TRIM_HORIZON',
      },
      {
        java: 'testCheckAndCreateLeasesForNewShardsAtTrimHorizonAndClosedShardWithListLeasesExceptions',
        position: 'TRIM_HORIZON',
        checkpoint: 'TRIM_HORIZON',
      },
      {
        java: 'testCheckAndCreateLeasesForNewShardsAtTrimHorizonAndClosedShardWithCreateLeaseExceptions',
        position: 'TRIM_HORIZON',
        checkpoint: 'TRIM_HORIZON',
      },
      {
        java: 'testCheckAndCreateLeasesForNewShardsAtTimestampAndClosedShard',
        position: AT_TIMESTAMP_1000,
        checkpoint: 'AT_TIMESTAMP',
      },
      {
        java: 'testCheckAndCreateLeasesForNewShardsAtTimestampAndClosedShardWithListLeasesExceptions',
        position: AT_TIMESTAMP_1000,
        checkpoint: 'AT_TIMESTAMP',
      },
      {
        java: 'testCheckAndCreateLeasesForNewShardsAtTimestampAndClosedShardWithCreateLeaseExceptions',
        position: AT_TIMESTAMP_1000,
        checkpoint: 'AT_TIMESTAMP',
      },
    ] as const,
    '',
    ({ position, checkpoint }) => {
      // The failing variants only add a DependencyException on one attempt: nothing is created then,
      // and the retry plans the same leases. A plan is a pure function of the listing and the leases,
      // so the retry here is simply the same call.
      it('first sync with no leases creates the oldest generation, with parents and hash ranges', () => {
        const expected = GRAPH_A.slice(0, 6).map(
          (shard): LeaseInit => ({
            leaseKey: shard.shardId,
            checkpoint: ExtendedSequenceNumber.of(checkpoint),
            parentShardIds: [],
            hashKeyRange: shard.hashKeyRange,
          }),
        );
        expect(missingPlan(GRAPH_A, [], position).leases).toEqual(expected);
        expect(missingPlan(GRAPH_A, [], position).leases).toEqual(expected);
      });

      it('second sync, with a lease for every shard (0 at SHARD_END, 6 checkpointed), creates nothing', () => {
        const leases = GRAPH_A.map((shard) =>
          lease(
            shard.shardId,
            shard.shardId === 'shardId-0' ? 'SHARD_END' : shard.shardId === 'shardId-6' ? '1' : checkpoint,
          ),
        );
        const plan = planMissingLeases(GRAPH_A, leases, { initialPosition: position });
        expect(plan).toEqual({ ok: true, leases: [], skippedShardIds: [] });
      });
    },
  );

  describe('checkIfDescendantAndAddNewLeasesForAncestors unit tests, through their observable result', () => {
    const parents = shardsOf([
      [100, null, null, 1, 50, 0n, 99n],
      [101, null, null, 1, 50, 100n, MAX],
    ]);
    const mergeChild = shardsOf([[102, 100, 101, 51, null, 0n, MAX]]);

    it('testCheckIfDescendantAndAddNewLeasesForAncestorsTrimmedShard: a parent missing from the listing does not make a descendant', () => {
      const orphan = shardsOf([[102, 99, null, 51, null, 0n, MAX]]);
      expect(checkpointsByKey(missingPlan(orphan, [], 'LATEST').leases)).toEqual(expectAll([102], 'LATEST'));
    });

    it('testCheckIfDescendantAndAddNewLeasesForAncestorsForShardWithCurrentLease: a leased shard needs nothing', () => {
      expect(missingPlan([...parents, ...mergeChild], [102], 'LATEST').leases).toEqual([]);
    });

    it('testCheckIfDescendantAndAddNewLeasesForAncestors2P2ANotDescendant: a merge child of unleased parents is a root at LATEST', () => {
      expect(checkpointsByKey(missingPlan([...parents, ...mergeChild], [], 'LATEST').leases)).toEqual(
        expectAll([102], 'LATEST'),
      );
    });

    it('testCheckIfDescendantAndAddNewLeasesForAncestors2P2A1PDescendant (commented out in Java): the other parent at LATEST', () => {
      // Disabled in Java but consistent with its code: one leased parent makes the child a
      // descendant, so the unleased merge partner gets a lease at the initial position.
      expect(checkpointsByKey(missingPlan([...parents, ...mergeChild], [100], 'LATEST').leases)).toEqual(
        expectAll([101], 'LATEST'),
      );
    });
  });
});

// ── ShutdownTaskTest → planShardEnd ──────────────────────────────────────────────────────────────

describe('ShutdownTaskTest → planShardEnd', () => {
  const ending = lease('shardId-0', '3298');
  const splitChildren = [
    {
      ShardId: 'ShardId-1',
      ParentShards: ['shardId-0'],
      HashKeyRange: { StartingHashKey: '0', EndingHashKey: '49' },
    },
    {
      ShardId: 'ShardId-2',
      ParentShards: ['shardId-0'],
      HashKeyRange: { StartingHashKey: '50', EndingHashKey: '99' },
    },
  ].map(childShardFromKinesis);
  const mergeChild = childShardFromKinesis({
    ShardId: 'shardId-2',
    ParentShards: ['shardId-0', 'shardId-1'],
    HashKeyRange: { StartingHashKey: '0', EndingHashKey: '49' },
  });

  it('testCallWhenTrueShardEnd: both split children created at TRIM_HORIZON and recorded on the parent', () => {
    const plan = planShardEnd({ lease: ending, childShards: splitChildren, lookup: leaseLookupOf([ending]) });
    expect(plan).toEqual({
      kind: 'proceed',
      leasesToCreate: [
        {
          leaseKey: 'ShardId-1',
          checkpoint: ExtendedSequenceNumber.TRIM_HORIZON,
          parentShardIds: ['shardId-0'],
          hashKeyRange: hashKeyRange(0n, 49n),
        },
        {
          leaseKey: 'ShardId-2',
          checkpoint: ExtendedSequenceNumber.TRIM_HORIZON,
          parentShardIds: ['shardId-0'],
          hashKeyRange: hashKeyRange(50n, 99n),
        },
      ],
      childShardIds: ['ShardId-1', 'ShardId-2'],
    });
  });

  scenarios(
    [
      { java: 'testMergeChildWhereOneParentHasLeaseAndBlockOnParent', roll: 0.5, dropLease: false },
      { java: 'testMergeChildWhereOneParentHasLeaseAndInvalidState', roll: 0, dropLease: true },
    ],
    (row) => `the merge guard blocks, dropLease ${row.dropLease}`,
    ({ roll, dropLease }) => {
      // Java rolls 1 in RETRY_RANDOM_MAX_RANGE (30): on a hit it drops the lease (InvalidStateException),
      // otherwise it keeps it and backs off (BlockedOnParentShardException). Nothing is created or recorded.
      const plan = planShardEnd({
        lease: ending,
        childShards: [mergeChild],
        lookup: leaseLookupOf([ending]),
        random: () => roll,
      });
      expect(plan).toMatchObject({
        kind: 'blocked',
        reason: 'merge-parent-lease-missing',
        childShardId: 'shardId-2',
        presentParentLeaseKey: 'shardId-0',
        missingParentLeaseKey: 'shardId-1',
        dropLease,
      });
    },
  );

  it('testMergeChildWhereBothParentsHaveLeases: the merge child is created and recorded', () => {
    const partner = lease('shardId-1', 'SHARD_END');
    const plan = planShardEnd({
      lease: ending,
      childShards: [mergeChild],
      lookup: leaseLookupOf([ending, partner]),
    });
    expect(plan).toEqual({
      kind: 'proceed',
      leasesToCreate: [
        {
          leaseKey: 'shardId-2',
          checkpoint: ExtendedSequenceNumber.TRIM_HORIZON,
          parentShardIds: ['shardId-0', 'shardId-1'],
          hashKeyRange: hashKeyRange(0n, 49n),
        },
      ],
      childShardIds: ['shardId-2'],
    });
  });

  scenarios(
    [{ java: 'testCallWhenShardNotFound' }, { java: 'testNullChildShards' }],
    'no children (deleted stream, trimmed shard) → finish with nothing to create',
    () => {
      const gone = lease('shardId-4', '3298');
      expect(planShardEnd({ lease: gone, childShards: [], lookup: leaseLookupOf([gone]) })).toEqual({
        kind: 'proceed',
        leasesToCreate: [],
        childShardIds: [],
      });
    },
  );

  it('testCallWhenCreatingNewLeasesThrows: a child without parents → no child lease, no SHARD_END', () => {
    // Java's createLeaseForChildShard throws InvalidStateException for a child that names no parents;
    // ShutdownTask then drops the lease without calling shardEnded. kcl refuses the same child: the
    // SDK conversion throws, and the planner answers `invalid` (nothing created, the shard not
    // finished). What the worker does next (Java: give the lease up; kcl: read the shard end again)
    // is the consumer's business.
    expect(() => childShardFromKinesis({ ShardId: 'shardId-9', ParentShards: [] })).toThrow(
      ShardDescriptionError,
    );
    const orphan: ChildShardDescription = { shardId: 'shardId-9', parentShardIds: [], hashKeyRange: null };
    expect(
      planShardEnd({ lease: ending, childShards: [orphan], lookup: leaseLookupOf([ending]) }),
    ).toMatchObject({
      kind: 'invalid',
      reason: 'child-without-parents',
    });
  });

  it('DIFFERENCE (testMergeChildWhereOneParentHasLease with the child lease already present): kcl proceeds', () => {
    // Java applies the merge guard before looking at the child lease, so with one parent lease
    // missing it blocks even when the child lease exists. kcl skips the guard once the child lease
    // exists: there is nothing left to create, and a partner lease deleted after the child started
    // would otherwise block the finished parent forever. The child still waits for every parent lease
    // that exists (checkParentReadiness).
    const child = lease('shardId-2', 'TRIM_HORIZON', { parents: ['shardId-0', 'shardId-1'] });
    expect(
      planShardEnd({ lease: ending, childShards: [mergeChild], lookup: leaseLookupOf([ending, child]) }),
    ).toEqual({ kind: 'proceed', leasesToCreate: [], childShardIds: ['shardId-2'] });
  });
});

// ── LeaseCleanupManagerTest → checkLeaseDeletable, findDeletableLeases ───────────────────────────

describe('LeaseCleanupManagerTest → checkLeaseDeletable, findDeletableLeases', () => {
  const split = ['leftChild', 'rightChild'];
  const merge = ['onlyChild'];

  /**
   * Java's `verifyExpectedDeletedLeasesCompletedShardCase`: the finished lease `shardId` with its
   * recorded children (and parents), children at one checkpoint (present or not), parents present.
   * DIFFERENCE: Java's fixture leaves the finished lease at LATEST, because LeaseCleanupManager trusts
   * that only leases checkpointed at SHARD_END are enqueued; kcl's check stands alone and checks the
   * lease's own SHARD_END, so the finished lease is at SHARD_END here (see the next test).
   */
  function table(
    children: readonly string[],
    childCheckpoint: string,
    options: { childrenPresent?: boolean; parents?: readonly string[] } = {},
  ) {
    const parents = options.parents ?? [];
    const finished = lease('shardId', 'SHARD_END', { parents, children });
    const childLeases =
      (options.childrenPresent ?? true)
        ? children.map((child) => lease(child, childCheckpoint, { parents: ['shardId'] }))
        : [];
    const parentLeases = parents.map((parent) => lease(parent, childCheckpoint, { children: ['shardId'] }));
    return { finished, leases: [finished, ...childLeases, ...parentLeases] };
  }

  scenarios(
    [
      {
        java: 'testParentShardLeaseDeletedSplitCase',
        ...table(split, 'LATEST'),
        expected: { deletable: true },
        deleted: 1,
      },
      {
        java: 'testParentShardLeaseDeletedMergeCase',
        ...table(merge, 'LATEST'),
        expected: { deletable: true },
        deleted: 1,
      },
      {
        java: 'testNoCleanupWhenSomeChildShardLeasesAreNotPresent',
        ...table(split, 'LATEST', { childrenPresent: false }),
        expected: { deletable: false, reason: 'child-lease-missing', leaseKeys: split },
        deleted: 0,
      },
      {
        java: 'testParentShardLeaseNotDeletedWhenChildIsAtTrim',
        ...table(merge, 'TRIM_HORIZON'),
        expected: { deletable: false, reason: 'child-not-started', leaseKeys: merge },
        deleted: 0,
      },
      {
        java: 'testParentShardLeaseNotDeletedWhenChildIsAtTimestamp',
        ...table(merge, 'AT_TIMESTAMP'),
        expected: { deletable: false, reason: 'child-not-started', leaseKeys: merge },
        deleted: 0,
      },
      {
        java: 'testLeaseNotDeletedWhenParentsStillPresent',
        ...table(merge, 'LATEST', { parents: ['parent'] }),
        expected: { deletable: false, reason: 'parent-lease-present', leaseKeys: ['parent'] },
        deleted: 0,
      },
    ],
    (row) => `deletes ${row.deleted}`,
    ({ finished, leases, expected, deleted }) => {
      expect(checkLeaseDeletable(finished, leaseLookupOf(leases))).toEqual(expected);
      expect(findDeletableLeases(leases)).toHaveLength(deleted);
    },
  );

  it('DIFFERENCE (testParentShardLeaseDeletedSplitCase with its literal LATEST lease): kcl keeps a lease not at SHARD_END', () => {
    const { leases } = table(split, 'LATEST');
    const notFinished = lease('shardId', 'LATEST', { children: split });
    expect(checkLeaseDeletable(notFinished, leaseLookupOf(leases))).toMatchObject({
      deletable: false,
      reason: 'not-at-shard-end',
    });
  });
});

// ── BlockOnParentShardTaskTest → checkParentReadiness ────────────────────────────────────────────

describe('BlockOnParentShardTaskTest → checkParentReadiness', () => {
  const streamId = '123:stream:146';

  scenarios(
    [
      { java: 'testCallNoParents', stream: undefined, parents: [], table: {}, ready: true },
      // testCallShouldNotThrowBlockedOnParentWhenParentsHaveFinished: one, then two finished parents.
      {
        java: 'testCallShouldNotThrowBlockedOnParentWhenParentsHaveFinished (one parent)',
        stream: undefined,
        parents: ['shardId-1'],
        table: { 'shardId-1': 'SHARD_END', 'shardId-2': 'SHARD_END' },
        ready: true,
      },
      {
        java: 'testCallShouldNotThrowBlockedOnParentWhenParentsHaveFinished (two parents)',
        stream: undefined,
        parents: ['shardId-1', 'shardId-2'],
        table: { 'shardId-1': 'SHARD_END', 'shardId-2': 'SHARD_END' },
        ready: true,
      },
      {
        java: 'testCallShouldNotThrowBlockedOnParentWhenParentsHaveFinishedMultiStream (two parents)',
        stream: streamId,
        parents: ['shardId-1', 'shardId-2'],
        table: { 'shardId-1': 'SHARD_END', 'shardId-2': 'SHARD_END' },
        ready: true,
      },
      {
        java: 'testCallWhenParentsHaveNotFinished (one parent at LATEST)',
        stream: undefined,
        parents: ['shardId-1'],
        table: { 'shardId-1': 'LATEST', 'shardId-2': '98182584034' },
        ready: false,
      },
      {
        java: 'testCallWhenParentsHaveNotFinished (two parents)',
        stream: undefined,
        parents: ['shardId-1', 'shardId-2'],
        table: { 'shardId-1': 'LATEST', 'shardId-2': '98182584034' },
        ready: false,
      },
      {
        java: 'testCallWhenParentsHaveNotFinishedMultiStream (two parents)',
        stream: streamId,
        parents: ['shardId-1', 'shardId-2'],
        table: { 'shardId-1': 'LATEST', 'shardId-2': '98182584034' },
        ready: false,
      },
      {
        java: 'testCallBeforeAndAfterAParentFinishes (before)',
        stream: undefined,
        parents: ['shardId-1'],
        table: { 'shardId-1': '98182584034' },
        ready: false,
      },
      {
        java: 'testCallBeforeAndAfterAParentFinishes (after)',
        stream: undefined,
        parents: ['shardId-1'],
        table: { 'shardId-1': 'SHARD_END' },
        ready: true,
      },
    ] as const,
    (row) => `ready ${row.ready}`,
    ({ stream, parents, table, ready }) => {
      const leases = Object.entries(table).map(([id, checkpoint]) => lease(keyOf(id, stream), checkpoint));
      const child = lease(keyOf('shardId-97', stream), 'TRIM_HORIZON', { parents });
      const readiness = checkParentReadiness(child, leaseLookupOf(leases));
      if (ready) {
        expect(readiness).toEqual({ ready: true });
      } else {
        const unfinished = parents.filter(
          (parent) => (table as Record<string, string>)[parent] !== 'SHARD_END',
        );
        expect(readiness).toEqual({
          ready: false,
          waitingFor: unfinished.map((parent) => keyOf(parent, stream)),
        });
      }
    },
  );
});

// ── PeriodicShardSyncManagerTest → auditHashRangeCoverage, HashRangeAuditor ──────────────────────

describe('PeriodicShardSyncManagerTest → auditHashRangeCoverage, HashRangeAuditor', () => {
  /** Leases from `[first, last, checkpoint?]` rows; `null` for a lease without a recorded range. */
  function audited(
    rows: ReadonlyArray<readonly [bigint, bigint, string?] | null>,
    ranges?: readonly HashKeyRange[],
  ): AuditedLease[] {
    return rows.map((row, index) => ({
      leaseKey: `${STREAM}:shard-${index + 1}`,
      checkpoint: ExtendedSequenceNumber.of(row?.[2] ?? 'TRIM_HORIZON'),
      hashKeyRange: row === null ? (ranges?.[index] ?? null) : hashKeyRange(row[0], row[1]),
    }));
  }

  const HOLE_AT_24 = audited([
    [0n, 1n],
    [2n, 3n],
    [4n, 23n],
    [6n, 23n],
    [25n, MAX],
  ]);
  const HOLE_AT_4 = audited([
    [0n, 1n],
    [2n, 3n],
    [5n, 23n],
    [6n, 23n],
    [24n, MAX],
  ]);
  const THRESHOLD = 3; // Java's DEFAULT_CONSECUTIVE_HOLES_FOR_TRIGGERING_LEASE_RECOVERY, kcl's default

  scenarios(
    [
      {
        java: 'testForFailureWhenHashRangesAreIncomplete',
        leases: HOLE_AT_24,
        holes: [hashKeyRange(24n, 24n)],
      },
      {
        java: 'testForSuccessWhenHashRangesAreComplete',
        leases: audited([
          [0n, 1n],
          [2n, 3n],
          [4n, 23n],
          [6n, 23n],
          [24n, MAX],
        ]),
        holes: [],
      },
      {
        java: 'testForSuccessWhenUnSortedHashRangesAreComplete',
        leases: audited([
          [4n, 23n],
          [2n, 3n],
          [0n, 1n],
          [24n, MAX],
          [6n, 23n],
        ]),
        holes: [],
      },
      {
        java: 'testForSuccessWhenHashRangesAreCompleteForOverlappingLeasesAtEnd',
        leases: audited([
          [0n, 1n],
          [2n, 3n],
          [4n, 23n],
          [6n, 23n],
          [24n, MAX],
          [24n, 45n],
        ]),
        holes: [],
      },
    ],
    '',
    ({ leases, holes }) => {
      const result = auditHashRangeCoverage(leases);
      expect(result.holes).toEqual(holes);
      expect(result.status).toBe(holes.length === 0 ? 'complete' : 'holes');
    },
  );

  scenarios(
    [
      { java: 'testIfShardSyncIsInitiatedWhenNoLeasesArePassed' },
      { java: 'testIfShardSyncIsInitiatedWhenEmptyLeasesArePassed' },
    ],
    'an empty lease table asks for a sync at once',
    () => {
      expect(new HashRangeAuditor().check([]).shouldSync).toBe(true);
    },
  );

  /** The auditor's answers to a sequence of listings. */
  function verdicts(sequence: readonly AuditedLease[][]): boolean[] {
    const auditor = new HashRangeAuditor();
    return sequence.map((leases) => auditor.check(leases).shouldSync);
  }

  function times<T>(count: number, value: T): T[] {
    return Array.from({ length: count }, () => value);
  }

  scenarios(
    [
      {
        java: 'testIfShardSyncIsNotInitiatedWhenConfidenceFactorIsNotReached',
        sequence: times(THRESHOLD - 1, HOLE_AT_24),
        expected: [false, false],
      },
      {
        java: 'testIfShardSyncIsInitiatedWhenConfidenceFactorIsReached',
        sequence: times(THRESHOLD, HOLE_AT_24),
        expected: [false, false, true],
      },
      {
        java: 'testIfShardSyncIsInitiatedWhenHoleIsDueToShardEnd',
        sequence: times(
          THRESHOLD,
          audited([
            [0n, 1n],
            [2n, 3n],
            [4n, 23n, 'SHARD_END'],
            [6n, 23n],
            [24n, MAX],
          ]),
        ),
        expected: [false, false, true],
      },
      {
        java: 'testIfShardSyncIsInitiatedWhenNoLeasesAreUsedDueToShardEnd',
        sequence: times(
          THRESHOLD,
          audited([
            [0n, 1n, 'SHARD_END'],
            [2n, 3n, 'SHARD_END'],
            [4n, 23n, 'SHARD_END'],
            [6n, 23n, 'SHARD_END'],
            [24n, MAX, 'SHARD_END'],
          ]),
        ),
        expected: [false, false, true],
      },
      {
        java: 'testIfShardSyncIsNotInitiatedWhenHoleShifts',
        sequence: [...times(THRESHOLD - 1, HOLE_AT_24), ...times(THRESHOLD, HOLE_AT_4)],
        expected: [false, false, false, false, true],
      },
      {
        java: 'testIfShardSyncIsNotInitiatedWhenHoleShiftsMoreThanOnce',
        sequence: [
          ...times(THRESHOLD - 1, HOLE_AT_24),
          ...times(THRESHOLD - 1, HOLE_AT_4),
          ...times(THRESHOLD, HOLE_AT_24),
        ],
        expected: [false, false, false, false, false, false, true],
      },
    ],
    '',
    ({ sequence, expected }) => {
      expect(verdicts(sequence)).toEqual(expected);
    },
  );

  describe('leases without a recorded hash range', () => {
    // Java fills missing ranges from ListShards inside the auditor (and stores them) before judging.
    // DIFFERENCE (division of work): kcl's audit answers `unknown` instead of guessing, and the caller
    // (the consumer's sync loop) fills the ranges from the listing and audits again. Both steps are
    // shown: without the fill kcl never advises a sync; with the listing's ranges it agrees with Java.
    const COMPLETE_RANGES = [hashKeyRange(0n, 1n), hashKeyRange(2n, 3n)];

    it('testIfMissingHashRangeInformationIsFilledBeforeEvaluatingForShardSync: never syncs', () => {
      const unfilled = audited([null, null, [4n, 20n], [21n, 23n], [24n, MAX]]);
      expect(auditHashRangeCoverage(unfilled).status).toBe('unknown');
      expect(verdicts(times(THRESHOLD, unfilled))).toEqual([false, false, false]);
      const filled = audited([null, null, [4n, 20n], [21n, 23n], [24n, MAX]], COMPLETE_RANGES);
      expect(auditHashRangeCoverage(filled).status).toBe('complete');
      expect(verdicts(times(THRESHOLD, filled))).toEqual([false, false, false]);
    });

    it('testIfMissingHashRangeInformationIsFilledBeforeEvaluatingForShardSyncInHoleScenario: syncs on the third audit once filled', () => {
      const unfilled = audited([null, null, [5n, 20n], [21n, 23n], [24n, MAX]]);
      expect(auditHashRangeCoverage(unfilled).status).toBe('unknown');
      const filled = audited([null, null, [5n, 20n], [21n, 23n], [24n, MAX]], COMPLETE_RANGES);
      expect(auditHashRangeCoverage(filled).holes).toEqual([hashKeyRange(4n, 4n)]);
      expect(verdicts(times(THRESHOLD, filled))).toEqual([false, false, true]);
    });
  });

  describe('testFor1000Different…HierarchyTreeTheHashRangesAreAlwaysComplete', () => {
    // Java's random reshard trees: 100 leases over 0 … 10^7 (the last up to 2^128 − 1), then `depth`
    // rounds of splits, merges of adjacent pairs, or either; in the "in progress" variants a merged
    // pair's second parent is usually left unfinished. Shuffled, the audit must find no hole.
    // Math.random is replaced by core's seeded generator so a failure can be replayed.
    interface TreeLease {
      leaseKey: string;
      checkpoint: ExtendedSequenceNumber;
      hashKeyRange: HashKeyRange;
      childShardIds: string[];
    }

    function tree(
      random: () => number,
      depth: number,
      kind: 'split' | 'merge' | 'any',
      keepParentsInProgress: boolean,
    ): TreeLease[] {
      const initialCount = 100;
      const internalMax = 10_000_000n;
      const leases: TreeLease[] = [];
      let start = 0n;
      for (let index = 1; index <= initialCount; index++) {
        const end = index === initialCount ? MAX : (internalMax / BigInt(initialCount)) * BigInt(index);
        leases.push({
          leaseKey: `shard-${index}`,
          checkpoint: ExtendedSequenceNumber.TRIM_HORIZON,
          hashKeyRange: hashKeyRange(start, end),
          childShardIds: [],
        });
        start = end + 1n;
      }
      let counter = initialCount;
      const child = (first: bigint, last: bigint): TreeLease => ({
        leaseKey: `shard-${++counter}`,
        checkpoint: ExtendedSequenceNumber.TRIM_HORIZON,
        hashKeyRange: hashKeyRange(first, last),
        childShardIds: [],
      });
      const split = () => {
        const eligible = leases.filter((candidate) => candidate.childShardIds.length === 0);
        const count = Math.floor(eligible.length * random());
        for (const parent of eligible.slice(0, count)) {
          const { startingHashKey: first, endingHashKey: last } = parent.hashKeyRange;
          const middle = (first + last) / 2n;
          const left = child(first, middle);
          const right = child(middle + 1n, last);
          parent.checkpoint = ExtendedSequenceNumber.SHARD_END;
          parent.childShardIds = [left.leaseKey, right.leaseKey];
          leases.push(left, right);
        }
      };
      const merge = () => {
        const eligible = leases.filter((candidate) => candidate.childShardIds.length === 0);
        const count = Math.floor(((eligible.length - 1) / 2) * random());
        for (let index = 0; index < count; index += 2) {
          const first = eligible[index] as TreeLease;
          const second = eligible[index + 1] as TreeLease;
          if (second.hashKeyRange.startingHashKey - first.hashKeyRange.endingHashKey !== 1n) continue;
          first.checkpoint = ExtendedSequenceNumber.SHARD_END;
          if (!keepParentsInProgress || random() <= 0.16)
            second.checkpoint = ExtendedSequenceNumber.SHARD_END;
          const merged = child(first.hashKeyRange.startingHashKey, second.hashKeyRange.endingHashKey);
          first.childShardIds = [merged.leaseKey];
          second.childShardIds = [merged.leaseKey];
          leases.push(merged);
        }
      };
      for (let round = 0; round < depth; round++) {
        if (kind === 'split' || (kind === 'any' && random() <= 0.5)) split();
        else merge();
      }
      for (let index = leases.length - 1; index > 0; index--) {
        const other = Math.floor(random() * (index + 1));
        [leases[index], leases[other]] = [leases[other] as TreeLease, leases[index] as TreeLease];
      }
      return leases;
    }

    scenarios(
      [
        {
          java: 'testFor1000DifferentValidSplitHierarchyTreeTheHashRangesAreAlwaysComplete',
          depth: 5,
          kind: 'split',
          keep: false,
        },
        {
          java: 'testFor1000DifferentValidMergeHierarchyTreeTheHashRangesAreAlwaysComplete',
          depth: 5,
          kind: 'merge',
          keep: false,
        },
        {
          java: 'testFor1000DifferentValidReshardHierarchyTreeTheHashRangesAreAlwaysComplete',
          depth: 5,
          kind: 'any',
          keep: false,
        },
        {
          java: 'testFor1000DifferentValidMergeHierarchyTreeWithSomeInProgressParentsTheHashRangesAreAlwaysComplete',
          depth: 1,
          kind: 'merge',
          keep: true,
        },
        {
          java: 'testFor1000DifferentValidReshardHierarchyTreeWithSomeInProgressParentsTheHashRangesAreAlwaysComplete',
          depth: 1,
          kind: 'any',
          keep: true,
        },
      ] as const,
      '',
      ({ depth, kind, keep }) => {
        let resharded = 0;
        for (let seed = 1; seed <= 1000; seed++) {
          const leases = tree(seededRandom(seed), depth, kind, keep);
          if (leases.some((candidate) => candidate.checkpoint.isShardEnd)) resharded += 1;
          const result = auditHashRangeCoverage(leases);
          if (result.status !== 'complete') throw new Error(`seed ${seed}: ${result.status}`);
        }
        // Only a tree that was actually resharded tests anything: nearly every seed must be one.
        expect(resharded).toBeGreaterThan(900);
      },
    );
  });
});
