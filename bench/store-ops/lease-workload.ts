import type { LeaseBatchWriteResult, LeaseStore } from '@kcl/core';
import { ExtendedSequenceNumber, hashKeyRange, MAX_HASH_KEY } from '@kcl/core';

/** Leases of the application; a fleet of `WORKER_COUNT` workers holds them all. */
export const LEASE_COUNT = 1_000;
export const WORKER_COUNT = 10;
/** The measured worker holds every tenth lease. */
export const HELD_COUNT = LEASE_COUNT / WORKER_COUNT;
export const CHECKPOINT_COUNT = 1_000;
export const MEASURED_WORKER = 'worker-01';

/** Concurrent writes while seeding (not measured). */
const SEED_CONCURRENCY = 20;

/** A realistic Kinesis sequence number; each checkpoint writes a larger one. */
const FIRST_SEQUENCE_NUMBER = 49590338271490256608559692538361571095921575989136588898n;

/**
 * One application's lease table as one worker of a ten-worker fleet sees it: 1,000 leases, all held,
 * 100 of them by the measured worker. The workload keeps the counters of the held leases, as the
 * worker's lease keeper does, and checks that every write it measures succeeds.
 */
export class LeaseWorkload {
  readonly #store: LeaseStore;
  /** Lease key → the counter last written, for the leases the measured worker holds. */
  readonly #held = new Map<string, number>();
  #nextSequenceNumber = FIRST_SEQUENCE_NUMBER;

  constructor(store: LeaseStore) {
    this.#store = store;
  }

  /** Creates the 1,000 leases and has each taken by its worker. */
  async seed(): Promise<void> {
    const stripe = (MAX_HASH_KEY + 1n) / BigInt(LEASE_COUNT);
    const indexes = Array.from({ length: LEASE_COUNT }, (_, index) => index);
    await forEachConcurrently(indexes, SEED_CONCURRENCY, async (index) => {
      const leaseKey = `shardId-${String(index).padStart(12, '0')}`;
      const start = stripe * BigInt(index);
      const end = index === LEASE_COUNT - 1 ? MAX_HASH_KEY : start + stripe - 1n;
      const created = expectWritten(
        await this.#store.leases.create({
          leaseKey,
          checkpoint: ExtendedSequenceNumber.of(String(FIRST_SEQUENCE_NUMBER - BigInt(index))),
          hashKeyRange: hashKeyRange(start, end),
        }),
        'leases.create',
        leaseKey,
      );
      const owner = `worker-${String((index % WORKER_COUNT) + 1).padStart(2, '0')}`;
      const taken = expectWritten(
        await this.#store.leases.take(leaseKey, created.leaseCounter, owner),
        'leases.take',
        leaseKey,
      );
      if (owner === MEASURED_WORKER) this.#held.set(leaseKey, taken.leaseCounter);
    });
    if (this.#held.size !== HELD_COUNT) {
      throw new Error(
        `bench: seeding left ${this.#held.size} leases with ${MEASURED_WORKER}, not ${HELD_COUNT}`,
      );
    }
  }

  /** What the worker's lease keeper does every renew interval: `renewLeases` of every held lease. */
  async renewCycle(): Promise<void> {
    const renewals = [...this.#held].map(([leaseKey, leaseCounter]) => ({ leaseKey, leaseCounter }));
    const results = await this.#store.leases.renewMany(renewals);
    for (const [index, renewal] of renewals.entries()) {
      const result = results[index];
      if (result === undefined)
        throw new Error(`bench: renewLeases returned no result for ${renewal.leaseKey}`);
      this.#held.set(
        renewal.leaseKey,
        expectWritten(result, 'leases.renewMany', renewal.leaseKey).leaseCounter,
      );
    }
  }

  /** Every lease of the application, as the lease planner reads them each interval. */
  async listAll(): Promise<void> {
    const leases = await this.#store.leases.list();
    if (leases.length !== LEASE_COUNT) {
      throw new Error(`bench: listLeases returned ${leases.length} leases, not ${LEASE_COUNT}`);
    }
  }

  /** `count` checkpoints one after another, cycling through the held leases: the latency of one write. */
  async checkpointsInARow(count: number): Promise<void> {
    const keys = [...this.#held.keys()];
    for (let index = 0; index < count; index++) {
      await this.#checkpoint(keys[index % keys.length] as string);
    }
  }

  /**
   * 1,000 checkpoints as the held shards' consumers make them: all 100 leases at once, ten checkpoints
   * each, one after another on each lease (a lease's writes are serialized by its counter).
   */
  async checkpointsPerShardConcurrently(): Promise<void> {
    const perLease = CHECKPOINT_COUNT / this.#held.size;
    await Promise.all(
      [...this.#held.keys()].map(async (leaseKey) => {
        for (let index = 0; index < perLease; index++) await this.#checkpoint(leaseKey);
      }),
    );
  }

  async #checkpoint(leaseKey: string): Promise<void> {
    const leaseCounter = this.#held.get(leaseKey) as number;
    this.#nextSequenceNumber += 1n;
    const result = await this.#store.leases.checkpoint(leaseKey, leaseCounter, {
      checkpoint: ExtendedSequenceNumber.of(String(this.#nextSequenceNumber)),
    });
    this.#held.set(leaseKey, expectWritten(result, 'leases.checkpoint', leaseKey).leaseCounter);
  }
}

function expectWritten(result: LeaseBatchWriteResult, operation: string, leaseKey: string) {
  if (!result.ok) {
    throw new Error(
      `bench: ${operation} of ${leaseKey} lost a race (${result.reason}); nothing else writes here`,
    );
  }
  return result.lease;
}

async function forEachConcurrently<T>(
  items: readonly T[],
  concurrency: number,
  run: (item: T) => Promise<void>,
): Promise<void> {
  let next = 0;
  const lane = async (): Promise<void> => {
    while (next < items.length) {
      const item = items[next] as T;
      next += 1;
      await run(item);
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, items.length) }, lane));
}
