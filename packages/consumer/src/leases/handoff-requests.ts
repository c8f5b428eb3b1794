import type { Clock, Lease, LeaseStore } from '@kcl/core';

export interface HandoffRequestsOptions {
  readonly store: LeaseStore;
  readonly workerId: string;
  /** How long the owner gets to hand a lease over before the requester steals it anyway. */
  readonly timeoutMs: number;
  /** A request whose lease cannot even be read for this long is forgotten (normal planning decides). */
  readonly leaseExpiryMs: number;
  readonly clock: Clock;
  /** A pending hand-off's lease could not be read (it stays pending). */
  readonly onReadError?: (leaseKey: string, error: unknown) => void;
}

/** A hand-off this worker asked for and waits on. */
interface PendingHandoff {
  readonly leaseKey: string;
  readonly from: string;
  /** When the request was sent (monotonic ms). */
  readonly requestedAt: number;
  /**
   * When the latest read that still showed the lease with its owner was sent (monotonic ms). The
   * owner's completion was written after it, so nobody saw the lease change hands earlier: it is the
   * safe start of the lease's expiry once it is ours.
   */
  lastSeenPendingAt: number;
  /** False while the request's own write failed and no read has shown it applied yet. */
  confirmed: boolean;
}

/** What became of a pending hand-off at a check. */
export type HandoffOutcome =
  /** The owner handed the lease over: it is this worker's, at `lease.leaseCounter`. */
  | {
      readonly kind: 'received';
      readonly from: string;
      readonly lease: Lease;
      /** The expiry of the lease counts from here (monotonic ms). */
      readonly writeSentAt: number;
    }
  /** Not handed over within the timeout: steal it (take at `lease.leaseCounter`). */
  | { readonly kind: 'timed-out'; readonly from: string; readonly lease: Lease }
  /** Someone else has the lease, or it is free or gone: nothing to wait for. */
  | {
      readonly kind: 'dropped';
      readonly from: string;
      readonly leaseKey: string;
      /** False for a request whose write failed and was never seen applied (nothing was asked). */
      readonly confirmed: boolean;
    };

/**
 * The hand-offs a worker asked for (ARCHITECTURE §4): each is read on every `check` until the owner
 * hands the lease over, the timeout passes (the worker then steals it), or the lease goes elsewhere.
 * While one waits, the worker counts its lease as its own and does not ask for it again.
 */
export class HandoffRequests {
  readonly #options: HandoffRequestsOptions;
  readonly #pending = new Map<string, PendingHandoff>();

  constructor(options: HandoffRequestsOptions) {
    this.#options = options;
  }

  has(leaseKey: string): boolean {
    return this.#pending.has(leaseKey);
  }

  /** The leases this worker waits on. */
  keys(): IterableIterator<string> {
    return this.#pending.keys();
  }

  get size(): number {
    return this.#pending.size;
  }

