import type {
  Lease,
  LeaseBatchWriteResult,
  LeaseRenewal,
  LeaseRepository,
  LeaseStore,
  LeaseTableScan,
  LeaseWriteResult,
  StoreCallOptions,
  UnreadableLeaseRow,
} from '@kcl/core';
import { compareLeaseKeys, LeaseStoreError } from '@kcl/core';
import type { LiveMigrationPhase } from './migration-phase.js';
import { isSealedLease, PLACEHOLDER_COUNTER, SEAL_OWNER } from './migration-phase.js';
import type { MigrationRouting } from './migration-routing.js';
import { PACKAGE_NAME } from './package-name.js';

type LostRace = Extract<LeaseWriteResult, { ok: false }>['reason'];

/**
 * The leases of a migrating store. Every lease has one authoritative row: the source row until it is
 * sealed (moved), the target row after. Conditional writes go to the source unless the lease is
 * known to be sealed; a sealed source row refuses them (its counter is one no worker was ever given),
 * and the write is sent, with the same counter, to the target, where the moved lease continues at
 * exactly that counter. A successful write on the source is mirrored to the target (best effort; the
 * cut-over copies any lease whose mirror lagged). Every call passes the caller's options (its signal)
 * to both stores.
 */
export function createMigratingLeases(routing: MigrationRouting): LeaseRepository {
  const { from, to, mirror } = routing;

  /** One conditional write, sent to the lease's authoritative row. */
  const conditional = async (
    operation: string,
    leaseKey: string,
    options: StoreCallOptions | undefined,
    write: (store: LeaseStore) => Promise<LeaseWriteResult>,
  ): Promise<LeaseWriteResult> => {
    const current = await routing.currentPhase(false);
    if (current === 'complete' || routing.isSealed(leaseKey)) return write(to);
    const result = await write(from);
    if (result.ok) {
      await mirror.write(operation, leaseKey, () => write(to), result.lease);
      return result;
    }
    if (await livesInTarget(routing, leaseKey, result.reason, current, options)) return write(to);
    return result;
  };

  return {
    list: (options) => listMigratingLeases(routing, options),

    async get(leaseKey, options) {
      const current = await routing.currentPhase(false);
      if (current === 'complete' || routing.isSealed(leaseKey)) return to.leases.get(leaseKey, options);
      const row = await from.leases.get(leaseKey, options);
      if (row === null) return current === 'target' ? to.leases.get(leaseKey, options) : null;
      if (isSealedLease(row)) {
        routing.markSealed(leaseKey);
        return to.leases.get(leaseKey, options);
      }
      return row;
    },

    async create(init, options) {
      const current = await routing.currentPhase(true);
      if (current === 'complete') return to.leases.create(init, options);
      if (current === 'target') {
        // Creation is still decided in one place: a sealed placeholder in the source, so a worker
        // that has not seen the target phase yet cannot create a second lease with this key there.
        const placeholder = await from.leases.create(
          { ...init, owner: SEAL_OWNER, leaseCounter: PLACEHOLDER_COUNTER, handoff: null },
          options,
        );
        if (placeholder.ok) {
          routing.markSealed(init.leaseKey);
        } else if (!(await routing.learnSeal(init.leaseKey, options))) {
          return placeholder; // an unmoved lease with this key exists in the source
        }
        return to.leases.create(init, options);
      }
      const result = await from.leases.create(init, options);
      if (result.ok && current === 'mirroring') {
        await mirror.write('create', init.leaseKey, () => to.leases.create(init, options), result.lease);
      }
      return result;
    },

    renew(leaseKey, leaseCounter, options) {
      return conditional('renew', leaseKey, options, (store) =>
        store.leases.renew(leaseKey, leaseCounter, options),
      );
    },

    renewMany: (renewals, options) => renewMigratingLeases(routing, renewals, options),

    take(leaseKey, leaseCounter, owner, options) {
      return conditional('take', leaseKey, options, (store) =>
        store.leases.take(leaseKey, leaseCounter, owner, options),
      );
    },

    release(leaseKey, leaseCounter, options) {
      return conditional('release', leaseKey, options, (store) =>
        store.leases.release(leaseKey, leaseCounter, options),
      );
    },

    // A hand-off request leaves the counter alone and a completion moves it like a take: both are
    // fenced and mirrored as the other conditional writes are (a sealed source row refuses them with
    // counter-mismatch, so they go on to the target).
    requestHandoff(leaseKey, leaseCounter, handoff, options) {
      return conditional('requestHandoff', leaseKey, options, (store) =>
        store.leases.requestHandoff(leaseKey, leaseCounter, handoff, options),
      );
    },

    completeHandoff(leaseKey, leaseCounter, options) {
      return conditional('completeHandoff', leaseKey, options, (store) =>
        store.leases.completeHandoff(leaseKey, leaseCounter, options),
      );
    },

    checkpoint(leaseKey, leaseCounter, update, options) {
      return conditional('checkpoint', leaseKey, options, (store) =>
        store.leases.checkpoint(leaseKey, leaseCounter, update, options),
      );
    },

    async updateMeta(leaseKey, update, options) {
      const current = await routing.currentPhase(false);
      if (current === 'complete' || routing.isSealed(leaseKey)) {
        return to.leases.updateMeta(leaseKey, update, options);
      }
      // Unconditional: on a sealed row it changes only the seal's copy of the facts, never ownership.
      const row = await from.leases.updateMeta(leaseKey, update, options);
      if (row === null) return current === 'target' ? to.leases.updateMeta(leaseKey, update, options) : null;
      if (isSealedLease(row)) {
        routing.markSealed(leaseKey);
        return to.leases.updateMeta(leaseKey, update, options);
      }
      await mirror.write('meta', leaseKey, () => to.leases.updateMeta(leaseKey, update, options), row);
      return row;
    },

    async delete(leaseKey, options) {
      const current = await routing.currentPhase(false);
      if (current === 'complete' || routing.isSealed(leaseKey)) {
        await to.leases.delete(leaseKey, options);
        return;
      }
      const row = await from.leases.get(leaseKey, options);
      if (row !== null && isSealedLease(row)) {
        // The seal stays: it keeps this key's creation decided in the source during the migration.
        routing.markSealed(leaseKey);
        await to.leases.delete(leaseKey, options);
        return;
      }
      if (row !== null) await from.leases.delete(leaseKey, options);
      await mirror.write(
        'delete',
        leaseKey,
        async () => {
          await to.leases.delete(leaseKey, options);
          return undefined;
        },
        null,
      );
    },
  };
}

