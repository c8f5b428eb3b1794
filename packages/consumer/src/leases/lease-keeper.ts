import type {
  Clock,
  KclEvent,
  Lease,
  LeaseBatchWriteResult,
  LeaseHandoff,
  LeaseLossReason,
  LeaseStore,
  LeaseWriteResult,
  Logger,
} from '@kcl/core';
import { KclError } from '@kcl/core';
import { linkSignals } from '../abort-link.js';
import { type HeldLease, holdTurns, LeaseEntry } from './held-lease.js';
import { judgeMismatch, type WriteJudgement } from './write-judgement.js';

/** Renewals in flight at once when the store renews one lease per call. */
const RENEW_CONCURRENCY = 16;

export interface LeaseKeeperOptions {
  readonly store: LeaseStore;
  readonly workerId: string;
  readonly leaseExpiryMs: number;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly emit: (event: KclEvent) => void;
  /** Called once when a held lease is lost (not when it is released). */
  readonly onLost: (held: HeldLease, reason: LeaseLossReason) => void;
  /**
   * Called once per incarnation when a renewal, checkpoint or listing shows that another worker asked
   * for the lease (a cooperative hand-off): its consumer should stop and hand it over.
   */
  readonly onHandoffRequested?: (held: HeldLease, handoff: LeaseHandoff) => void;
}

/** What one round of renewals did. */
export interface RenewalRound {
  readonly renewed: number;
  readonly lost: number;
  /** Renewals that failed without an answer: the leases are still held and are renewed again soon. */
  readonly failed: number;
}

/**
 * The leases this worker holds. All conditional writes of one lease go through here, one at a time,
 * so renewals and checkpoints never race each other on the counter. A lease is treated as lost the
 * moment it has not been written successfully within the lease expiry — measured from when that write
 * was *sent*, so this worker always gives a lease up before any other worker can judge it expired —
 * and that moment is kept by the clock (`watchExpiry`), not by a store call returning.
 *
 * A write that failed without an answer may have applied. The keeper remembers that (the entry is
 * `uncertain`): when a later write then loses its race on the counter while the stored lease is still
 * this worker's, it adopts the stored counter and writes again, instead of claiming a write it cannot
 * prove or giving up a lease it still owns.
 *
 * Why one class of some 400 lines: its state is one unit — the entries, each one's write turn, what
 * is known of its writes and when it expires — and every method keeps the same rules on it (a write
 * only in the entry's turn, a loss declared once, the expiry from the send time). The entry itself
 * (`LeaseEntry`), the turn-taking for batched calls (`holdTurns`) and the judgement of a lost race
 * (`judgeMismatch`) are their own modules.
 */
export class LeaseKeeper {
  readonly #options: LeaseKeeperOptions;
  readonly #entries = new Map<string, LeaseEntry>();
  #incarnations = 0;
  #wake: AbortController | null = null;

  constructor(options: LeaseKeeperOptions) {
    this.#options = options;
  }

