import type {
  Clock,
  KclEvent,
  Lease,
  LeaseBatchWriteResult,
  LeaseLossReason,
  LeaseStore,
  LeaseWriteResult,
  Logger,
} from '@kcl/core';
import { Mutex } from './mutex.js';

/** A lease this worker holds: one incarnation, from the take to the loss or release. */
export interface HeldLease {
  readonly leaseKey: string;
  /** Distinguishes incarnations of the same lease key: a lease taken again is a new incarnation. */
  readonly incarnation: number;
  /** Aborted as soon as the lease is no longer held (lost, expired or released). */
  readonly signal: AbortSignal;
  /** The latest copy this worker wrote or read. */
  readonly lease: Lease;
  /** Held and not locally expired. */
  isHeld(): boolean;
}

type EntryState = 'held' | 'lost' | 'released';

/** Renewals in flight at once when the store renews one lease per call. */
const RENEW_CONCURRENCY = 16;

class Entry implements HeldLease {
  readonly leaseKey: string;
  readonly incarnation: number;
  readonly controller = new AbortController();
  readonly mutex = new Mutex();
  lease: Lease;
  lastWriteSentAt: number;
  state: EntryState = 'held';
  readonly #keeper: LeaseKeeper;

  constructor(keeper: LeaseKeeper, lease: Lease, incarnation: number, writeSentAt: number) {
    this.#keeper = keeper;
    this.leaseKey = lease.leaseKey;
    this.lease = lease;
    this.incarnation = incarnation;
    this.lastWriteSentAt = writeSentAt;
  }

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  isHeld(): boolean {
    return this.#keeper.isHeld(this);
  }
}

export interface LeaseKeeperOptions {
  readonly store: LeaseStore;
  readonly workerId: string;
  readonly leaseExpiryMs: number;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly emit: (event: KclEvent) => void;
  /** Called once when a held lease is lost (not when it is released). */
  readonly onLost: (held: HeldLease, reason: LeaseLossReason) => void;
}

/**
 * The leases this worker holds. All conditional writes of one lease go through here, one at a time,
 * so renewals and checkpoints never race each other on the counter. A lease is treated as lost the
 * moment it has not been written successfully within the lease expiry — measured from when that write
 * was *sent*, so this worker always gives a lease up before any other worker can judge it expired.
 */
export class LeaseKeeper {
  readonly #options: LeaseKeeperOptions;
  readonly #entries = new Map<string, Entry>();
  #incarnations = 0;

  constructor(options: LeaseKeeperOptions) {
    this.#options = options;
  }

