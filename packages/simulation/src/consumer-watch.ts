import type { Ledger } from './ledger.js';

/** One processor instance: a lease incarnation as one worker's shard consumer serves it. */
export interface ProcessorInstance {
  readonly id: number;
  readonly workerId: string;
  readonly leaseKey: string;
  readonly createdAt: number;
  live: boolean;
  /** When its worker noticed the lease was lost (a `lease-lost` event), or null. */
  lossNoticedAt: number | null;
}

/**
 * Watches processor instances for the ownership invariants: at most one live instance per lease in a
 * worker, no delivery by an instance later than the documented window after its lease went to
 * another owner (or was deleted), and — when asked — no delivery begun after its worker noticed the
 * lease was lost.
 */
export class ConsumerWatch {
  readonly #ledger: Ledger;
  readonly #now: () => number;
  readonly #windowMs: number;
  readonly #live = new Map<string, ProcessorInstance>();
  /** Per lease key: when the stored owner changed, and to whom. */
  readonly #owners = new Map<string, Array<{ readonly at: number; readonly owner: string | null }>>();
  #nextId = 1;
  /** Whether a delivery begun after the worker noticed the loss of its lease is a violation. */
  checkDeliveriesAfterLoss = false;

  constructor(ledger: Ledger, now: () => number, windowMs: number) {
    this.#ledger = ledger;
    this.#now = now;
    this.#windowMs = windowMs;
  }

  /** A worker noticed it lost a lease (a `lease-lost` event): its instance for it must deliver no more. */
  lossNoticed(workerId: string, leaseKey: string): void {
    const instance = this.#live.get(`${workerId}\u0000${leaseKey}`);
    if (instance !== undefined) instance.lossNoticedAt ??= this.#now();
  }

  /** The store saw the owner of a lease change. */
  ownerChanged(leaseKey: string, owner: string | null): void {
    const changes = this.#owners.get(leaseKey) ?? [];
    changes.push({ at: this.#now(), owner });
    this.#owners.set(leaseKey, changes);
  }

  begin(workerId: string, leaseKey: string): ProcessorInstance {
    const key = `${workerId}\u0000${leaseKey}`;
    const existing = this.#live.get(key);
    if (existing?.live === true) {
      this.#ledger.violate(
        'two-consumers-in-worker',
        `${workerId} started a second consumer for ${leaseKey} while instance #${existing.id} (from ${existing.createdAt} ms) was still running`,
      );
    }
    const instance: ProcessorInstance = {
      id: this.#nextId++,
      workerId,
      leaseKey,
      createdAt: this.#now(),
      live: true,
      lossNoticedAt: null,
    };
    this.#live.set(key, instance);
    return instance;
  }

  end(instance: ProcessorInstance): void {
    instance.live = false;
    const key = `${instance.workerId}\u0000${instance.leaseKey}`;
    if (this.#live.get(key) === instance) this.#live.delete(key);
  }

  /** A crashed worker's instances are gone with it. */
  crashed(workerId: string): void {
    for (const [key, instance] of [...this.#live]) {
      if (instance.workerId === workerId) {
        instance.live = false;
        this.#live.delete(key);
      }
    }
  }

  /** An instance starts delivering (processRecords, or a pipeline handler). */
  delivering(instance: ProcessorInstance): void {
    if (this.checkDeliveriesAfterLoss && instance.lossNoticedAt !== null) {
      this.#ledger.violate(
        'delivered-after-loss',
        `${instance.workerId} instance #${instance.id} began a delivery on ${instance.leaseKey} at ${this.#now()} ms, after its worker noticed at ${instance.lossNoticedAt} ms that the lease was lost`,
      );
    }
    const lostAt = this.#lostAt(instance);
    if (lostAt !== null && this.#now() > lostAt + this.#windowMs) {
      this.#ledger.violate(
        'overlap-window',
        `${instance.workerId} delivered on ${instance.leaseKey} at ${this.#now()} ms, ${this.#now() - lostAt} ms after the lease went to another owner at ${lostAt} ms (window ${this.#windowMs} ms)`,
      );
    }
  }

  #lostAt(instance: ProcessorInstance): number | null {
    for (const change of this.#owners.get(instance.leaseKey) ?? []) {
      if (change.at > instance.createdAt && change.owner !== instance.workerId) return change.at;
    }
    return null;
  }
}
