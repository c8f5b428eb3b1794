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
  WorkerRecord,
  WorkerRegistry,
} from '@kcl/core';
import { ConfigurationError, compareLeaseKeys, handoffProblem, leaseFromInit, uniqueSorted } from '@kcl/core';

/** What a memory table keeps per application. */
export interface ApplicationState {
  readonly leases: Map<string, Lease>;
  readonly workers: Map<string, WorkerRecord>;
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
      state = { leases: new Map(), workers: new Map(), marker: null };
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
}

export interface MemoryLeaseStore extends LeaseStore {
  readonly table: MemoryLeaseTable;
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
  const state = (): ApplicationState => table.application(applicationName);

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

    async list() {
      await tick();
      return [...state().workers.values()].sort((a, b) => compareLeaseKeys(a.workerId, b.workerId));
    },

    async remove(workerId) {
      await tick();
      state().workers.delete(workerId);
    },
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
    capabilities: { batchRenew: true, consistentReads: true },
    description: `memory store (application ${JSON.stringify(applicationName)})`,
    table,
    leases,
    workers,
    admin,
    async close() {},
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