  /**
   * Asks the owner of `lease` (as listed) to hand it over. False when the race was lost (the lease
   * changed, or another hand-off is in progress); a store failure rejects.
   */
  async request(lease: Lease): Promise<boolean> {
    const { store, workerId, clock, timeoutMs } = this.#options;
    const from = lease.owner;
    if (from === null || from === workerId || this.#pending.has(lease.leaseKey)) return false;
    const requestedAt = clock.monotonicNow();
    const pending: PendingHandoff = {
      leaseKey: lease.leaseKey,
      from,
      requestedAt,
      lastSeenPendingAt: requestedAt,
      confirmed: true,
    };
    let result: Awaited<ReturnType<LeaseStore['leases']['requestHandoff']>>;
    try {
      result = await store.leases.requestHandoff(lease.leaseKey, lease.leaseCounter, {
        from,
        to: workerId,
        deadline: new Date(clock.now() + timeoutMs),
      });
    } catch (error) {
      // The write may have been applied (a timeout after it reached the store): wait on it as if it
      // were, or this worker would later take the lease as a hand-off nobody waits on while its owner
      // hands it over. The next check drops it when the lease shows no such request.
      this.#pending.set(lease.leaseKey, { ...pending, confirmed: false });
      throw error;
    }
    if (!result.ok) return false;
    this.#pending.set(lease.leaseKey, pending);
    return true;
  }

  /**
   * Waits on a hand-off to this worker that the listed `lease` shows and that nobody here waits on:
   * asked for before a restart under the same worker id, or by a request whose answer was lost. Its
   * timeout counts from the lease's deadline (at most one timeout ahead). `listedAt` is when the read
   * that listed it was sent (monotonic ms). True when it is waited on now.
   */
  adopt(lease: Lease, listedAt: number): boolean {
    const { workerId, clock, timeoutMs } = this.#options;
    const handoff = lease.handoff;
    if (
      handoff === null ||
      handoff.to !== workerId ||
      lease.owner === null ||
      handoff.from !== lease.owner ||
      this.#pending.has(lease.leaseKey)
    ) {
      return false;
    }
    const left =
      handoff.deadline === null
        ? timeoutMs
        : Math.min(timeoutMs, Math.max(0, handoff.deadline.getTime() - clock.now()));
    this.#pending.set(lease.leaseKey, {
      leaseKey: lease.leaseKey,
      from: lease.owner,
      requestedAt: clock.monotonicNow() - (timeoutMs - left),
      lastSeenPendingAt: listedAt,
      confirmed: true,
    });
    return true;
  }

  /**
   * Reads every pending hand-off and says what became of those that are settled (they are forgotten
   * here; the caller acts on them). A failed read keeps the hand-off pending (reported to
   * `onReadError`), for at most the lease expiry past its timeout.
   */
  async check(): Promise<HandoffOutcome[]> {
    const { store, clock, workerId, timeoutMs, leaseExpiryMs } = this.#options;
    const outcomes: HandoffOutcome[] = [];
    for (const pending of [...this.#pending.values()]) {
      const sentAt = clock.monotonicNow();
      let lease: Lease | null;
      try {
        lease = await store.leases.get(pending.leaseKey);
      } catch (error) {
        this.#options.onReadError?.(pending.leaseKey, error);
        if (clock.monotonicNow() - pending.requestedAt >= timeoutMs + leaseExpiryMs) {
          this.#pending.delete(pending.leaseKey);
          outcomes.push({
            kind: 'dropped',
            from: pending.from,
            leaseKey: pending.leaseKey,
            confirmed: pending.confirmed,
          });
        }
        continue;
      }
      const outcome = this.#judge(pending, lease, sentAt, workerId, timeoutMs);
      if (outcome === null) continue;
      this.#pending.delete(pending.leaseKey);
      outcomes.push(outcome);
    }
    return outcomes;
  }

  #judge(
    pending: PendingHandoff,
    lease: Lease | null,
    sentAt: number,
    workerId: string,
    timeoutMs: number,
  ): HandoffOutcome | null {
    const { from, leaseKey, confirmed } = pending;
    if (lease === null) return { kind: 'dropped', from, leaseKey, confirmed };
    if (lease.owner === workerId && lease.handoff === null) {
      return { kind: 'received', from, lease, writeSentAt: pending.lastSeenPendingAt };
    }
    const waiting = lease.owner === from && lease.handoff?.from === from && lease.handoff.to === workerId;
    if (!waiting) return { kind: 'dropped', from, leaseKey, confirmed };
    pending.lastSeenPendingAt = sentAt;
    pending.confirmed = true;
    if (this.#options.clock.monotonicNow() - pending.requestedAt >= timeoutMs) {
      return { kind: 'timed-out', from, lease };
    }
    return null;
  }

  /** Stops waiting on one hand-off (its owner was found dead: the lease is taken directly). */
  drop(leaseKey: string): void {
    this.#pending.delete(leaseKey);
  }

  /** Forgets every pending hand-off (the worker stops; the owners hand over and the leases expire). */
  clear(): void {
    this.#pending.clear();
  }
}
