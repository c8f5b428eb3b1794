import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import type { ExecutableCommand } from './executable-command.js';

export interface ChildLaunchOptions {
  readonly workingDirectory: string;
  readonly environment: Readonly<Record<string, string | undefined>>;
}

/** Starts a child process; injectable so tests can start something else. */
export type ChildLauncher = (
  command: ExecutableCommand,
  options: ChildLaunchOptions,
) => ChildProcessWithoutNullStreams;

/**
 * Starts the child without a shell, with piped stdio, in **its own process group** (`detached`), so a
 * Ctrl-C or a SIGTERM sent to the daemon's group reaches only the daemon, which then shuts the
 * children down in protocol order. The child inherits the given environment and working directory.
 */
export const launchChildProcess: ChildLauncher = (command, options) => {
  const environment: Record<string, string> = {};
  for (const [name, value] of Object.entries(options.environment)) {
    if (value !== undefined) environment[name] = value;
  }
  return spawn(command.executable, [...command.args], {
    cwd: options.workingDirectory,
    env: environment,
    shell: false,
    detached: true,
    stdio: ['pipe', 'pipe', 'pipe'],
  });
};

/** Sends a signal to a child; injectable because only an application may signal process groups. */
export type ChildSignaller = (child: ChildProcessWithoutNullStreams, signal: NodeJS.Signals) => void;

/**
 * Signals the child process itself. The CLI passes a signaller that reaches the child's whole process
 * group instead (see `cli/process-group.ts`), so helpers a child started get the signal too.
 */
export const signalChildProcess: ChildSignaller = (child, signal) => {
  try {
    child.kill(signal);
  } catch {
    // Already gone.
  }
};