  /** Starts holding a lease that this worker just took (or re-adopted), written at `writeSentAt`. */
  adopt(lease: Lease, writeSentAt: number): HeldLease {
    const existing = this.#entries.get(lease.leaseKey);
    if (existing !== undefined && existing.state === 'held') {
      throw new KclError('LEASE_ALREADY_HELD', `@kcl/consumer: lease ${lease.leaseKey} is already held`);
    }
    this.#incarnations += 1;
    const entry = new LeaseEntry(this, lease, this.#incarnations, writeSentAt);
    this.#entries.set(lease.leaseKey, entry);
    this.#wake?.abort();
    return entry;
  }

  get(leaseKey: string): HeldLease | undefined {
    const entry = this.#entries.get(leaseKey);
    return entry !== undefined && this.isHeld(entry) ? entry : undefined;
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
    if (this.#options.clock.monotonicNow() - entry.lastWriteSentAt > this.#options.leaseExpiryMs) {
      this.markLost(entry, 'expired');
      return false;
    }
    return true;
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
    for (const entry of [...this.#entries.values()]) this.isHeld(entry);
  }

  /**
   * Declares leases lost at the moment they expire, until `signal` aborts. Runs on its own, so a renewal
   * or checkpoint that hangs cannot keep a lease alive past its expiry.
   */
  async watchExpiry(signal: AbortSignal): Promise<void> {
    const { clock, leaseExpiryMs } = this.#options;
    while (!signal.aborted) {
      this.expireOverdue();
      const next = this.nextExpiry();
      const wake = new AbortController();
      this.#wake = wake;
      const wait = next === null ? leaseExpiryMs : Math.max(1, next + 1 - clock.monotonicNow());
      const link = linkSignals(signal, wake.signal);
      await clock.sleep(wait, link.signal);
      link.dispose();
    }
  }

  /**
   * Runs one conditional write of a held lease, serialised with its other writes. The write gets the
   * current copy (with the counter to condition on). Success refreshes the copy and the expiry; a lost
   * race means another worker has the lease (or it was deleted), so it is declared lost. Returns null
   * when the lease is not held (any more): a write that succeeded after the lease was given up is
   * handed back to the store at once.
   */
  async write(
    held: HeldLease,
    operation: string,
    write: (lease: Lease) => Promise<LeaseWriteResult>,
    judgement: WriteJudgement = {},
  ): Promise<LeaseWriteResult | null> {
    const entry = this.#entries.get(held.leaseKey);
    if (entry === undefined || entry !== held) return null;
    return entry.mutex.run(() => this.#writeLocked(entry, operation, write, judgement));
  }

  async #writeLocked(
    entry: LeaseEntry,
    operation: string,
    write: (lease: Lease) => Promise<LeaseWriteResult>,
    judgement: WriteJudgement,
  ): Promise<LeaseWriteResult | null> {
    const { store, workerId } = this.#options;
    for (let attempt = 1; ; attempt++) {
      if (!this.isHeld(entry)) return null;
      const sentAt = this.#options.clock.monotonicNow();
      const sentCounter = entry.lease.leaseCounter;
      let result: LeaseWriteResult;
      try {
        result = await write(entry.lease);
      } catch (error) {
        entry.uncertain = true;
        throw error;
      }
      if (entry.state !== 'held') {
        if (result.ok) this.#lateWrite(result.lease, operation);
        return null;
      }
      if (result.ok) {
        this.#refresh(entry, result.lease, sentAt);
        return result;
      }
      const verdict = await judgeMismatch({ store, workerId, entry, sentCounter, result, judgement });
      if (entry.state !== 'held') return null;
      if (verdict.kind === 'applied') {
        this.#refresh(entry, verdict.lease, sentAt);
        return { ok: true, lease: verdict.lease };
      }
      if (verdict.kind === 'covered') {
        // The expiry is not refreshed: when the write that got there was sent is not known.
        entry.lease = verdict.lease;
        entry.uncertain = false;
        return { ok: true, lease: verdict.lease };
      }
      if (verdict.kind === 'resynced' && attempt === 1) {
        this.#options.logger.info(
          'lease counter was behind the store after an unanswered write; writing again',
          {
            leaseKey: entry.leaseKey,
            operation,
            leaseCounter: verdict.lease.leaseCounter,
          },
        );
        entry.lease = verdict.lease;
        entry.uncertain = false;
        continue;
      }
      this.#options.logger.info('lease lost on write', {
        leaseKey: entry.leaseKey,
        operation,
        reason: result.reason,
      });
      this.markLost(entry, verdict.kind === 'lost' ? verdict.reason : 'taken-by-other');
      return result;
    }
  }