  /** Starts holding a lease that this worker just took (or re-adopted), written at `writeSentAt`. */
  adopt(lease: Lease, writeSentAt: number): HeldLease {
    const existing = this.#entries.get(lease.leaseKey);
    if (existing !== undefined && existing.state === 'held') {
      throw new Error(`@kcl/consumer: lease ${lease.leaseKey} is already held`);
    }
    this.#incarnations += 1;
    const entry = new Entry(this, lease, this.#incarnations, writeSentAt);
    this.#entries.set(lease.leaseKey, entry);
    return entry;
  }

  get(leaseKey: string): HeldLease | undefined {
    const entry = this.#entries.get(leaseKey);
    return entry?.state === 'held' ? entry : undefined;
  }

  /** Leases currently held (and not locally expired). */
  held(): HeldLease[] {
    return [...this.#entries.values()].filter((entry) => this.isHeld(entry));
  }

  get size(): number {
    return this.held().length;
  }

  isHeld(held: HeldLease): boolean {
    const entry = this.#entries.get(held.leaseKey);
    if (entry !== held || entry.state !== 'held') return false;
    return this.#options.clock.monotonicNow() - entry.lastWriteSentAt <= this.#options.leaseExpiryMs;
  }

  /** When the earliest held lease expires unless renewed (monotonic ms), or null. */
  nextExpiry(): number | null {
    let earliest: number | null = null;
    for (const entry of this.#entries.values()) {
      if (entry.state !== 'held') continue;
      const deadline = entry.lastWriteSentAt + this.#options.leaseExpiryMs;
      if (earliest === null || deadline < earliest) earliest = deadline;
    }
    return earliest;
  }

  /** Declares every lease that expired locally lost. */
  expireOverdue(): void {
    const now = this.#options.clock.monotonicNow();
    for (const entry of [...this.#entries.values()]) {
      if (entry.state === 'held' && now - entry.lastWriteSentAt > this.#options.leaseExpiryMs) {
        this.markLost(entry, 'expired');
      }
    }
  }

  /**
   * Runs one conditional write of a held lease, serialised with its other writes. The write gets the
   * current copy (with the counter to condition on). Success refreshes the copy and the expiry; a lost
   * race means another worker has the lease (or it was deleted), so it is declared lost.
   */
  async write(
    held: HeldLease,
    operation: string,
    write: (lease: Lease) => Promise<LeaseWriteResult>,
  ): Promise<LeaseWriteResult | null> {
    const entry = this.#entries.get(held.leaseKey);
    if (entry === undefined || entry !== held) return null;
    return entry.mutex.run(async () => {
      if (!this.isHeld(entry)) {
        if (entry.state === 'held') this.markLost(entry, 'expired');
        return null;
      }
      const sentAt = this.#options.clock.monotonicNow();
      const sentCounter = entry.lease.leaseCounter;
      const result = await write(entry.lease);
      if (result.ok) {
        this.#refresh(entry, result.lease, sentAt);
        return result;
      }
      const recovered = await this.#recoverSpuriousFailure(entry, sentCounter, result);
      if (recovered !== null) {
        this.#refresh(entry, recovered, sentAt);
        return { ok: true, lease: recovered };
      }
      this.#options.logger.info('lease lost on write', {
        leaseKey: entry.leaseKey,
        operation,
        reason: result.reason,
      });
      this.markLost(entry, result.reason === 'not-found' ? 'deleted' : 'taken-by-other');
      return result;
    });
  }

  /**
   * Renews every held lease: in one call when the store can batch, else one call per lease. A lease
   * busy with another write (a checkpoint, which renews it too) is skipped this round.
   */
  async renewAll(): Promise<{ renewed: number; lost: number }> {
    this.expireOverdue();
    const { store } = this.#options;
    const due = [...this.#entries.values()].filter((entry) => entry.state === 'held' && !entry.mutex.locked);
    if (due.length === 0) return { renewed: 0, lost: 0 };
    let renewed = 0;
    let lost = 0;
    if (store.capabilities.batchRenew) {
      // Hold every lease's turn while the one batched call is in flight.
      const release: Array<() => void> = [];
      const locked = due.map(
        (entry) =>
          new Promise<void>((acquired) => {
            void entry.mutex.run(
              () =>
                new Promise<void>((done) => {
                  release.push(done);
                  acquired();
                }),
            );
          }),
      );
      await Promise.all(locked);
      try {
        const sentAt = this.#options.clock.monotonicNow();
        const live = due.filter((entry) => entry.state === 'held');
        const results = await store.renewLeases(
          live.map((entry) => ({ leaseKey: entry.leaseKey, leaseCounter: entry.lease.leaseCounter })),
        );
        for (const [index, entry] of live.entries()) {
          const result = results[index];
          if (result === undefined) continue;
          if (await this.#applyRenewal(entry, result, sentAt)) renewed += 1;
          else lost += 1;
        }
      } finally {
        for (const done of release) done();
      }
    } else {
      // One call per lease, a bounded number at a time, so a worker with many leases does not burst.
      const queue = [...due];
      const renewNext = async (): Promise<void> => {
        for (let entry = queue.shift(); entry !== undefined; entry = queue.shift()) {
          const result = await this.write(entry, 'renew', (lease) =>
            store.renewLease(lease.leaseKey, lease.leaseCounter),
          );
          if (result?.ok) renewed += 1;
          else if (result !== null) lost += 1;
        }
      };
      await Promise.all(Array.from({ length: Math.min(RENEW_CONCURRENCY, queue.length) }, renewNext));
    }
    return { renewed, lost };
  }

  async #applyRenewal(entry: Entry, result: LeaseBatchWriteResult, sentAt: number): Promise<boolean> {
    if (entry.state !== 'held') return false;
    if (!result.ok && result.reason === 'failed') return false;
    if (result.ok) {
      this.#refresh(entry, result.lease, sentAt);
      return true;
    }
    const recovered = await this.#recoverSpuriousFailure(entry, entry.lease.leaseCounter, result);
    if (recovered !== null) {
      this.#refresh(entry, recovered, sentAt);
      return true;
    }
    this.markLost(entry, result.reason === 'not-found' ? 'deleted' : 'taken-by-other');
    return false;
  }

  /**
   * A retried request may have applied the first time and then failed its condition the second time.
   * If the stored lease is still ours and exactly one write ahead, that write was ours.
   */
  async #recoverSpuriousFailure(
    entry: Entry,
    sentCounter: number,
    result: Extract<LeaseWriteResult, { ok: false }>,
  ): Promise<Lease | null> {
    if (result.reason !== 'counter-mismatch') return null;
    try {
      const current = await this.#options.store.getLease(entry.leaseKey);
      if (
        current !== null &&
        current.owner === this.#options.workerId &&
        current.leaseCounter === sentCounter + 1
      ) {
        return current;
      }
    } catch {
      // The write failed; without a read we cannot prove it applied.
    }
    return null;
  }

  /**
   * Compares held leases with a fresh listing: a lease whose stored owner is another worker (or that
   * is gone) was taken from us; give it up now rather than at the next renewal.
   */
  reconcile(listed: readonly Lease[]): void {
    const byKey = new Map(listed.map((lease) => [lease.leaseKey, lease]));
    for (const entry of [...this.#entries.values()]) {
      if (entry.state !== 'held' || entry.mutex.locked) continue;
      const stored = byKey.get(entry.leaseKey);
      if (stored === undefined) {
        this.markLost(entry, 'deleted');
      } else if (stored.leaseCounter > entry.lease.leaseCounter && stored.owner !== this.#options.workerId) {
        this.markLost(entry, 'taken-by-other');
      }
    }
  }

  markLost(held: HeldLease, reason: LeaseLossReason): void {
    const entry = this.#entries.get(held.leaseKey);
    if (entry === undefined || entry !== held || entry.state !== 'held') return;
    entry.state = 'lost';
    entry.controller.abort();
    this.#entries.delete(entry.leaseKey);
    this.#options.emit({
      type: 'lease-lost',
      workerId: this.#options.workerId,
      leaseKey: entry.leaseKey,
      reason,
    });
    this.#options.onLost(entry, reason);
  }

