import type { Clock, LeaseStore } from '@kcl/core';
import { LeaseStoreError, systemClock } from '@kcl/core';

/** The operations of a `LeaseStore` that the wrapper can fail, delay or count. */
export type LeaseStoreOperation = {
  [K in keyof LeaseStore]: LeaseStore[K] extends (...args: never[]) => unknown ? K : never;
}[keyof LeaseStore];

export interface FailureOptions {
  /** Retryable failures model outages and timeouts; fatal ones model bugs or revoked permissions. */
  readonly retryable?: boolean;
  /** Only these operations fail (and count towards the number). Default: every operation. */
  readonly operations?: readonly LeaseStoreOperation[];
  readonly message?: string;
}

interface PendingFailure {
  remaining: number;
  readonly retryable: boolean;
  readonly operations: ReadonlySet<LeaseStoreOperation> | null;
  readonly message: string;
  readonly code: 'LEASE_STORE_UNAVAILABLE' | 'LEASE_STORE_THROTTLED' | 'LEASE_STORE_FAILURE';
}

/** Controls the faults a wrapped store injects. Changes apply to the next call. */
export class FaultController {
  readonly #calls = new Map<LeaseStoreOperation, number>();
  #failures: PendingFailure[] = [];
  #unavailable: { readonly retryable: boolean } | null = null;
  #latency: (operation: LeaseStoreOperation) => number = () => 0;

  /** The next `count` matching calls throw a `LeaseStoreError`. */
  failNext(count: number, options: FailureOptions = {}): this {
    const retryable = options.retryable ?? true;
    this.#failures.push({
      remaining: count,
      retryable,
      operations: options.operations === undefined ? null : new Set(options.operations),
      message: options.message ?? (retryable ? 'injected outage' : 'injected fatal failure'),
      code: retryable ? 'LEASE_STORE_UNAVAILABLE' : 'LEASE_STORE_FAILURE',
    });
    return this;
  }

  /** The next `count` matching calls are throttled (a retryable `LEASE_STORE_THROTTLED` error). */
  throttleNext(count: number, operations?: readonly LeaseStoreOperation[]): this {
    this.#failures.push({
      remaining: count,
      retryable: true,
      operations: operations === undefined ? null : new Set(operations),
      message: 'injected throttling',
      code: 'LEASE_STORE_THROTTLED',
    });
    return this;
  }

  /** Every call fails until `restore()`: the store is unreachable. */
  setUnavailable(options: { readonly retryable?: boolean } = {}): this {
    this.#unavailable = { retryable: options.retryable ?? true };
    return this;
  }

  restore(): this {
    this.#unavailable = null;
    this.#failures = [];
    return this;
  }

  /** Delays every call (or each operation by its own amount) on the wrapper's clock. */
  setLatency(latency: number | ((operation: LeaseStoreOperation) => number)): this {
    this.#latency = typeof latency === 'number' ? () => latency : latency;
    return this;
  }

  /** How many times an operation was called (including failed calls). */
  calls(operation: LeaseStoreOperation): number {
    return this.#calls.get(operation) ?? 0;
  }

  get isUnavailable(): boolean {
    return this.#unavailable !== null;
  }

  /** @internal */
  before(operation: LeaseStoreOperation): { latency: number; error: LeaseStoreError | null } {
    this.#calls.set(operation, this.calls(operation) + 1);
    const latency = this.#latency(operation);
    if (this.#unavailable !== null) {
      return {
        latency,
        error: new LeaseStoreError(
          '@kcl/testkit faulty store',
          `${operation}: store unavailable (injected)`,
          {
            retryable: this.#unavailable.retryable,
            code: 'LEASE_STORE_UNAVAILABLE',
          },
        ),
      };
    }
    const failure = this.#failures.find(
      (candidate) => candidate.remaining > 0 && (candidate.operations?.has(operation) ?? true),
    );
    if (failure === undefined) return { latency, error: null };
    failure.remaining -= 1;
    this.#failures = this.#failures.filter((candidate) => candidate.remaining > 0);
    return {
      latency,
      error: new LeaseStoreError('@kcl/testkit faulty store', `${operation}: ${failure.message}`, {
        retryable: failure.retryable,
        code: failure.code,
      }),
    };
  }
}

export interface FaultyLeaseStore extends LeaseStore {
  readonly faults: FaultController;
  readonly inner: LeaseStore;
}

/**
 * Wraps a store so tests can make it fail, throttle or slow down on demand. Everything else passes
 * through unchanged, including capabilities.
 */
export function createFaultyLeaseStore(
  inner: LeaseStore,
  options: { readonly clock?: Clock } = {},
): FaultyLeaseStore {
  const clock = options.clock ?? systemClock;
  const faults = new FaultController();
  const wrap =
    <K extends LeaseStoreOperation>(operation: K) =>
    async (...args: Parameters<LeaseStore[K]>): Promise<Awaited<ReturnType<LeaseStore[K]>>> => {
      const { latency, error } = faults.before(operation);
      if (latency > 0) await clock.sleep(latency);
      if (error !== null) throw error;
      const method = inner[operation] as (
        ...methodArgs: Parameters<LeaseStore[K]>
      ) => ReturnType<LeaseStore[K]>;
      return (await method.apply(inner, args)) as Awaited<ReturnType<LeaseStore[K]>>;
    };

  return {
    specificationVersion: 'v1',
    applicationName: inner.applicationName,
    capabilities: inner.capabilities,
    description: `${inner.description} (with injected faults)`,
    faults,
    inner,
    ensureSchema: wrap('ensureSchema'),
    createLeaseIfAbsent: wrap('createLeaseIfAbsent'),
    getLease: wrap('getLease'),
    listLeases: wrap('listLeases'),
    renewLease: wrap('renewLease'),
    renewLeases: wrap('renewLeases'),
    takeLease: wrap('takeLease'),
    releaseLease: wrap('releaseLease'),
    updateCheckpoint: wrap('updateCheckpoint'),
    updateLeaseMeta: wrap('updateLeaseMeta'),
    deleteLease: wrap('deleteLease'),
    heartbeatWorker: wrap('heartbeatWorker'),
    listWorkers: wrap('listWorkers'),
    removeWorker: wrap('removeWorker'),
    getMigrationMarker: wrap('getMigrationMarker'),
    setMigrationMarker: wrap('setMigrationMarker'),
  };
}