  /**
   * Renews every held lease: in one call when the store can batch, else one call per lease. A lease
   * busy with another write (a checkpoint, which renews it too) is skipped this round. A renewal that
   * failed without an answer leaves the lease held (`failed`), for the caller to retry soon.
   */
  async renewAll(): Promise<RenewalRound> {
    this.expireOverdue();
    const { store } = this.#options;
    const busy = new Map(
      [...this.#entries.values()]
        .filter((entry) => entry.state === 'held' && entry.mutex.locked)
        .map((entry) => [entry, entry.lastWriteSentAt]),
    );
    const due = [...this.#entries.values()].filter((entry) => entry.state === 'held' && !entry.mutex.locked);
    // A lease busy with another write (a checkpoint renews it too) is skipped; if that write has not
    // renewed it by the end of the round (it failed, or still hangs), it counts as a failed renewal,
    // so the caller tries again soon rather than a whole interval later.
    const unrenewedBusy = (): number =>
      [...busy].filter(([entry, sentAt]) => entry.state === 'held' && entry.lastWriteSentAt === sentAt)
        .length;
    if (due.length === 0) return { renewed: 0, lost: 0, failed: unrenewedBusy() };
    let renewed = 0;
    let lost = 0;
    let failed = 0;
    if (store.capabilities.batchRenew) {
      // Hold every lease's turn while the one batched call is in flight.
      const release = await holdTurns(due);
      try {
        const sentAt = this.#options.clock.monotonicNow();
        const live = due.filter((entry) => this.isHeld(entry));
        if (live.length === 0) return { renewed: 0, lost: 0, failed: unrenewedBusy() };
        let results: LeaseBatchWriteResult[];
        try {
          results = await store.leases.renewMany(
            live.map((entry) => ({ leaseKey: entry.leaseKey, leaseCounter: entry.lease.leaseCounter })),
          );
        } catch (error) {
          for (const entry of live) entry.uncertain = true;
          throw error;
        }
        for (const [index, entry] of live.entries()) {
          const outcome = await this.#applyRenewal(entry, results[index], sentAt);
          if (outcome === 'renewed') renewed += 1;
          else if (outcome === 'lost') lost += 1;
          else if (outcome === 'failed') failed += 1;
        }
      } finally {
        release();
      }
    } else {
      // One call per lease, a bounded number at a time, so a worker with many leases does not burst.
      const queue = [...due];
      const renewNext = async (): Promise<void> => {
        for (let entry = queue.shift(); entry !== undefined; entry = queue.shift()) {
          try {
            const result = await this.write(entry, 'renew', (lease) =>
              store.leases.renew(lease.leaseKey, lease.leaseCounter),
            );
            if (result?.ok) renewed += 1;
            else if (result !== null) lost += 1;
          } catch (error) {
            failed += 1;
            this.#options.logger.warn('renewing a lease failed', { leaseKey: entry.leaseKey, error });
          }
        }
      };
      await Promise.all(Array.from({ length: Math.min(RENEW_CONCURRENCY, queue.length) }, renewNext));
    }
    return { renewed, lost, failed: failed + unrenewedBusy() };
  }

  /** Applies one lease's batched renewal result; the lease's turn is held by the caller. */
  async #applyRenewal(
    entry: LeaseEntry,
    result: LeaseBatchWriteResult | undefined,
    sentAt: number,
  ): Promise<'renewed' | 'lost' | 'failed' | 'skipped'> {
    if (entry.state !== 'held') {
      if (result?.ok === true) this.#lateWrite(result.lease, 'renew');
      return 'skipped';
    }
    if (result === undefined || (!result.ok && result.reason === 'failed')) {
      entry.uncertain = true;
      return 'failed';
    }
    if (result.ok) {
      this.#refresh(entry, result.lease, sentAt);
      return 'renewed';
    }
    const { store, workerId } = this.#options;
    const verdict = await judgeMismatch({
      store,
      workerId,
      entry,
      sentCounter: entry.lease.leaseCounter,
      result,
      judgement: this.#renewal,
    });
    if (entry.state !== 'held') return 'lost';
    if (verdict.kind === 'applied') {
      this.#refresh(entry, verdict.lease, sentAt);
      return 'renewed';
    }
    if (verdict.kind === 'resynced' || verdict.kind === 'covered') {
      // An earlier unanswered write of ours applied: renew again now, from the stored counter.
      entry.lease = verdict.lease;
      entry.uncertain = false;
      try {
        const again = await this.#writeLocked(
          entry,
          'renew',
          (lease) => this.#options.store.leases.renew(lease.leaseKey, lease.leaseCounter),
          this.#renewal,
        );
        if (again?.ok === true) return 'renewed';
        return again === null ? 'skipped' : 'lost';
      } catch {
        return 'failed';
      }
    }
    this.markLost(entry, verdict.reason);
    return 'lost';
  }

  /** A renewal: any write of ours reflects it, nothing but a fresh write covers it (its time matters). */
  readonly #renewal: WriteJudgement = { reflects: (stored) => stored.owner === this.#options.workerId };

