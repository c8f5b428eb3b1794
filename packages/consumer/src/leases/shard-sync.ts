import type { Shard } from '@aws-sdk/client-kinesis';
import type { Clock, KclEvent, Lease, LeaseStore, Logger } from '@kcl/core';
import { isLeaseComplete, parseHashKey, shardIdOfLeaseKey } from '@kcl/core';
import type { InitialPosition } from '@kcl/shard-graph';
import {
  HashRangeAuditor,
  planInitialLeases,
  planMissingLeases,
  shardFilterFor,
  shardsFromKinesis,
} from '@kcl/shard-graph';
import type { StreamReader } from '../kinesis/kinesis-stream.js';
import { createMissingLeases, type LeaseCreation } from './create-missing-leases.js';

export interface ShardSyncOptions {
  readonly store: LeaseStore;
  readonly stream: StreamReader;
  readonly initialPosition: InitialPosition;
  readonly workerId: string;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly emit: (event: KclEvent) => void;
  /** The stream's identifier in a multi-stream application: its lease keys carry it as a prefix. */
  readonly streamIdentifier?: string;
}

/** Listings of an application without leases before the initial leases are created anyway (as the Java KCL). */
const INITIAL_LISTING_ATTEMPTS = 3;

/**
 * Keeps a lease for every shard (ARCHITECTURE §5): the application's initial leases, and the hole
 * audit that creates the leases of shards nobody has one for. The audit remembers the holes it saw
 * between runs, so it only acts on holes that persist.
 */
export class ShardSync {
  readonly #options: ShardSyncOptions;
  readonly #auditor = new HashRangeAuditor();

  constructor(options: ShardSyncOptions) {
    this.#options = options;
  }

  /** Creates a lease for every shard at the initial position (an application without leases). */
  async createInitialLeases(signal: AbortSignal): Promise<void> {
    const { stream, initialPosition, clock, logger } = this.#options;
    // A listing that races a reshard can leave part of the key space uncovered: list again.
    for (let attempt = 1; attempt <= INITIAL_LISTING_ATTEMPTS; attempt++) {
      const shards = shardsFromKinesis(await stream.listShards(shardFilterFor(initialPosition), signal));
      const plan = planInitialLeases(shards, { initialPosition, ...this.#streamScope() });
      if (!plan.ok) {
        logger.warn('initial shard listing is not usable yet', { attempt, reason: plan.message });
        await clock.sleep(1_000, signal);
        continue;
      }
      await createMissingLeases(plan.leases, this.#creation('initial'));
      return;
    }
  }

  /**
   * The periodic audit: when the incomplete leases leave the same hole in the hash key space on several
   * consecutive checks, list the shards and create the missing leases. Leases without a hash range
   * (children recorded without one, rows imported from elsewhere) first get theirs from the listing,
   * stored, as the Java KCL does — otherwise one such lease would keep the audit blind for good.
   */
  async audit(signal: AbortSignal, streamLeases?: readonly Lease[]): Promise<void> {
    const { store, stream, initialPosition, logger } = this.#options;
    let leases = [...(streamLeases ?? (await store.leases.list()))];
    if (leases.length === 0) {
      await this.createInitialLeases(signal);
      return;
    }
    let listing: Shard[] | null = null;
    let verdict = this.#auditor.check(leases);
    if (verdict.result.status === 'unknown') {
      listing = await stream.listShards(undefined, signal);
      leases = await this.#fillHashRanges(leases, listing);
      verdict = this.#auditor.check(leases);
    }
    if (!verdict.shouldSync) return;
    listing ??= await stream.listShards(undefined, signal);
    const plan = planMissingLeases(shardsFromKinesis(listing), leases, {
      initialPosition,
      ...this.#streamScope(),
    });
    if (!plan.ok) {
      logger.info('shard sync postponed', { reason: plan.message });
      return;
    }
    await createMissingLeases(plan.leases, this.#creation('audit'));
    this.#auditor.reset();
  }

  #streamScope(): { streamIdentifier?: string } {
    const identifier = this.#options.streamIdentifier;
    return identifier === undefined ? {} : { streamIdentifier: identifier };
  }

  #creation(cause: 'initial' | 'audit'): LeaseCreation {
    const { store, workerId, emit } = this.#options;
    return { store, workerId, emit, cause };
  }

  /**
   * Gives incomplete leases without a hash range the range of their shard from `listing`, and stores
   * it. A lease whose shard is not listed any more (trimmed or deleted) covers nothing now: it is left
   * out of the result, so it cannot hide or fill a hole.
   */
  async #fillHashRanges(leases: readonly Lease[], listing: readonly Shard[]): Promise<Lease[]> {
    const { store, logger } = this.#options;
    const byShard = new Map(listing.map((shard) => [shard.ShardId, shard]));
    const result: Lease[] = [];
    for (const lease of leases) {
      if (lease.hashKeyRange !== null || isLeaseComplete(lease)) {
        result.push(lease);
        continue;
      }
      const range = byShard.get(shardIdOfLeaseKey(lease.leaseKey))?.HashKeyRange;
      if (range?.StartingHashKey === undefined || range.EndingHashKey === undefined) continue;
      const hashKeyRange = {
        startingHashKey: parseHashKey(range.StartingHashKey),
        endingHashKey: parseHashKey(range.EndingHashKey),
      };
      const updated = await store.leases.updateMeta(lease.leaseKey, { hashKeyRange });
      logger.info('filled a missing hash key range from the shard listing', { leaseKey: lease.leaseKey });
      result.push(updated ?? { ...lease, hashKeyRange });
    }
    return result;
  }
}
