import type { Lease, LeaseStore, LeaseStoreOperation } from '@kcl/core';
import { interceptLeaseStore } from '@kcl/core';
import {
  createMigratingLeaseStore,
  cutOverLiveMigration,
  readLiveMigrationState,
  startLiveMigration,
} from '@kcl/store-migrate';
import {
  createFaultyLeaseStore,
  createMemoryLeaseStore,
  type FaultController,
  type FaultyLeaseStore,
  MemoryLeaseTable,
} from '@kcl/testkit';
import { observeLeaseTable, processLeaseStore } from './simulated-lease-store.js';
import { type SessionProcess, SimulatedSessions } from './simulated-sessions.js';
import type { FreezableClock, SimulationClock } from './simulation-clock.js';

/** The lease stores of a simulated fleet: one memory store, or a live migration between two. */
export interface SimulatedStores {
  readonly kind: 'memory' | 'migration';
  /** Fault controllers that hit every worker (the schedule picks from them). */
  readonly globalFaults: readonly { readonly name: string; readonly faults: FaultController }[];
  /**
   * The store one worker uses, and the faults for it alone; `session` (a store with sessions) records
   * the sessions the worker's process attaches.
   */
  workerStore(
    clock: FreezableClock,
    session?: SessionProcess,
  ): { readonly store: LeaseStore; readonly faults: FaultController };
  /** The leases as they stand where they are authoritative now. */
  leases(): Promise<Lease[]>;
}

type OnChange = (table: string, before: Lease | undefined, after: Lease | undefined) => void;

function memoryStore(
  applicationName: string,
  clock: SimulationClock,
  table: MemoryLeaseTable,
  sessions: SimulatedSessions | null = null,
): FaultyLeaseStore & { readonly memory: LeaseStore } {
  const memory = createMemoryLeaseStore({
    applicationName,
    table,
    now: () => clock.now(),
    yieldBeforeEachCall: () => Promise.resolve(),
    // Used only by the exactly-once processor; the migrating store declares it absent.
    transactions: true,
    ...(sessions === null ? {} : { sessions: true }),
  });
  const faulty = createFaultyLeaseStore(sessions === null ? memory : sessions.databaseLayer(memory), {
    clock,
  });
  return Object.assign(faulty, { memory });
}

/** One memory store behind a fault layer for everyone, and one per worker; with sessions or without. */
export function simulatedMemoryStores(
  applicationName: string,
  clock: SimulationClock,
  onChange: OnChange,
  options: { readonly sessions?: boolean } = {},
): SimulatedStores & { readonly sessions: SimulatedSessions | null } {
  const table = new MemoryLeaseTable();
  observeLeaseTable(table, applicationName, (before, after) => onChange('store', before, after));
  const sessions = options.sessions === true ? new SimulatedSessions(table, applicationName, clock) : null;
  const global = memoryStore(applicationName, clock, table, sessions);
  return {
    kind: 'memory',
    globalFaults: [{ name: 'the store', faults: global.faults }],
    sessions,
    workerStore(processClock, session) {
      const faulty = createFaultyLeaseStore(global, { clock: processClock });
      const inner =
        sessions === null || session === undefined ? faulty : sessions.processLayer(session, faulty);
      return { store: processLeaseStore(inner, processClock), faults: faulty.faults };
    },
    // Read past the database layer: the simulation looks at the table even while the database is down.
    leases: () => global.memory.leases.list(),
  };
}

/** Writes an operator's tool makes; a kill is injected before one of them. */
const OPERATOR_WRITES = new Set<LeaseStoreOperation>([
  'leases.create',
  'leases.take',
  'leases.release',
  'leases.checkpoint',
  'leases.updateMeta',
  'leases.delete',
  'admin.setMigrationMarker',
]);

/** The operator process running `kcl-migrate`: it can be killed before its n-th write. */
class OperatorStores {
  readonly from: LeaseStore;
  readonly to: LeaseStore;
  #writes = 0;
  #killAt = Number.POSITIVE_INFINITY;

  constructor(from: LeaseStore, to: LeaseStore) {
    this.from = this.#guard(from);
    this.to = this.#guard(to);
  }

  /** The next run dies just before its `write`-th write (1-based), or never. */
  killBefore(write: number): void {
    this.#writes = 0;
    this.#killAt = write;
  }

  #guard(store: LeaseStore): LeaseStore {
    return interceptLeaseStore(store, (operation, options, call) => {
      if (!OPERATOR_WRITES.has(operation)) return call(options);
      this.#writes += 1;
      if (this.#writes >= this.#killAt) {
        this.#killAt = Number.POSITIVE_INFINITY;
        return Promise.reject(new OperatorKilled());
      }
      return call(options);
    });
  }
}

class OperatorKilled extends Error {
  constructor() {
    super('the operator’s process was killed (kill -9)');
    this.name = 'OperatorKilled';
  }
}

export interface LiveMigrationSchedule {
  /** When `kcl-migrate --live` runs (and, later, runs again). */
  readonly liveAt: number;
  readonly liveAgainAt: number;
  /** When the cut-over starts; each attempt but the last is killed before its n-th write. */
  readonly cutOverAt: number;
  readonly killBeforeWrites: readonly number[];
}

/**
 * A fleet moving from one store to another without stopping: every worker runs the migrating store
 * (`createMigratingLeaseStore`), and an operator runs `kcl-migrate --live` (twice) and a cut-over that is
 * killed at a chosen write and run again until it completes. Workers started once it is complete use
 * the target store directly, half of them.
 */
export class SimulatedMigration implements SimulatedStores {
  readonly kind = 'migration' as const;
  readonly globalFaults: readonly { readonly name: string; readonly faults: FaultController }[];
  readonly #source: FaultyLeaseStore;
  readonly #target: FaultyLeaseStore;
  readonly #clock: SimulationClock;
  #complete = false;

