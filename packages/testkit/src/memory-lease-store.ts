import type {
  CheckpointUpdate,
  Lease,
  LeaseHandoff,
  LeaseInit,
  LeaseMetaUpdate,
  LeaseRenewal,
  LeaseRepository,
  LeaseStore,
  LeaseStoreAdministration,
  LeaseWriteResult,
  MigrationMarker,
  StoreCallOptions,
  TransactionalCheckpointResult,
  TransactionalCheckpointWork,
  WorkerRecord,
  WorkerRegistry,
  WorkerSession,
} from '@kcl/core';
import {
  ConfigurationError,
  compareLeaseKeys,
  handoffProblem,
  LeaseStoreError,
  leaseFromInit,
  uniqueSorted,
} from '@kcl/core';

/** What a memory table keeps per application. */
export interface ApplicationState {
  readonly leases: Map<string, Lease>;
  readonly workers: Map<string, WorkerRecord>;
  /** The worker ids whose simulated session is held, each with the token of the session holding it. */
  readonly sessions: Map<string, symbol>;
  marker: MigrationMarker | null;
}

/**
 * The backing "table" of memory stores. Stores built on the same table share it the way applications
 * share one physical lease table, each seeing only its own rows.
 */
export class MemoryLeaseTable {
  readonly #applications = new Map<string, ApplicationState>();

  /** The state of one application, created on first use. */
  application(applicationName: string): ApplicationState {
    let state = this.#applications.get(applicationName);
    if (state === undefined) {
      state = { leases: new Map(), workers: new Map(), sessions: new Map(), marker: null };
      this.#applications.set(applicationName, state);
    }
    return state;
  }

  /** Every stored lease of one application, as stored (the conformance suite's backdoor). */
  rawLeases(applicationName: string): Lease[] {
    return [...this.application(applicationName).leases.values()];
  }