/** After a lost write on the source: does the lease live in the target (so the write goes there)? */
async function livesInTarget(
  routing: MigrationRouting,
  leaseKey: string,
  reason: LostRace,
  current: LiveMigrationPhase,
  options: StoreCallOptions | undefined,
): Promise<boolean> {
  if (reason === 'counter-mismatch') return routing.learnSeal(leaseKey, options);
  // From the target phase on, a lease absent from the source was created in the target directly.
  return reason === 'not-found' && current === 'target';
}

/** Every lease, each from its authoritative row, in key order. */
async function listMigratingLeases(
  routing: MigrationRouting,
  options: StoreCallOptions | undefined,
): Promise<Lease[]> {
  const current = await routing.currentPhase(false);
  if (current === 'complete') return routing.to.leases.list(options);
  const rows = await routing.from.leases.list(options);
  return mergeLeases(routing, current, rows, new Set(), () => routing.to.leases.list(options));
}

/**
 * Every row of the application as the migrating store sees it (`admin.scan()`): leases from their
 * authoritative rows; unreadable rows of the source, and of the target where the lease lives there
 * (a moved lease, or one created in the target). A target row whose key has an unreadable source row
 * is not shown as a lease: it is a copy of a lease nobody can read, not a lease of its own.
 */
export async function scanMigratingLeases(
  routing: MigrationRouting,
  options: StoreCallOptions | undefined,
): Promise<LeaseTableScan> {
  const current = await routing.currentPhase(false);
  if (current === 'complete') return routing.to.admin.scan(options);
  const source = await routing.from.admin.scan(options);
  const unreadableInSource = new Set(source.unreadable.map((row) => row.leaseKey));
  let targetUnreadable: readonly UnreadableLeaseRow[] = [];
  const leases = await mergeLeases(routing, current, source.leases, unreadableInSource, async () => {
    const target = await routing.to.admin.scan(options);
    targetUnreadable = target.unreadable;
    return target.leases;
  });
  const sourceKeys = new Set(source.leases.map((lease) => lease.leaseKey));
  const livesInTarget = (leaseKey: string): boolean =>
    routing.isSealed(leaseKey) ||
    (current === 'target' && !sourceKeys.has(leaseKey) && !unreadableInSource.has(leaseKey));
  const unreadable = [...source.unreadable, ...targetUnreadable.filter((row) => livesInTarget(row.leaseKey))];
  return {
    leases,
    unreadable: unreadable.sort((a, b) => compareLeaseKeys(a.leaseKey, b.leaseKey)),
  };
}

