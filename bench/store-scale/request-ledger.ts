import { AsyncLocalStorage } from 'node:async_hooks';
import type { LeaseStore, LeaseStoreOperation } from '@kcl/core';
import { interceptLeaseStore } from '@kcl/core';

/** What the store did for one contract call (`leases.renewMany`, …), summed. */
export interface OperationTally {
  /** Calls of the contract method. */
  readonly calls: number;
  /** Calls that rejected (a timeout of the runtime's deadline included). */
  readonly failedCalls: number;
  /** Round trips: SQL statements executed, or DynamoDB HTTP requests (each attempt). */
  readonly roundTrips: number;
  /** DynamoDB read and write capacity units the responses reported (0 elsewhere). */
  readonly readCapacity: number;
  readonly writeCapacity: number;
}

/** Tallies by operation; `unattributed` holds round trips made outside any counted call (seeding). */
export type LedgerSnapshot = Readonly<Record<string, OperationTally>>;

export const UNATTRIBUTED = 'unattributed';

const EMPTY: OperationTally = { calls: 0, failedCalls: 0, roundTrips: 0, readCapacity: 0, writeCapacity: 0 };

/**
 * Counts what a store does, per contract call: the calls themselves (through `interceptLeaseStore`),
 * and the round trips and capacity each call causes — the statement log or the SDK middleware reports
 * them while the call runs, and an `AsyncLocalStorage` says which call that is. Every worker of a
 * fleet shares one ledger.
 */
export class RequestLedger {
  readonly #current = new AsyncLocalStorage<LeaseStoreOperation>();
  readonly #tallies = new Map<string, OperationTally>();

  /** `store` with every call counted, innermost (what reaches the store, timed out or not). */
  count(store: LeaseStore): LeaseStore {
    return interceptLeaseStore(store, (operation, options, call) =>
      this.#current.run(operation, async () => {
        this.#add(operation, { calls: 1 });
        try {
          return await call(options);
        } catch (error) {
          this.#add(operation, { failedCalls: 1 });
          throw error;
        }
      }),
    );
  }

  /** One statement or request, of the counted call running now (if any). */
  roundTrip(): void {
    this.#add(this.#current.getStore() ?? UNATTRIBUTED, { roundTrips: 1 });
  }

  capacity(kind: 'read' | 'write', units: number): void {
    const operation = this.#current.getStore() ?? UNATTRIBUTED;
    this.#add(operation, kind === 'read' ? { readCapacity: units } : { writeCapacity: units });
  }

  snapshot(): LedgerSnapshot {
    return Object.fromEntries(this.#tallies);
  }

  #add(operation: string, change: Partial<OperationTally>): void {
    const tally = this.#tallies.get(operation) ?? EMPTY;
    this.#tallies.set(operation, {
      calls: tally.calls + (change.calls ?? 0),
      failedCalls: tally.failedCalls + (change.failedCalls ?? 0),
      roundTrips: tally.roundTrips + (change.roundTrips ?? 0),
      readCapacity: tally.readCapacity + (change.readCapacity ?? 0),
      writeCapacity: tally.writeCapacity + (change.writeCapacity ?? 0),
    });
  }
}

/** What happened between two snapshots. */
export function ledgerDifference(after: LedgerSnapshot, before: LedgerSnapshot): LedgerSnapshot {
  const difference: Record<string, OperationTally> = {};
  for (const [operation, tally] of Object.entries(after)) {
    const earlier = before[operation] ?? EMPTY;
    const delta: OperationTally = {
      calls: tally.calls - earlier.calls,
      failedCalls: tally.failedCalls - earlier.failedCalls,
      roundTrips: tally.roundTrips - earlier.roundTrips,
      readCapacity: tally.readCapacity - earlier.readCapacity,
      writeCapacity: tally.writeCapacity - earlier.writeCapacity,
    };
    if (delta.calls !== 0 || delta.roundTrips !== 0) difference[operation] = delta;
  }
  return difference;
}

/** The kinds the report sums requests by. */
export type RequestKind = 'renew' | 'list' | 'heartbeat' | 'take' | 'liveness' | 'other';

export const REQUEST_KINDS: readonly RequestKind[] = [
  'renew',
  'list',
  'heartbeat',
  'take',
  'liveness',
  'other',
];

/**
 * renew: `leases.renew`/`renewMany`; list: `leases.list` and `workers.list` (the rebalance listing,
 * the shard sync's and the cleanup's); heartbeat: `workers.heartbeat`; take: the lease moves
 * (`take`, `requestHandoff`, `completeHandoff`, `release`); liveness: session liveness (the check on
 * the worker's own session and `workers.liveSessions` every second, attaching); other: the rest (a hand-off's polls with
 * `leases.get`, the migration-marker check, …).
 */
export function kindOf(operation: string): RequestKind {
  switch (operation) {
    case 'leases.renew':
    case 'leases.renewMany':
      return 'renew';
    case 'leases.list':
    case 'workers.list':
      return 'list';
    case 'workers.heartbeat':
      return 'heartbeat';
    case 'leases.take':
    case 'leases.requestHandoff':
    case 'leases.completeHandoff':
    case 'leases.release':
      return 'take';
    case 'session.check':
    case 'session.close':
    case 'workers.liveSessions':
    case 'workers.attachSession':
      return 'liveness';
    default:
      return 'other';
  }
}
