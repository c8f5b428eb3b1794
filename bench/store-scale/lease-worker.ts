import type { Clock, KclEvent, Lease, LeaseHandoff, LeaseStore, RandomSource } from '@kcl/core';
import { jitter, noopLogger } from '@kcl/core';
import type { HandoffOutcome, HeldLease, LeasePlanner, RenewalRound } from './consumer-internals.js';
import {
  cleanUpLeases,
  createLeasePlanner,
  HandoffRequests,
  LeaseKeeper,
  linkSignals,
  runRenewalLoop,
  SessionLiveness,
  ShardSync,
} from './consumer-internals.js';

/** The consumer's lease settings (its defaults, `CONSUMER_DEFAULTS`), on the fleet's clock. */
export interface LeaseSettings {
  readonly leaseRenewIntervalMs: number;
  readonly leaseExpiryMs: number;
  readonly rebalanceIntervalMs: number;
  readonly maxLeasesToSteal: number;
  readonly handoffTimeoutMs: number;
  readonly handoffPollIntervalMs: number;
  readonly shardSyncIntervalMs: number;
  readonly leaseCleanupIntervalMs: number;
  readonly livenessCheckIntervalMs: number;
}

export interface LeaseWorkerOptions {
  readonly workerId: string;
  /** The store as the runtime sees it (guarded, with the call deadline). */
  readonly store: LeaseStore;
  readonly settings: LeaseSettings;
  readonly clock: Clock;
  readonly random: RandomSource;
  /** Session liveness as the consumer runs it (the store must have `capabilities.sessionLiveness`). */
  readonly liveness: boolean;
  /** After each renewal round: what it did and how long it took (fleet ms). */
  readonly onRenewRound: (round: RenewalRound, durationMs: number) => void;
  readonly onStoreError: (operation: string, error: unknown) => void;
  /** A lease this worker took (or was handed). */
  readonly onLeaseTaken: () => void;
  /** A held lease lost (taken by another worker, expired, deleted); not one released or handed over. */
  readonly onLeaseLost: () => void;
}

/** No Kinesis here: the shard sync's audit only lists shards when the leases leave a hole, and they never do. */
const NO_KINESIS = {
  name: 'no Kinesis (store-scale bench)',
  listShards: () => Promise.reject(new Error('bench: the store-scale fleet has no Kinesis')),
  getShardIterator: () => Promise.reject(new Error('bench: the store-scale fleet has no Kinesis')),
  getRecords: () => Promise.reject(new Error('bench: the store-scale fleet has no Kinesis')),
};

/**
 * One worker of a fleet without Kinesis: the lease side of `Worker` in @kcl/consumer (ARCHITECTURE
 * §3–§4), with the runtime's own parts — `LeaseKeeper` (renewals, expiry, hand-over), the renewal loop
 * and its heartbeat, `createLeasePlanner` on @kcl/rebalancer, `HandoffRequests`, the shard sync's
 * hole audit and the lease cleanup — and its loops at their intervals: renew and heartbeat, rebalance
 * (list leases and workers, reconcile, plan, take or ask for a hand-off), the hand-off checks, the
 * shard sync and the cleanup. What it leaves out has no lease-store side here: shard consumers and
 * their checkpoints (an owner asked for a lease hands it over at once, after the registry check the
 * runtime makes), the stream registry, fan-out, metrics. The rebalance round follows
 * `Worker.#rebalance`; keep the two alike.
 */
export class LeaseWorker {
  readonly workerId: string;
  readonly #options: LeaseWorkerOptions;
  readonly #keeper: LeaseKeeper;
  readonly #planner: LeasePlanner;
  readonly #handoffs: HandoffRequests;
  readonly #settling = new Set<string>();
  readonly #shardSync: ShardSync;
  readonly #taking = new AbortController();
  readonly #renewing = new AbortController();
  #loops: Promise<void>[] = [];
  /** When the loops started (fleet ms): renewals come every renew interval from here. */
  loopsStartedAt = 0;
  #checkingHandoffs: Promise<void> = Promise.resolve();
  readonly #liveness: SessionLiveness | null;
  /** Aborted when the liveness check finds a worker dead: the rebalance loop wakes at once. */
  #wake = new AbortController();
  /** The lease owners and hand-off requesters of the last listing: the liveness check's candidates. */
  #lastListed = new Set<string>();
  /** Workers found dead, with their registry heartbeat then and when (`Worker.#goneWorkers`). */
  readonly #goneWorkers = new Map<string, { readonly heartbeat: number; readonly since: number }>();