  /**
   * Gives a lease back (owner cleared) so another worker can take it at once. Returns whether the
   * release was written; either way the lease is no longer held.
   */
  async release(held: HeldLease): Promise<boolean> {
    const entry = this.#entries.get(held.leaseKey);
    if (entry === undefined || entry !== held || entry.state !== 'held') return false;
    const result = await this.write(entry, 'release', (lease) =>
      this.#options.store.releaseLease(lease.leaseKey, lease.leaseCounter),
    );
    if (entry.state === 'held') {
      entry.state = 'released';
      entry.controller.abort();
      this.#entries.delete(entry.leaseKey);
      if (result?.ok) {
        this.#options.emit({
          type: 'lease-released',
          workerId: this.#options.workerId,
          leaseKey: entry.leaseKey,
        });
      }
    }
    return result?.ok ?? false;
  }

  /** Forgets a lease without writing (a forced stop): it will expire for the others. */
  abandon(held: HeldLease): void {
    const entry = this.#entries.get(held.leaseKey);
    if (entry === undefined || entry !== held || entry.state !== 'held') return;
    entry.state = 'released';
    entry.controller.abort();
    this.#entries.delete(entry.leaseKey);
  }

  #refresh(entry: Entry, lease: Lease, sentAt: number): void {
    entry.lease = lease;
    entry.lastWriteSentAt = Math.max(entry.lastWriteSentAt, sentAt);
  }
}
