import { ConfigurationError } from '@kcl/core';
import { OperationRefusedError } from './operation-refused-error.js';

/** The exit codes of `kcl`, as `--help` documents them (the same numbers as `kcl-migrate`'s). */
export const EXIT_CODES = Object.freeze({
  /** Done; a dry run printed its plan; `status` found no problem. */
  ok: 0,
  /** The store could not be read or written, or something unexpected failed. */
  failed: 1,
  /** Invalid options. */
  usage: 2,
  /** Refused for safety: workers are live (pass --force), or the change was not confirmed. */
  refused: 3,
  /** `status --check`: the application has problems. */
  problems: 4,
  /** Interrupted: running the same command again finishes the job. */
  interrupted: 130,
});

export type ExitCode = (typeof EXIT_CODES)[keyof typeof EXIT_CODES];

export const EXIT_CODE_HELP = `Exit codes:
  0    done (a dry run printed its plan)
  1    failed: the store could not be read or written (the message says why)
  2    usage: invalid or missing options
  3    refused for safety: workers are live (stop them, or pass --force), or not confirmed
  4    status --check: the application has problems (listed)
  130  interrupted (Ctrl-C): run the same command again to finish`;

/** The exit code of a command that failed with `error`; identity by the errors' markers. */
export function exitCodeOfError(error: unknown): ExitCode {
  if (OperationRefusedError.is(error)) return EXIT_CODES.refused;
  if (ConfigurationError.is(error)) return EXIT_CODES.usage;
  return EXIT_CODES.failed;
}
