import type { Clock, LeaseStore, LeaseStoreOperation, WorkerSession } from '@kcl/core';
import { interceptLeaseStore, LeaseStoreError, systemClock } from '@kcl/core';

export type { LeaseStoreOperation } from '@kcl/core';

export interface FailureOptions {
  /** Retryable failures model outages and timeouts; fatal ones model bugs or revoked permissions. */
  readonly retryable?: boolean;
  /** Only these operations fail (and count towards the number). Default: every operation. */
  readonly operations?: readonly LeaseStoreOperation[];
  readonly message?: string;
}

interface PendingFailure {
  remaining: number;
  /**
   * `fail`: the call throws without reaching the store. `lose-response`: the call reaches the store
   * (a write applies) and then throws, as when the response is lost on the way back. `hang`: the call
   * waits `hangMs` (forever when infinite) before it reaches the store.
   */
  readonly kind: 'fail' | 'lose-response' | 'hang';
  readonly retryable: boolean;
  readonly operations: ReadonlySet<LeaseStoreOperation> | null;
  readonly message: string;
  readonly code: 'LEASE_STORE_UNAVAILABLE' | 'LEASE_STORE_THROTTLED' | 'LEASE_STORE_FAILURE';
  readonly hangMs: number;
}

/** What the wrapper does to one call. */
export interface InjectedFault {
  readonly latency: number;
  /** Thrown before the call reaches the store. */
  readonly error: LeaseStoreError | null;
  /** Thrown after the call reached the store (its write applied): a lost response. */
  readonly errorAfter: LeaseStoreError | null;
  /** Extra wait before the call reaches the store (Infinity: it never does). */
  readonly hangMs: number;
}

/** Controls the faults a wrapped store injects. Changes apply to the next call. */
export class FaultController {
  readonly #calls = new Map<LeaseStoreOperation, number>();
  #failures: PendingFailure[] = [];
  #unavailable: { readonly retryable: boolean } | null = null;
  #latency: (operation: LeaseStoreOperation) => number = () => 0;
  #flaky: { readonly probability: number; readonly random: () => number } | null = null;

  /** The next `count` matching calls throw a `LeaseStoreError`. */
  failNext(count: number, options: FailureOptions = {}): this {
    const retryable = options.retryable ?? true;
    this.#failures.push({
      remaining: count,
      kind: 'fail',
      retryable,
      operations: options.operations === undefined ? null : new Set(options.operations),
      message: options.message ?? (retryable ? 'injected outage' : 'injected fatal failure'),
      code: retryable ? 'LEASE_STORE_UNAVAILABLE' : 'LEASE_STORE_FAILURE',
      hangMs: 0,
    });
    return this;
  }

  /**
   * The next `count` matching calls apply in the store and then throw a retryable error, as when the
   * response is lost on the way back: the caller cannot tell whether its write applied.
   */
  loseResponseNext(count: number, operations?: readonly LeaseStoreOperation[]): this {
    this.#failures.push({
      remaining: count,
      kind: 'lose-response',
      retryable: true,
      operations: operations === undefined ? null : new Set(operations),
      message: 'injected lost response (the call applied)',
      code: 'LEASE_STORE_UNAVAILABLE',
      hangMs: 0,
    });
    return this;
  }

  /**
   * The next `count` matching calls wait `hangMs` on the wrapper's clock before they reach the store
   * (and then apply, late). `Infinity` makes them hang for good.
   */
  hangNext(count: number, hangMs: number, operations?: readonly LeaseStoreOperation[]): this {
    this.#failures.push({
      remaining: count,
      kind: 'hang',
      retryable: true,
      operations: operations === undefined ? null : new Set(operations),
      message: 'injected hang',
      code: 'LEASE_STORE_UNAVAILABLE',
      hangMs,
    });
    return this;
  }

  /** The next `count` matching calls are throttled (a retryable `LEASE_STORE_THROTTLED` error). */
  throttleNext(count: number, operations?: readonly LeaseStoreOperation[]): this {
    this.#failures.push({
      remaining: count,
      kind: 'fail',
      retryable: true,
      operations: operations === undefined ? null : new Set(operations),
      message: 'injected throttling',
      code: 'LEASE_STORE_THROTTLED',
      hangMs: 0,
    });
    return this;
  }

  /** Every call fails until `restore()`: the store is unreachable. */
  setUnavailable(options: { readonly retryable?: boolean } = {}): this {
    this.#unavailable = { retryable: options.retryable ?? true };
    return this;
  }

  /**
   * Every call fails (retryably) with this probability, drawn from `random` (a seeded source keeps a
   * run reproducible), until `restore()`: a degraded store.
   */
  setFailureProbability(probability: number, random: () => number): this {
    this.#flaky = { probability, random };
    return this;
  }

  restore(): this {
    this.#unavailable = null;
    this.#failures = [];
    this.#flaky = null;
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
  before(operation: LeaseStoreOperation): InjectedFault {
    this.#calls.set(operation, this.calls(operation) + 1);
    const latency = this.#latency(operation);
    if (this.#unavailable !== null) {
      return {
        latency,
        errorAfter: null,
        hangMs: 0,
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
    if (this.#flaky !== null && this.#flaky.random() < this.#flaky.probability) {
      return {
        latency,
        errorAfter: null,
        hangMs: 0,
        error: new LeaseStoreError('@kcl/testkit faulty store', `${operation}: injected flaky failure`, {
          retryable: true,
          code: 'LEASE_STORE_UNAVAILABLE',
        }),
      };
    }
    const failure = this.#failures.find(
      (candidate) => candidate.remaining > 0 && (candidate.operations?.has(operation) ?? true),
    );
    if (failure === undefined) return { latency, error: null, errorAfter: null, hangMs: 0 };
    failure.remaining -= 1;
    this.#failures = this.#failures.filter((candidate) => candidate.remaining > 0);
    const error = new LeaseStoreError('@kcl/testkit faulty store', `${operation}: ${failure.message}`, {
      retryable: failure.retryable,
      code: failure.code,
    });
    switch (failure.kind) {
      case 'fail':
        return { latency, error, errorAfter: null, hangMs: 0 };
      case 'lose-response':
        return { latency, error: null, errorAfter: error, hangMs: 0 };
      case 'hang':
        return { latency, error: null, errorAfter: null, hangMs: failure.hangMs };
    }
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
  const wrapped = interceptLeaseStore(
    inner,
    async (operation, options, call) => {
      const { latency, error, errorAfter, hangMs } = faults.before(operation);
      if (latency > 0) await clock.sleep(latency);
      if (hangMs === Number.POSITIVE_INFINITY) await new Promise<never>(() => {});
      if (hangMs > 0) await clock.sleep(hangMs);
      if (error !== null) throw error;
      const result = await call(options);
      if (errorAfter !== null) {
        // A store closes a session whose caller will never see it (as it does when the call's signal
        // aborts): a lost answer must not leave the worker's lock held by nobody.
        if (operation === 'workers.attachSession') await (result as WorkerSession).close();
        throw errorAfter;
      }
      return result;
    },
    { description: `${inner.description} (with injected faults)` },
  );
  return Object.assign(wrapped, { faults, inner });
}
