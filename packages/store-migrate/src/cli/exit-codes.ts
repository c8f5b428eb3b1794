import { ConfigurationError } from '@kcl/core';
import { LiveMigrationRefusedError, MigrationInterruptedError } from '../migration-errors.js';

/** The exit codes of `kcl-migrate`, as `--help` documents them. */
export const EXIT_CODES = Object.freeze({
  /** Done; a dry run printed its plan; a verification found no difference. */
  ok: 0,
  /** A store could not be reached, read or written, or something unexpected failed. */
  failed: 1,
  /** Invalid options. */
  usage: 2,
  /** Refused for safety: the source is in use, markers disagree, rows cannot be read, not confirmed. */
  refused: 3,
  /**
   * The two sides differ (a verification, or target leases that moved on since an earlier copy), or a
   * cut-over completed but found moved leases taken in the source by workers without the migrating store.
   */
  differences: 4,
  /** Interrupted: running the same command again finishes the job. */
  interrupted: 130,
});

export type ExitCode = (typeof EXIT_CODES)[keyof typeof EXIT_CODES];

export const EXIT_CODE_HELP = `Exit codes:
  0    done (a dry run printed its plan; --verify found no difference)
  1    failed: a store could not be reached (checked before anything else), read or written
       (the message says why)
  2    usage: invalid or missing options
  3    refused for safety: the source is in use, a marker says it was migrated elsewhere
       or a live migration is running, lease rows cannot be read, or the copy was not confirmed
  4    differences: --verify found some, or target leases moved on since an earlier copy
       (--force overwrites them with the source's state), or a cut-over completed but found
       moved leases taken in the source by workers without the migrating store
  130  interrupted (Ctrl-C): run the same command again to finish`;

/**
 * The exit code of a command that failed with `error`. Identity by the errors' markers, never
 * `instanceof`: an error from another copy of a kcl package (two versions installed side by side)
 * must map the same way.
 */
export function exitCodeOfError(error: unknown): ExitCode {
  if (LiveMigrationRefusedError.is(error)) return EXIT_CODES.refused;
  if (ConfigurationError.is(error)) return EXIT_CODES.usage;
  if (MigrationInterruptedError.is(error)) return EXIT_CODES.interrupted;
  return EXIT_CODES.failed;
}