  applicationNames(): string[] {
    return [...this.#applications.keys()];
  }

  /**
   * Ends the simulated session of a worker, as a database does when the worker's process dies or its
   * connection is cut (stores created with `sessions: true`): its `check()` resolves false from now on,
   * `liveSessions` no longer lists it and it may attach again. False when it had none.
   */
  dropWorkerSession(applicationName: string, workerId: string): boolean {
    return this.application(applicationName).sessions.delete(workerId);
  }
}

export interface MemoryLeaseStoreOptions {
  readonly applicationName: string;
  /** Share a table between stores to model applications sharing one physical table. */
  readonly table?: MemoryLeaseTable;
  /** The wall clock for worker heartbeat timestamps. */
  readonly now?: () => number;
  /**
   * How a call yields before it acts (default: one event-loop turn). A simulation whose time only
   * moves between event-loop turns passes a microtask yield instead.
   */
  readonly yieldBeforeEachCall?: () => Promise<void>;
  /**
   * Simulated session liveness (default false): `capabilities.sessionLiveness` is true and the store
   * has `workers.attachSession` and `workers.liveSessions`, with one session per worker id in the
   * table. Nothing ends a session by itself: `dropWorkerSession` does what a dead process or a cut
   * connection does to a database session.
   */
  readonly sessions?: boolean;
  /**
   * Simulated transactional checkpoints (default false): `capabilities.transactionalCheckpoint` is
   * true and `leases.checkpointInTransaction` hands `work` a `MemoryTransaction`, whose commit actions
   * run in the same step as the fenced checkpoint write, and only when it applies.
   */
  readonly transactions?: boolean;
}

/**
 * The transaction a memory store with `transactions: true` hands to `checkpointInTransaction`'s work:
 * the application registers what its commit does (an insert into an array, say), and the store runs
 * it atomically with the checkpoint write when the write applies, never otherwise.
 */
export interface MemoryTransaction {
  onCommit(action: () => void): void;
}

export interface MemoryLeaseStore extends LeaseStore {
  readonly table: MemoryLeaseTable;
  /** `table.dropWorkerSession` for this store's application. */
  dropWorkerSession(workerId: string): boolean;
}

/**
 * The reference `LeaseStore`: every rule of the contract, kept in memory. Each call yields to the event
 * loop once before it acts, so concurrent callers interleave as they would against a real store, while
 * each operation itself is atomic.
 */
export function createMemoryLeaseStore(options: MemoryLeaseStoreOptions): MemoryLeaseStore {
  if (typeof options.applicationName !== 'string' || options.applicationName.length === 0) {
    throw new ConfigurationError('@kcl/testkit memory store', ['applicationName must be a non-empty string']);
  }
  const applicationName = options.applicationName;
  const table = options.table ?? new MemoryLeaseTable();
  const now = options.now ?? Date.now;
  const tick = options.yieldBeforeEachCall ?? nextTurn;
  const sessions = options.sessions ?? false;
  if (typeof sessions !== 'boolean') {
    throw new ConfigurationError('@kcl/testkit memory store', ['sessions must be a boolean']);
  }
  const transactions = options.transactions ?? false;
  if (typeof transactions !== 'boolean') {
    throw new ConfigurationError('@kcl/testkit memory store', ['transactions must be a boolean']);
  }
  const state = (): ApplicationState => table.application(applicationName);
  const description = `memory store (application ${JSON.stringify(applicationName)})`;
  /** The sessions this store attached, which its `close()` ends. */
  const attached = new Map<symbol, string>();

  const conditional = async (
    leaseKey: string,
    leaseCounter: number,
    change: (lease: Lease) => Omit<Lease, 'leaseCounter' | 'leaseKey'>,
  ): Promise<LeaseWriteResult> => {
    await tick();
    const leases = state().leases;
    const current = leases.get(leaseKey);
    if (current === undefined) return { ok: false, reason: 'not-found' };
    if (current.leaseCounter !== leaseCounter) return { ok: false, reason: 'counter-mismatch' };
    const next = freeze({ ...change(current), leaseKey, leaseCounter: current.leaseCounter + 1 });
    leases.set(leaseKey, next);
    return { ok: true, lease: next };
  };

  const renew = (leaseKey: string, leaseCounter: number): Promise<LeaseWriteResult> =>
    conditional(leaseKey, leaseCounter, (lease) => lease);

  const checkpointInTransaction = async <T>(
    leaseKey: string,
    leaseCounter: number,
    work: TransactionalCheckpointWork<T>,
    options?: StoreCallOptions,
  ): Promise<TransactionalCheckpointResult<T>> => {
    const actions: Array<() => void> = [];
    let open = true;
    const transaction: MemoryTransaction = {
      onCommit(action) {
        if (!open) throw new Error('@kcl/testkit memory store: the transaction has ended');
        actions.push(action);
      },
    };
    let decision: Awaited<ReturnType<TransactionalCheckpointWork<T>>>;
    try {
      decision = await work(transaction);
    } finally {
      open = false;
    }
    options?.signal?.throwIfAborted();
    await tick();
    const stored = state().leases;
    const current = stored.get(leaseKey);
    if (current === undefined) return { ok: false, reason: 'not-found' };
    if (current.leaseCounter !== leaseCounter) return { ok: false, reason: 'counter-mismatch' };
    const next = freeze({
      ...current,
      checkpoint: decision.update.checkpoint,
      pendingCheckpoint: decision.update.pendingCheckpoint ?? null,
      ownerSwitchesSinceCheckpoint: 0,
      leaseCounter: current.leaseCounter + 1,
    });
    // One commit: the application's writes and the lease row apply together (synchronously). The
    // writes go first, so whoever watches the lease table (a checkpoint at SHARD_END, say) already sees
    // the rows committed with it.
    for (const action of actions) action();
    stored.set(leaseKey, next);
    return { ok: true, lease: next, value: decision.value };
  };

  const leases: LeaseRepository = {
    async list() {
      await tick();
      return [...state().leases.values()].sort((a, b) => compareLeaseKeys(a.leaseKey, b.leaseKey));
    },

    async get(leaseKey) {
      await tick();
      return state().leases.get(leaseKey) ?? null;
    },

    async create(init: LeaseInit) {
      await tick();
      const stored = state().leases;
      const problem = init.handoff == null ? null : handoffProblem(init.handoff, init.owner ?? null);
      if (problem !== null) throw new ConfigurationError('@kcl/testkit memory store', [problem]);
      if (stored.has(init.leaseKey)) return { ok: false, reason: 'already-exists' };
      const lease = freeze(leaseFromInit(init));
      stored.set(init.leaseKey, lease);
      return { ok: true, lease };
    },

    renew,

    async renewMany(renewals: readonly LeaseRenewal[]) {
      return Promise.all(renewals.map((renewal) => renew(renewal.leaseKey, renewal.leaseCounter)));
    },

    take(leaseKey, leaseCounter, owner) {
      return conditional(leaseKey, leaseCounter, (lease) => ({
        ...lease,
        owner,
        // Only a change from another owner is a switch, as the Java KCL counts it: a free lease has none.
        ownerSwitchesSinceCheckpoint:
          lease.owner === null || lease.owner === owner
            ? lease.ownerSwitchesSinceCheckpoint
            : lease.ownerSwitchesSinceCheckpoint + 1,
        handoff: null,
      }));
    },

    release(leaseKey, leaseCounter) {
      return conditional(leaseKey, leaseCounter, (lease) => ({ ...lease, owner: null, handoff: null }));
    },

    async requestHandoff(leaseKey, leaseCounter, handoff: LeaseHandoff) {
      const problem = handoffProblem(handoff);
      if (problem !== null) throw new ConfigurationError('@kcl/testkit memory store', [problem]);
      await tick();
      const stored = state().leases;
      const current = stored.get(leaseKey);
      if (current === undefined) return { ok: false, reason: 'not-found' };
      if (current.leaseCounter !== leaseCounter) return { ok: false, reason: 'counter-mismatch' };
      if (current.owner !== handoff.from || current.handoff !== null)
        return { ok: false, reason: 'handoff-mismatch' };
      // The counter stays: the owner's renewals go on and bring the request back to it.
      const next = freeze({ ...current, handoff: Object.freeze({ ...handoff }) });
      stored.set(leaseKey, next);
      return { ok: true, lease: next };
    },

    async completeHandoff(leaseKey, leaseCounter) {
      await tick();
      const stored = state().leases;
      const current = stored.get(leaseKey);
      if (current === undefined) return { ok: false, reason: 'not-found' };
      if (current.leaseCounter !== leaseCounter) return { ok: false, reason: 'counter-mismatch' };
      if (current.handoff === null) return { ok: false, reason: 'handoff-mismatch' };
      const next = freeze({
        ...current,
        owner: current.handoff.to,
        ownerSwitchesSinceCheckpoint: current.ownerSwitchesSinceCheckpoint + 1,
        handoff: null,
        leaseCounter: current.leaseCounter + 1,
      });
      stored.set(leaseKey, next);
      return { ok: true, lease: next };
    },

    checkpoint(leaseKey, leaseCounter, update: CheckpointUpdate) {
      return conditional(leaseKey, leaseCounter, (lease) => ({
        ...lease,
        checkpoint: update.checkpoint,
        pendingCheckpoint: update.pendingCheckpoint ?? null,
        ownerSwitchesSinceCheckpoint: 0,
      }));
    },

    ...(transactions ? { checkpointInTransaction } : {}),

    async updateMeta(leaseKey, update: LeaseMetaUpdate) {
      await tick();
      const stored = state().leases;
      const current = stored.get(leaseKey);
      if (current === undefined) return null;
      const next = freeze({
        ...current,
        childShardIds:
          update.childShardIds === undefined ? current.childShardIds : uniqueSorted(update.childShardIds),
        hashKeyRange: update.hashKeyRange ?? current.hashKeyRange,
      });
      stored.set(leaseKey, next);
      return next;
    },

    async delete(leaseKey) {
      await tick();
      state().leases.delete(leaseKey);
    },
  };

  const workers: WorkerRegistry = {
    async heartbeat(workerId, metadata) {
      await tick();
      const registered = state().workers;
      const previous = registered.get(workerId);
      const record: WorkerRecord = Object.freeze({
        workerId,
        heartbeat: (previous?.heartbeat ?? 0) + 1,
        lastHeartbeatAt: new Date(now()),
        metadata: Object.freeze({ ...(metadata ?? previous?.metadata ?? {}) }),
      });
      registered.set(workerId, record);
      return record;
    },

    async list(options) {
      await tick();
      const workers = [...state().workers.values()].sort((a, b) => compareLeaseKeys(a.workerId, b.workerId));
      if (options?.metadata !== false) return workers;
      return workers.map((worker) => Object.freeze({ ...worker, metadata: Object.freeze({}) }));
    },

    async remove(workerId) {
      await tick();
      state().workers.delete(workerId);
    },

    ...(sessions ? sessionCalls(state, tick, description, attached) : {}),
  };

  const admin: LeaseStoreAdministration = {
    async ensureSchema() {
      await tick();
      state();
    },

    async getMigrationMarker() {
      await tick();
      return state().marker;
    },

    async setMigrationMarker(marker) {
      await tick();
      state().marker = marker === null ? null : Object.freeze({ ...marker });
    },

    async scan() {
      return { leases: await leases.list(), unreadable: [] };
    },
  };

  return {
    specificationVersion: 'v2',
    applicationName,
    capabilities: {
      batchRenew: true,
      consistentReads: true,
      sessionLiveness: sessions,
      ...(transactions ? { transactionalCheckpoint: true } : {}),
    },
    description,
    table,
    leases,
    workers,
    admin,
    dropWorkerSession: (workerId) => table.dropWorkerSession(applicationName, workerId),
    async close() {
      const held = state().sessions;
      for (const [token, workerId] of attached) if (held.get(workerId) === token) held.delete(workerId);
      attached.clear();
    },
  };
}

/** The simulated sessions: one per worker id in the application's state, held until closed or dropped. */
function sessionCalls(
  state: () => ApplicationState,
  tick: () => Promise<void>,
  description: string,
  attached: Map<symbol, string>,
): Required<Pick<WorkerRegistry, 'attachSession' | 'liveSessions'>> {
  return {
    async attachSession(workerId, options) {
      if (typeof workerId !== 'string' || workerId.length === 0) {
        throw new ConfigurationError('@kcl/testkit memory store', ['workerId must be a non-empty string']);
      }
      await tick();
      options?.signal?.throwIfAborted();
      const held = state().sessions;
      if (held.has(workerId)) {
        throw new LeaseStoreError(
          description,
          `${description}: worker ${JSON.stringify(workerId)} already has a session (the same worker id running twice, or its previous session not ended yet); try again later`,
          { code: 'WORKER_SESSION_HELD', retryable: true },
        );
      }
      const token = Symbol(workerId);
      held.set(workerId, token);
      attached.set(token, workerId);
      const session: WorkerSession = {
        workerId,
        async check() {
          await tick();
          return state().sessions.get(workerId) === token;
        },
        async close() {
          await tick();
          attached.delete(token);
          if (state().sessions.get(workerId) === token) state().sessions.delete(workerId);
        },
      };
      return session;
    },

    async liveSessions(workerIds) {
      await tick();
      const held = state().sessions;
      return new Set(workerIds.filter((workerId) => held.has(workerId)));
    },
  };
}

function freeze(lease: Lease): Lease {
  return Object.freeze({
    ...lease,
    parentShardIds: Object.freeze([...lease.parentShardIds]),
    childShardIds: Object.freeze([...lease.childShardIds]),
  });
}

function nextTurn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}
