import type { Clock, Lease, LeaseStore } from '@kcl/core';
import { OptionProblems, systemClock } from '@kcl/core';
import { guardedStore } from './guarded-store.js';
import { PACKAGE_NAME } from './package-name.js';

export interface MigrateLeasesOptions {
  /** The store the stopped fleet used. */
  readonly from: LeaseStore;
  /** The store the new fleet will use. Its tables are created if missing. */
  readonly to: LeaseStore;
  /**
   * How long to watch the source for a running fleet before copying: at least the fleet's lease expiry
   * (the consumer's default is 45,001 ms). Ignored with `force` and `dryRun`.
   */
  readonly watchMs: number;
  /** Read both sides and plan, write nothing. */
  readonly dryRun?: boolean;
  /**
   * Copy although the source looks live, is marked as migrated elsewhere or has unreadable rows, and
   * overwrite target leases that moved on since an earlier copy.
   */
  readonly force?: boolean;
  /** Mark the source as migrated after a complete, verified copy (default true). */
  readonly mark?: boolean;
  /** How the marker names the target, shown to workers still pointed at the source (default its description). */
  readonly migratedTo?: string;
  /** Copy only these leases (one stream of a multi-stream application). Marking then needs `mark: false`. */
  readonly select?: (lease: Lease) => boolean;
  /** Leases written at once (default 16). */
  readonly concurrency?: number;
  readonly clock?: Clock;
  /** Aborting stops the copy after the writes in flight; running again finishes it. */
  readonly signal?: AbortSignal;
  /** Asked after the plan is made and before anything is written; false declines. */
  readonly confirm?: (plan: MigrationPlanSummary) => Promise<boolean>;
  readonly onProgress?: (progress: MigrationProgress) => void;
}

export interface MigrationProgress {
  readonly stage: 'watching' | 'copying';
  readonly done: number;
  readonly total: number;
}

/** What a copy would do, counted. */
export interface MigrationPlanSummary {
  readonly leases: number;
  readonly create: number;
  readonly update: number;
  readonly overwrite: number;
  readonly unchanged: number;
  readonly targetAhead: number;
  /** Leases that had an owner on the source (owners are cleared on the target). */
  readonly ownedLeases: number;
  /** Leases in the middle of a hand-off on the source (ended on the target, with the owner). */
  readonly handoffs: number;
}

/** Names the call in its configuration errors. */
export const MIGRATE_LEASES = `${PACKAGE_NAME} migrateLeases`;

/** The options with both stores behind core's guard and the defaults filled in. */
export interface CheckedMigrateLeasesOptions extends MigrateLeasesOptions {
  readonly clock: Clock;
  readonly concurrency: number;
}

/** Checks every option before anything is read; lists every problem at once. */
export function checkMigrateLeasesOptions(options: MigrateLeasesOptions): CheckedMigrateLeasesOptions {
  const check = new OptionProblems(MIGRATE_LEASES);
  const input = (options ?? {}) as Partial<MigrateLeasesOptions>;
  const from = guardedStore(check, 'from', input.from);
  const to = guardedStore(check, 'to', input.to);
  if (input.watchMs === undefined) {
    check.add('watchMs is required: how long to watch the source for a running fleet (its lease expiry)');
  }
  const watchMs = check.integer('watchMs', input.watchMs, 0);
  check.boolean('dryRun', input.dryRun, false);
  check.boolean('force', input.force, false);
  check.boolean('mark', input.mark, true);
  if (input.migratedTo !== undefined) check.string('migratedTo', input.migratedTo);
  check.optionalFunction('select', input.select, '(lease) => boolean');
  const concurrency = check.integer('concurrency', input.concurrency, 16, { min: 1 });
  const clock = check.clock('clock', input.clock, systemClock);
  check.signal('signal', input.signal);
  check.optionalFunction('confirm', input.confirm, '(plan) => Promise<boolean>');
  check.optionalFunction('onProgress', input.onProgress, '(progress) => void');
  check.throwIfAny();
  return { ...input, from: from as LeaseStore, to: to as LeaseStore, watchMs, concurrency, clock };
}
