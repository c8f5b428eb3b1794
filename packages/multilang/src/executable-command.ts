import { accessSync, constants, statSync } from 'node:fs';
import { delimiter, isAbsolute, join, resolve } from 'node:path';

/** The child's command line: the program and its arguments, started without a shell. */
export interface ExecutableCommand {
  /** The program as written (a name looked up on PATH, or a path). */
  readonly executable: string;
  readonly args: readonly string[];
  /** The `executableName` value it came from. */
  readonly text: string;
}

/**
 * Splits `executableName` as the Java daemon does (`command.split(" +")`): on runs of spaces, with no
 * shell, no quoting and no escapes, so a path that contains a space cannot be written. Tabs are part
 * of an argument, as in Java.
 */
export function splitExecutableName(text: string): ExecutableCommand | null {
  const parts = text.split(/ +/).filter((part) => part !== '');
  const [executable, ...args] = parts;
  if (executable === undefined) return null;
  return { executable, args, text };
}

export interface ExecutableLookup {
  /** Where the child runs and relative paths are resolved. */
  readonly workingDirectory: string;
  /** The environment whose PATH is searched. */
  readonly environment: Readonly<Record<string, string | undefined>>;
  /**
   * The directory of the properties file. Relative file arguments that exist there but not in the
   * working directory are resolved against it (kcl-bootstrap users often start the daemon elsewhere).
   */
  readonly propertiesDirectory?: string | null;
}

export interface ResolvedExecutable {
  readonly command: ExecutableCommand;
  /** Arguments rewritten to absolute paths next to the properties file, for the log. */
  readonly rewrittenArguments: readonly { readonly from: string; readonly to: string }[];
}

/**
 * Checks that the program can be started (found on PATH, or an executable file) so a typo fails at
 * start with a clear message instead of once per lease. Returns the problem, or the command.
 */
export function resolveExecutableCommand(
  command: ExecutableCommand,
  lookup: ExecutableLookup,
):
  | { readonly ok: true; readonly resolved: ResolvedExecutable }
  | { readonly ok: false; readonly problem: string } {
  const rewrittenArguments: { from: string; to: string }[] = [];
  const besideProperties = (value: string): string => {
    const directory = lookup.propertiesDirectory;
    if (directory === undefined || directory === null || isAbsolute(value) || value.startsWith('-'))
      return value;
    if (resolve(directory) === resolve(lookup.workingDirectory)) return value;
    if (isFile(resolve(lookup.workingDirectory, value))) return value;
    const candidate = resolve(directory, value);
    if (!isFile(candidate)) return value;
    rewrittenArguments.push({ from: value, to: candidate });
    return candidate;
  };

  let executable = command.executable;
  if (executable.includes('/')) {
    executable = besideProperties(executable);
    const path = resolve(lookup.workingDirectory, executable);
    if (!isExecutableFile(path)) {
      return {
        ok: false,
        problem: `executableName ${JSON.stringify(command.text)}: ${path} is not an executable file (check the path and its execute permission)`,
      };
    }
  } else if (findOnPath(executable, lookup.environment) === null) {
    return {
      ok: false,
      problem: `executableName ${JSON.stringify(command.text)}: ${JSON.stringify(executable)} was not found on PATH (install it, or give its full path)`,
    };
  }
  const args = command.args.map(besideProperties);
  return { ok: true, resolved: { command: { executable, args, text: command.text }, rewrittenArguments } };
}

/** The first executable file named `name` on the environment's PATH, or null. */
export function findOnPath(
  name: string,
  environment: Readonly<Record<string, string | undefined>>,
): string | null {
  const path = environment.PATH ?? environment.Path ?? '';
  for (const directory of path.split(delimiter)) {
    if (directory === '') continue;
    const candidate = join(directory, name);
    if (isExecutableFile(candidate)) return candidate;
  }
  return null;
}

function isFile(path: string): boolean {
  try {
    return statSync(path).isFile();
  } catch {
    return false;
  }
}

function isExecutableFile(path: string): boolean {
  if (!isFile(path)) return false;
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}
