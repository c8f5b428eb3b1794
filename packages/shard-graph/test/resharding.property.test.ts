import type { Lease, LeaseInit } from '@kcl/core';
import { ExtendedSequenceNumber, leaseFromInit, seededRandom } from '@kcl/core';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { InitialPosition } from '../src/index.js';
import {
  auditHashRangeCoverage,
  checkLeaseDeletable,
  checkParentReadiness,
  HashRangeAuditor,
  leaseLookupOf,
  planInitialLeases,
  planMissingLeases,
  planShardEnd,
} from '../src/index.js';
import type { ReshardHistory } from './reshard-history.js';
import {
  allShards,
  childShardsOf,
  describe as describeShard,
  reshardHistoryArbitrary,
  shardsAliveAt,
} from './reshard-history.js';

type Position = 'TRIM_HORIZON' | 'LATEST' | 'AT_TIMESTAMP';

interface Outcome {
  readonly processed: Map<string, number>;
  readonly expected: Set<string>;
  readonly violations: string[];
}

/**
 * Runs a consumer fleet over a finished history: initial leases from the filtered listing, then, in a
 * random order, shards start when ready, closed shards end (children created at shard end, merge guard
 * included) and finished leases are deleted when allowed. After every step the incomplete leases must
 * cover the key space and a gap-filling sync must find nothing to add.
 */
function simulate(history: ReshardHistory, kind: Position, timestampAt: number, seed: number): Outcome {
  const random = seededRandom(seed);
  const position: InitialPosition = kind === 'AT_TIMESTAMP' ? { timestamp: new Date(timestampAt) } : kind;
  const listedAt = kind === 'TRIM_HORIZON' ? 0 : kind === 'LATEST' ? history.end : timestampAt;
  const violations: string[] = [];
  const leases = new Map<string, Lease>();
  const create = (init: LeaseInit): void => {
    if (!leases.has(init.leaseKey)) leases.set(init.leaseKey, leaseFromInit(init));
  };
  const initial = planInitialLeases(shardsAliveAt(history, listedAt), { initialPosition: position });
  if (!initial.ok) return { processed: new Map(), expected: new Set(), violations: [initial.message] };
  for (const init of initial.leases) create(init);

  const expected = new Set(
    [...history.shards.values()]
      .filter(
        (shard) => (shard.closedAt === null || shard.closedAt > listedAt) && shard.bornAt <= history.end,
      )
      .filter((shard) => kind !== 'LATEST' || shard.closedAt === null)
      .map((shard) => shard.shardId),
  );
  const processed = new Map<string, number>();
  const finishedShards = new Set<string>();
  const auditor = new HashRangeAuditor({ confidenceThreshold: 1 });
  const shardList = allShards(history);

  for (let step = 0; step < 2_000; step++) {
    const lookup = leaseLookupOf(leases.values());
    const actions: Array<() => void> = [];
    for (const lease of leases.values()) {
      const shard = history.shards.get(lease.leaseKey);
      if (shard === undefined) continue;
      const started = processed.has(lease.leaseKey);
      if (!started && checkParentReadiness(lease, lookup).ready) {
        actions.push(() => {
          for (const parent of shard.parents) {
            if (expected.has(parent) && !finishedShards.has(parent)) {
              violations.push(`${lease.leaseKey} started before its parent ${parent} finished`);
            }
          }
          processed.set(lease.leaseKey, (processed.get(lease.leaseKey) ?? 0) + 1);
          leases.set(lease.leaseKey, {
            ...lease,
            checkpoint: ExtendedSequenceNumber.of(describeShard(shard).startingSequenceNumber),
          });
        });
      }
      if (started && shard.closedAt !== null && !lease.checkpoint.isShardEnd) {
        actions.push(() => {
          const plan = planShardEnd({
            lease,
            childShards: childShardsOf(history, shard.shardId),
            lookup,
            random,
          });
          if (plan.kind === 'invalid') violations.push(plan.message);
          if (plan.kind !== 'proceed') return;
          for (const init of plan.leasesToCreate) create(init);
          leases.set(lease.leaseKey, {
            ...lease,
            checkpoint: ExtendedSequenceNumber.SHARD_END,
            childShardIds: plan.childShardIds,
          });
          finishedShards.add(shard.shardId);
        });
      }
      if (checkLeaseDeletable(lease, lookup).deletable) actions.push(() => leases.delete(lease.leaseKey));
    }
    if (actions.length === 0) break;
    (actions[Math.floor(random() * actions.length)] as () => void)();

    const audit = auditHashRangeCoverage([...leases.values()]);
    if (audit.status !== 'complete')
      violations.push(`step ${step}: audit ${audit.status} ${audit.holes.length} hole(s)`);
    if (auditor.check([...leases.values()]).shouldSync)
      violations.push(`step ${step}: the auditor asked for a sync`);
    const gapFill = planMissingLeases(shardList, [...leases.values()], { initialPosition: position });
    if (!gapFill.ok || gapFill.leases.length > 0) {
      violations.push(
        `step ${step}: gap filling would create ${gapFill.ok ? gapFill.leases.map((l) => l.leaseKey).join(',') : gapFill.reason}`,
      );
    }
  }
  return { processed, expected, violations };
}