/**
 * The source rows with every sealed one replaced by its target lease, and (from the target phase on)
 * the leases created in the target directly. The target is read only when needed.
 */
async function mergeLeases(
  routing: MigrationRouting,
  current: LiveMigrationPhase,
  rows: readonly Lease[],
  hidden: ReadonlySet<string>,
  readTarget: () => Promise<readonly Lease[]>,
): Promise<Lease[]> {
  let anySealed = false;
  for (const row of rows) {
    if (isSealedLease(row)) {
      routing.markSealed(row.leaseKey);
      anySealed = true;
    }
  }
  if (!anySealed && current !== 'target') return [...rows];
  const moved = new Map((await readTarget()).map((lease) => [lease.leaseKey, lease]));
  const leases: Lease[] = [];
  const sourceKeys = new Set<string>();
  for (const row of rows) {
    sourceKeys.add(row.leaseKey);
    if (!isSealedLease(row)) leases.push(row);
    else {
      const lease = moved.get(row.leaseKey);
      if (lease !== undefined) leases.push(lease);
    }
  }
  if (current === 'target') {
    for (const lease of moved.values()) {
      if (!sourceKeys.has(lease.leaseKey) && !hidden.has(lease.leaseKey)) leases.push(lease);
    }
  }
  return leases.sort((a, b) => compareLeaseKeys(a.leaseKey, b.leaseKey));
}

/**
 * Renews a batch: leases known to be moved in one call to the target, the others in one call to the
 * source (those that turn out to be sealed are sent on to the target one by one), and the source's
 * renewals mirrored in one call.
 */
async function renewMigratingLeases(
  routing: MigrationRouting,
  renewals: readonly LeaseRenewal[],
  options: StoreCallOptions | undefined,
): Promise<LeaseBatchWriteResult[]> {
  const { from, to, mirror } = routing;
  const current = await routing.currentPhase(false);
  if (current === 'complete') return to.leases.renewMany(renewals, options);
  const results = new Array<LeaseBatchWriteResult>(renewals.length);
  const onSource: number[] = [];
  const onTarget: number[] = [];
  renewals.forEach((renewal, index) => {
    (routing.isSealed(renewal.leaseKey) ? onTarget : onSource).push(index);
  });
  const pick = (indexes: readonly number[]) => indexes.map((index) => renewals[index] as LeaseRenewal);
  // Each store's batch stands on its own: a rejected call fails only the leases it carried, never
  // renewals the other store applied (a worker that dropped those would give up live leases).
  const [sourceBatch, targetBatch] = await Promise.allSettled([
    onSource.length === 0 ? [] : from.leases.renewMany(pick(onSource), options),
    onTarget.length === 0 ? [] : to.leases.renewMany(pick(onTarget), options),
  ]);
  const outcomeAt = (
    batch: PromiseSettledResult<LeaseBatchWriteResult[]>,
    position: number,
    store: LeaseStore,
  ): LeaseBatchWriteResult =>
    batch.status === 'rejected'
      ? { ok: false, reason: 'failed', error: batch.reason }
      : (batch.value[position] ?? {
          ok: false,
          reason: 'failed',
          error: new LeaseStoreError(
            store.description,
            `${PACKAGE_NAME}: ${store.description} returned no result for this lease in a batch renewal`,
          ),
        });
  onTarget.forEach((index, position) => {
    results[index] = outcomeAt(targetBatch, position, to);
  });
  const renewed: Lease[] = [];
  await Promise.all(
    onSource.map(async (index, position) => {
      const renewal = renewals[index] as LeaseRenewal;
      const result = outcomeAt(sourceBatch, position, from);
      if (result.ok) {
        renewed.push(result.lease);
        results[index] = result;
      } else if (result.reason === 'failed') {
        results[index] = result;
      } else {
        try {
          results[index] = (await livesInTarget(routing, renewal.leaseKey, result.reason, current, options))
            ? await to.leases.renew(renewal.leaseKey, renewal.leaseCounter, options)
            : result;
        } catch (error) {
          results[index] = { ok: false, reason: 'failed', error };
        }
      }
    }),
  );
  if (renewed.length > 0) await mirror.renewals(renewed, options);
  return results;
}