  constructor(applicationName: string, clock: SimulationClock, onChange: OnChange) {
    this.#clock = clock;
    const sourceTable = new MemoryLeaseTable();
    const targetTable = new MemoryLeaseTable();
    observeLeaseTable(sourceTable, applicationName, (before, after) => onChange('source', before, after));
    observeLeaseTable(targetTable, applicationName, (before, after) => onChange('target', before, after));
    this.#source = memoryStore(applicationName, clock, sourceTable);
    this.#target = memoryStore(applicationName, clock, targetTable);
    this.globalFaults = [
      { name: 'the source store', faults: this.#source.faults },
      { name: 'the target store', faults: this.#target.faults },
    ];
  }

  /** A new operator process (one command run): its own clock, which a kill freezes. */
  #operatorProcess(): { readonly stores: OperatorStores; readonly clock: FreezableClock } {
    const clock = this.#clock.processClock();
    const stores = new OperatorStores(
      processLeaseStore(createFaultyLeaseStore(this.#source, { clock }), clock),
      processLeaseStore(createFaultyLeaseStore(this.#target, { clock }), clock),
    );
    return { stores, clock };
  }

  /**
   * Runs one command as its own process. An operator who sees it hang (a store call that never
   * answers) for `patienceMs` kills it; the outcome is then `killed`.
   */
  async #command<T>(
    run: (stores: OperatorStores, clock: FreezableClock) => Promise<T>,
    killBefore: number | undefined,
    patienceMs = 30_000,
  ): Promise<
    | { readonly outcome: 'done'; readonly value: T }
    | { readonly outcome: 'failed' | 'killed'; readonly error: unknown }
  > {
    const process = this.#operatorProcess();
    process.stores.killBefore(killBefore ?? Number.POSITIVE_INFINITY);
    const patience = new AbortController();
    const timer = this.#clock.sleep(patienceMs, patience.signal).then(() => 'timeout' as const);
    try {
      const result = await Promise.race([
        run(process.stores, process.clock).then(
          (value) => ({ outcome: 'done' as const, value }),
          (error: unknown) => ({ outcome: 'failed' as const, error }),
        ),
        timer,
      ]);
      if (result === 'timeout') {
        process.clock.freeze();
        return { outcome: 'killed', error: new Error(`it hung for ${patienceMs} ms and was killed`) };
      }
      return result;
    } finally {
      patience.abort();
    }
  }

  get complete(): boolean {
    return this.#complete;
  }

  /** Session liveness is off for a migrating store: `_session` is never used. */
  workerStore(processClock: FreezableClock, _session?: SessionProcess, plainTarget = false) {
    const source = createFaultyLeaseStore(this.#source, { clock: processClock });
    const target = createFaultyLeaseStore(this.#target, { clock: processClock });
    if (plainTarget) return { store: processLeaseStore(target, processClock), faults: target.faults };
    const store = createMigratingLeaseStore({
      from: processLeaseStore(source, processClock),
      to: processLeaseStore(target, processClock),
      phaseRefreshMs: 1_000,
      mirrorTimeoutMs: 500,
      clock: processClock,
    });
    return { store, faults: source.faults };
  }

  async leases(): Promise<Lease[]> {
    const state = await readLiveMigrationState(this.#source.inner, this.#target.inner);
    return state.phase === 'complete' ? this.#target.inner.leases.list() : this.#source.inner.leases.list();
  }

  /** Runs the operator's schedule; `tell` narrates. Resolves once the migration is complete (or gives up). */
  async operate(schedule: LiveMigrationSchedule, tell: (line: string) => void): Promise<void> {
    await this.#clock.sleep(schedule.liveAt);
    await this.#live(tell);
    await this.#clock.sleep(Math.max(0, schedule.liveAgainAt - this.#clock.monotonicNow()));
    await this.#live(tell);
    await this.#clock.sleep(Math.max(0, schedule.cutOverAt - this.#clock.monotonicNow()));
    for (let attempt = 0; attempt < 10 && !this.#complete; attempt++) {
      const killBefore = schedule.killBeforeWrites[attempt];
      tell(
        `operator: kcl-migrate cutover${killBefore === undefined ? '' : ` (killed before its write #${killBefore})`}`,
      );
      const result = await this.#command(
        (stores, clock) =>
          cutOverLiveMigration({
            from: stores.from,
            to: stores.to,
            clock,
            watchMs: 2_000,
            phaseRefreshMs: 1_000,
            settleMarginMs: 1_000,
          }),
        killBefore,
      );
      if (result.outcome === 'done') {
        this.#complete = true;
        tell(
          `operator: cut-over complete (moved ${result.value.moved}, already moved ${result.value.alreadyMoved})`,
        );
      } else {
        tell(`operator: cut-over ${result.outcome}: ${describe(result.error)}`);
        await this.#clock.sleep(1_000);
      }
    }
  }

  async #live(tell: (line: string) => void): Promise<void> {
    for (let attempt = 0; attempt < 3; attempt++) {
      tell('operator: kcl-migrate --live');
      const result = await this.#command(
        (stores, clock) => startLiveMigration({ from: stores.from, to: stores.to, clock }),
        undefined,
      );
      if (result.outcome === 'done') {
        tell(`operator: --live copied ${JSON.stringify(result.value)}`);
        return;
      }
      tell(`operator: --live ${result.outcome}: ${describe(result.error)}`);
      if (result.outcome === 'failed') return;
    }
  }
}

function describe(error: unknown): string {
  return error instanceof Error ? (error.message.split('\n')[0] ?? error.name) : String(error);
}