describe('shard lineage over random split/merge histories', () => {
  it.each<Position>(['TRIM_HORIZON', 'LATEST', 'AT_TIMESTAMP'])(
    '%s: initial leases plus children at shard end read every shard from the position exactly once, parents first',
    (kind) => {
      fc.assert(
        fc.property(reshardHistoryArbitrary, fc.nat(), fc.nat(), (history, timestampPick, seed) => {
          const timestampAt = timestampPick % history.end;
          const { processed, expected, violations } = simulate(history, kind, timestampAt, seed);
          expect(violations).toEqual([]);
          expect([...processed.keys()].sort()).toEqual([...expected].sort());
          for (const [shardId, count] of processed) expect(count, shardId).toBe(1);
        }),
        { numRuns: 150 },
      );
    },
  );

  it('readiness never lets a lease start while a present parent lease is unfinished', () => {
    fc.assert(
      fc.property(reshardHistoryArbitrary, fc.nat(), (history, seed) => {
        const random = seededRandom(seed);
        // Random checkpoints on the leases of every shard: the rule must hold for any table content.
        const leases = allShards(history)
          .filter(() => random() < 0.8)
          .map((shard) =>
            leaseFromInit({
              leaseKey: shard.shardId,
              checkpoint: random() < 0.5 ? ExtendedSequenceNumber.SHARD_END : ExtendedSequenceNumber.of('17'),
              parentShardIds: [shard.parentShardId, shard.adjacentParentShardId].filter(
                (id) => id !== undefined,
              ),
            }),
          );
        const lookup = leaseLookupOf(leases);
        for (const lease of leases) {
          const presentParents = lease.parentShardIds
            .map((id) => lookup(id))
            .filter((parent): parent is Lease => parent !== undefined && parent !== null);
          const allDone = presentParents.every((parent) => parent.checkpoint.isShardEnd);
          expect(checkParentReadiness(lease, lookup).ready).toBe(allDone);
        }
      }),
      { numRuns: 200 },
    );
  });

  it('the shards alive at any moment cover the key space, and their audit finds no hole', () => {
    fc.assert(
      fc.property(reshardHistoryArbitrary, fc.nat(), (history, pick) => {
        const at = pick % (history.end + 1);
        const plan = planInitialLeases(shardsAliveAt(history, at), { initialPosition: 'LATEST' });
        expect(plan.ok).toBe(true);
        if (!plan.ok) return;
        expect(plan.coverage.overlaps).toEqual([]);
        const leases = plan.leases.map((init) => leaseFromInit(init));
        expect(auditHashRangeCoverage(leases).status).toBe('complete');
        // Dropping any one lease opens exactly its range as a hole.
        const dropped = leases[pick % leases.length] as Lease;
        const audit = auditHashRangeCoverage(leases.filter((lease) => lease !== dropped));
        if (leases.length === 1) {
          expect(audit.status).toBe('no-leases');
        } else {
          expect(audit.holes).toEqual([dropped.hashKeyRange]);
        }
      }),
      { numRuns: 200 },
    );
  });
});