  constructor(options: LeaseWorkerOptions) {
    this.#options = options;
    this.workerId = options.workerId;
    const { store, settings, clock, random, workerId } = options;
    const emit = (_event: KclEvent): void => undefined;
    this.#keeper = new LeaseKeeper({
      store,
      workerId,
      leaseExpiryMs: settings.leaseExpiryMs,
      clock,
      logger: noopLogger,
      emit,
      onLost: () => options.onLeaseLost(),
      onHandoffRequested: (held, handoff) => {
        void this.#handOver(held, handoff);
      },
    });
    this.#planner = createLeasePlanner({
      workerId,
      leaseExpiryMs: settings.leaseExpiryMs,
      maxLeasesToSteal: settings.maxLeasesToSteal,
      maxLeasesForWorker: Number.POSITIVE_INFINITY,
      random,
    });
    this.#handoffs = new HandoffRequests({
      store,
      workerId,
      timeoutMs: settings.handoffTimeoutMs,
      leaseExpiryMs: settings.leaseExpiryMs,
      clock,
      onReadError: (_leaseKey, error) => options.onStoreError('read a lease asked for', error),
    });
    this.#liveness = options.liveness
      ? new SessionLiveness({
          store,
          workerId,
          checkIntervalMs: settings.livenessCheckIntervalMs,
          logger: noopLogger,
          onDead: () => this.#wake.abort(),
        })
      : null;
    this.#shardSync = new ShardSync({
      store,
      stream: NO_KINESIS,
      initialPosition: 'TRIM_HORIZON',
      workerId,
      clock,
      logger: noopLogger,
      emit,
    });
  }

  /** Leases held now (and not locally expired). */
  heldLeaseKeys(): string[] {
    return this.#keeper.held().map((held) => held.leaseKey);
  }

  get pendingHandoffs(): number {
    return this.#handoffs.size;
  }

  /** The start without Kinesis: register, read the leases, then the loops (as `Worker.start`). */
  async start(): Promise<void> {
    const { store, clock, settings } = this.#options;
    const liveness = this.#liveness;
    if (liveness !== null && !(await liveness.attach())) {
      throw new Error(`bench: ${this.workerId} could not attach its liveness session`);
    }
    await store.workers.heartbeat(this.workerId, { startedAt: new Date(clock.now()).toISOString() });
    await store.leases.list();
    this.loopsStartedAt = clock.monotonicNow();
    this.#loops = [
      this.#keeper.watchExpiry(this.#renewing.signal),
      runRenewalLoop({
        keeper: this.#keeper,
        renewIntervalMs: settings.leaseRenewIntervalMs,
        clock,
        random: this.#options.random,
        onRound: (round, _held, durationMs) => this.#options.onRenewRound(round, durationMs),
        onStoreError: this.#options.onStoreError,
        heartbeat: () =>
          store.workers.heartbeat(this.workerId).then(
            () => undefined,
            (error: unknown) => this.#options.onStoreError('heartbeat', error),
          ),
        signal: this.#renewing.signal,
      }),
      this.#rebalanceLoop(),
      this.#periodic(settings.shardSyncIntervalMs, async () => {
        await store.admin.getMigrationMarker();
        await this.#shardSync.audit(this.#taking.signal);
      }),
      this.#periodic(settings.leaseCleanupIntervalMs, () =>
        cleanUpLeases({
          store,
          streamOf: () => null,
          workerId: this.workerId,
          logger: noopLogger,
          emit: () => undefined,
          onGarbageDeleted: () => undefined,
          signal: this.#taking.signal,
        }),
      ),
      this.#periodic(settings.handoffPollIntervalMs, () => this.#checkHandoffs()),
      ...(liveness === null
        ? []
        : [
            this.#periodic(settings.livenessCheckIntervalMs, async () => {
              // As `Worker.#checkLiveness`.
              const since = clock.monotonicNow() - settings.leaseExpiryMs;
              const watched = [...this.#goneWorkers].flatMap(([workerId, gone]) =>
                gone.since >= since && !liveness.dead().has(workerId) ? [workerId] : [],
              );
              await liveness.check(this.#lastListed, watched);
              for (const workerId of liveness.watchedLive()) this.#goneWorkers.delete(workerId);
            }),
          ]),
    ];
  }

  /** As `kill -9`: every loop stops, nothing is written, the leases expire for the others. */
  async kill(): Promise<void> {
    this.#taking.abort();
    this.#renewing.abort();
    for (const held of this.#keeper.held()) this.#keeper.abandon(held);
    this.#handoffs.clear();
    await Promise.allSettled(this.#loops);
    // The process is gone: the database ends its session.
    await this.#liveness?.close();
  }

  async #periodic(intervalMs: number, work: () => Promise<void>): Promise<void> {
    const { clock } = this.#options;
    const signal = this.#taking.signal;
    await clock.sleep(intervalMs, signal);
    while (!signal.aborted) {
      await work().catch((error: unknown) => this.#options.onStoreError('periodic task', error));
      await clock.sleep(intervalMs, signal);
    }
  }

  async #rebalanceLoop(): Promise<void> {
    const { clock, settings, random } = this.#options;
    const signal = this.#taking.signal;
    while (!signal.aborted) {
      if (this.#wake.signal.aborted) this.#wake = new AbortController();
      await this.#rebalance();
      const link = linkSignals(signal, this.#wake.signal);
      try {
        await clock.sleep(jitter(settings.rebalanceIntervalMs, 0.25, random), link.signal);
      } finally {
        link.dispose();
      }
    }
  }

  async #rebalance(): Promise<void> {
    const { store, clock } = this.#options;
    let leases: Lease[];
    let workers: Awaited<ReturnType<LeaseStore['workers']['list']>>;
    const listedAt = clock.monotonicNow();
    try {
      [leases, workers] = await Promise.all([store.leases.list(), store.workers.list({ metadata: false })]);
    } catch (error) {
      this.#options.onStoreError('list leases', error);
      return;
    }
    if (this.#taking.signal.aborted) return;
    this.#lastListed = new Set(
      leases.flatMap((lease) => [
        ...(lease.owner === null ? [] : [lease.owner]),
        ...(lease.handoff === null ? [] : [lease.handoff.to]),
      ]),
    );
    if (this.#liveness !== null) {
      const heartbeats = new Map(workers.map((worker) => [worker.workerId, worker.heartbeat]));
      for (const [workerId, gone] of this.#goneWorkers) {
        if (heartbeats.get(workerId) !== gone.heartbeat) this.#goneWorkers.delete(workerId);
      }
      for (const workerId of this.#liveness.dead()) {
        const heartbeat = heartbeats.get(workerId);
        if (heartbeat !== undefined && !this.#goneWorkers.has(workerId)) {
          this.#goneWorkers.set(workerId, { heartbeat, since: clock.monotonicNow() });
        }
      }
    }
    this.#keeper.reconcile(leases);
    this.#adoptHandoffs(leases, listedAt);
    const plan = this.#planner.plan({
      leases,
      workers,
      heldLeaseKeys: new Set(this.heldLeaseKeys()),
      now: clock.monotonicNow(),
      wallNow: clock.now(),
      waitingHandoffs: new Set([...this.#handoffs.keys(), ...this.#settling]),
      ...(this.#liveness === null
        ? {}
        : { deadOwners: this.#liveness.dead(), goneWorkers: new Set(this.#goneWorkers.keys()) }),
    });
    for (const { lease, stolen } of plan.take) {
      if (this.#taking.signal.aborted) return;
      if (stolen && lease.owner !== null && lease.owner !== this.workerId && lease.handoff === null) {
        await this.#requestHandoff(lease);
      } else if (!this.#settling.has(lease.leaseKey)) {
        // A hand-off waited on is settled by the hand-off checks, unless its owner was found dead.
        if (this.#handoffs.has(lease.leaseKey)) {
          if (lease.owner === null || this.#liveness?.dead().has(lease.owner) !== true) continue;
          this.#handoffs.drop(lease.leaseKey);
        }
        await this.#takeNow(lease);
      }
    }
  }

  async #takeNow(lease: Lease): Promise<boolean> {
    const { store, clock } = this.#options;
    if (this.#keeper.get(lease.leaseKey) !== undefined) return false;
    const sentAt = clock.monotonicNow();
    try {
      const result = await store.leases.take(lease.leaseKey, lease.leaseCounter, this.workerId);
      if (!result.ok) return false;
      this.#adopt(result.lease, sentAt);
      return true;
    } catch (error) {
      this.#options.onStoreError('take lease', error);
      return false;
    }
  }

  #adopt(lease: Lease, writeSentAt: number): void {
    if (this.#taking.signal.aborted) return;
    this.#planner.recordTake(lease, writeSentAt);
    this.#keeper.adopt(lease, writeSentAt);
    this.#options.onLeaseTaken();
  }

  async #requestHandoff(lease: Lease): Promise<void> {
    if (this.#handoffs.has(lease.leaseKey) || this.#keeper.get(lease.leaseKey) !== undefined) return;
    try {
      await this.#handoffs.request(lease);
    } catch (error) {
      this.#options.onStoreError('request hand-off', error);
    }
  }

  #adoptHandoffs(leases: readonly Lease[], listedAt: number): void {
    for (const lease of leases) {
      if (this.#settling.has(lease.leaseKey) || this.#keeper.get(lease.leaseKey) !== undefined) continue;
      this.#handoffs.adopt(lease, listedAt);
    }
  }

  #checkHandoffs(): Promise<void> {
    this.#checkingHandoffs = this.#checkingHandoffs.then(() => this.#checkHandoffsNow());
    return this.#checkingHandoffs;
  }

  async #checkHandoffsNow(): Promise<void> {
    if (this.#handoffs.size === 0) return;
    const settling = [...this.#handoffs.keys()];
    for (const leaseKey of settling) this.#settling.add(leaseKey);
    try {
      for (const outcome of await this.#handoffs.check()) await this.#settle(outcome);
    } finally {
      for (const leaseKey of settling) this.#settling.delete(leaseKey);
    }
  }

  async #settle(outcome: HandoffOutcome): Promise<void> {
    if (outcome.kind === 'dropped') return;
    if (outcome.kind === 'received') {
      if (this.#keeper.get(outcome.lease.leaseKey) === undefined) {
        this.#adopt(outcome.lease, outcome.writeSentAt);
      }
      return;
    }
    if (!this.#taking.signal.aborted) await this.#takeNow(outcome.lease);
  }

  /**
   * The owner's side of a hand-off (`ShardConsumer.#giveUp` once its processor has checkpointed; no
   * processor here): a requester that left the registry gets nothing (the lease is released),
   * otherwise the lease is handed over before the requester's deadline.
   */
  async #handOver(held: HeldLease, handoff: LeaseHandoff): Promise<void> {
    const { store, clock } = this.#options;
    let registered = true;
    try {
      registered = (await store.workers.list({ metadata: false })).some(
        (worker) => worker.workerId === handoff.to,
      );
    } catch (error) {
      this.#options.onStoreError('read the worker registry before a hand-off', error);
    }
    if (!registered) {
      await this.#keeper.release(held);
      return;
    }
    const left = handoff.deadline === null ? 0 : handoff.deadline.getTime() - clock.now();
    await this.#keeper.completeHandoff(held, clock.monotonicNow() + Math.max(0, left));
  }
}