  /**
   * Compares held leases with a fresh listing: a lease whose stored owner is another worker (or that
   * is gone) was taken from us; give it up now rather than at the next renewal.
   */
  reconcile(listed: readonly Lease[]): void {
    const byKey = new Map(listed.map((lease) => [lease.leaseKey, lease]));
    for (const entry of [...this.#entries.values()]) {
      if (entry.state !== 'held') continue;
      const stored = byKey.get(entry.leaseKey);
      if (stored !== undefined) this.#noteHandoff(entry, stored);
      if (entry.mutex.locked) continue;
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
   * release was written; either way — a failed write included — the lease is no longer held (it then
   * expires for the others).
   */
  async release(held: HeldLease): Promise<boolean> {
    const entry = this.#entries.get(held.leaseKey);
    if (entry === undefined || entry !== held || entry.state !== 'held') return false;
    let result: LeaseWriteResult | null = null;
    try {
      result = await this.write(
        entry,
        'release',
        (lease) => this.#options.store.leases.release(lease.leaseKey, lease.leaseCounter),
        { reflects: (stored) => stored.owner === null, covers: (stored) => stored.owner === null },
      );
    } catch (error) {
      this.#options.logger.warn('releasing a lease failed; it expires for the others instead', {
        leaseKey: entry.leaseKey,
        error,
      });
    }
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

  /** The hand-off another worker asked for on a held lease, or null. */
  handoffOf(held: HeldLease): LeaseHandoff | null {
    const entry = this.#entries.get(held.leaseKey);
    return entry !== undefined && entry === held && entry.state === 'held' ? entry.handoff : null;
  }

  /**
   * Ends a hand-off this worker was asked for (its processor has checkpointed): the lease goes to the
   * requester. A write that fails without an answer is tried again until `retryUntil` (monotonic ms);
   * one that loses its race means the requester (or another worker) has the lease already — it was
   * stolen after the hand-off timed out. Returns whether the lease was handed over; either way it is
   * no longer held here (a lease not handed over expires, or the requester's fallback takes it).
   */
  async completeHandoff(held: HeldLease, retryUntil: number): Promise<boolean> {
    const entry = this.#entries.get(held.leaseKey);
    if (entry === undefined || entry !== held || entry.state !== 'held' || entry.handoff === null)
      return false;
    const { store, workerId, clock, logger } = this.#options;
    const to = entry.handoff.to;
    let result: LeaseWriteResult | null = null;
    for (let attempt = 1; entry.state === 'held'; attempt++) {
      try {
        result = await this.write(
          entry,
          'complete hand-off',
          async (lease) => {
            const completed = await store.leases.completeHandoff(lease.leaseKey, lease.leaseCounter);
            if (completed.ok || completed.reason !== 'handoff-mismatch') return completed;
            // The request is gone while the lease is still ours at this counter (only a take or a
            // release clears one, and both move the counter): give the lease back rather than keep it.
            return store.leases.release(lease.leaseKey, lease.leaseCounter);
          },
          {
            reflects: (stored) => stored.owner === to && stored.handoff === null,
            covers: (stored) => stored.owner !== workerId,
          },
        );
        break;
      } catch (error) {
        const pause = Math.min(1_000, 50 * 2 ** (attempt - 1));
        if (clock.monotonicNow() + pause >= retryUntil) {
          logger.warn('completing a hand-off failed; the lease expires or is taken by its requester', {
            leaseKey: entry.leaseKey,
            error,
          });
          break;
        }
        logger.warn('completing a hand-off failed; retrying', { leaseKey: entry.leaseKey, attempt, error });
        await clock.sleep(pause);
      }
    }
    const handedOver = result?.ok === true && result.lease.owner === to;
    if (entry.state === 'held') {
      entry.state = 'released';
      entry.controller.abort();
      this.#entries.delete(entry.leaseKey);
      if (handedOver) {
        this.#options.emit({
          type: 'lease-handoff',
          workerId,
          leaseKey: entry.leaseKey,
          from: workerId,
          to,
          step: 'completed',
        });
      } else if (result?.ok === true && result.lease.owner === null) {
        this.#options.emit({ type: 'lease-released', workerId, leaseKey: entry.leaseKey });
      }
    }
    return handedOver;
  }

  /** Forgets a lease without writing (a forced stop): it will expire for the others. */
  abandon(held: HeldLease): void {
    const entry = this.#entries.get(held.leaseKey);
    if (entry === undefined || entry !== held || entry.state !== 'held') return;
    entry.state = 'released';
    entry.controller.abort();
    this.#entries.delete(entry.leaseKey);
  }

  /**
   * A write that succeeded after this worker had given the lease up: the store says it is ours, but
   * nothing here consumes it. It is left alone — not released, because the consumer that gave it up may
   * still be finishing a batch: the lease expires for the others, or this worker's next rebalance takes
   * it back once that consumer has ended.
   */
  #lateWrite(lease: Lease, operation: string): void {
    this.#options.logger.info('a write applied after the lease was given up; it is taken back or expires', {
      leaseKey: lease.leaseKey,
      operation,
    });
  }

  #refresh(entry: LeaseEntry, lease: Lease, sentAt: number): void {
    entry.lease = lease;
    entry.uncertain = false;
    entry.lastWriteSentAt = Math.max(entry.lastWriteSentAt, sentAt);
    this.#noteHandoff(entry, lease);
  }

  /**
   * A stored copy of a held lease that shows another worker's hand-off request: remembered (once per
   * incarnation) and announced. A copy older than the incarnation (a listing made before this worker
   * took the lease) does not count: the take cleared any hand-off.
   */
  #noteHandoff(entry: LeaseEntry, stored: Lease): void {
    const { workerId } = this.#options;
    const handoff = stored.handoff;
    if (entry.handoff !== null || handoff === null || entry.state !== 'held') return;
    if (stored.owner !== workerId || handoff.from !== workerId || handoff.to === workerId) return;
    if (stored.leaseCounter < entry.firstCounter) return;
    entry.handoff = handoff;
    this.#options.logger.info('another worker asked for a lease; handing it over', {
      leaseKey: entry.leaseKey,
      to: handoff.to,
    });
    this.#options.onHandoffRequested?.(entry, handoff);
  }
}
