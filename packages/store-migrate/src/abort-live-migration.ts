import type { LiveMigrationOptions } from './live-migration.js';
import { readLiveMigrationState } from './live-migration.js';
import { LiveMigrationRefusedError } from './migration-errors.js';

/**
 * Abandons a live migration that has not been cut over: clears the target's guard marker. The
 * target's copies stay (an offline copy or a later live migration replaces them); workers still run
 * the migrating store until redeployed, which is harmless while the source is authoritative.
 */
export async function abortLiveMigration(options: LiveMigrationOptions): Promise<void> {
  const state = await readLiveMigrationState(options.from, options.to);
  if (state.phase !== 'mirroring') {
    throw new LiveMigrationRefusedError('aborting the live migration', [
      state.phase === 'foreign'
        ? `the source is marked as migrated to ${state.sourceMarker?.migratedTo}, not to this target; there is no live migration to abort`
        : `the migration is in phase ${state.phase}: leases have been moved, so the source is no longer authoritative; run \`kcl-migrate cutover\` again to finish it (and migrate back if needed)`,
    ]);
  }
  if (state.targetGuarded) await options.to.admin.setMigrationMarker(null);
}
