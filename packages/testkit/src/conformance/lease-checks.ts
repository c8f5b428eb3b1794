import type { Lease, LeaseInit, LeaseStore, LeaseWriteResult } from '@kcl/core';
import { ExtendedSequenceNumber } from '@kcl/core';
import type { ConformanceAssert } from './conformance-case.js';
import { leaseSnapshot } from './lease-snapshot.js';

/** The lease checks the cases share, bound to one test's assertions. */
export interface LeaseChecks {
  /** The lease a write returned; fails the case when the write lost its race. */
  ok(result: LeaseWriteResult, what: string): Lease;
  /** Fails the case unless the write lost with `reason`. */
  lost(result: LeaseWriteResult, reason: string, what: string): void;
  /** Fails the case unless the store holds exactly `expected`. */
  stored(store: LeaseStore, expected: Lease): Promise<void>;
  /** Creates a lease (at TRIM_HORIZON unless `init` says otherwise) that must not exist yet. */
  create(store: LeaseStore, init: Partial<LeaseInit> & { leaseKey: string }): Promise<Lease>;
  /** Creates a lease and takes it for `owner`. */
  createTaken(store: LeaseStore, leaseKey: string, owner?: string): Promise<Lease>;
}

export function createLeaseChecks(assert: ConformanceAssert): LeaseChecks {
  const checks: LeaseChecks = {
    ok(result, what) {
      assert.equal(result.ok ? 'ok' : `lost race: ${result.reason}`, 'ok', `${what} should succeed`);
      if (!result.ok) throw new Error(`${what} lost its race: ${result.reason}`);
      return result.lease;
    },
    lost(result, reason, what) {
      assert.equal(result.ok ? 'ok' : result.reason, reason, `${what} should lose with ${reason}`);
    },
    async stored(store, expected) {
      const stored = await store.leases.get(expected.leaseKey);
      assert.equal(leaseSnapshot(stored), leaseSnapshot(expected), `stored lease ${expected.leaseKey}`);
    },
    async create(store, init) {
      return checks.ok(
        await store.leases.create({ checkpoint: ExtendedSequenceNumber.TRIM_HORIZON, ...init }),
        `create ${init.leaseKey}`,
      );
    },
    async createTaken(store, leaseKey, owner = 'worker-a') {
      const lease = await checks.create(store, { leaseKey });
      return checks.ok(await store.leases.take(leaseKey, lease.leaseCounter, owner), `take ${leaseKey}`);
    },
  };
  return checks;
}
