import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

// The command as installed (package.json's bin): a wrapper that runs the built dist/cli/main.js.
const MAIN = fileURLToPath(new URL('../../bin/kcl-migrate.js', import.meta.url));

export interface CliRun {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs the built `kcl-migrate` as a user would: `node bin/kcl-migrate.js …`, no terminal. */
export function runCli(args: readonly string[], env: Readonly<Record<string, string>> = {}): Promise<CliRun> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [MAIN, ...args], {
      env: {
        PATH: process.env.PATH ?? '',
        HOME: process.env.HOME ?? '',
        AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
        ...env,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString('utf8');
    });
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString('utf8');
    });
    child.once('error', reject);
    child.once('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/**
 * Runs `kcl-migrate` inside the test process (no Node start-up), with the same arguments and no
 * terminal. For the many runs a test makes after it has seen the real binary work.
 */
export async function runInProcess(
  args: readonly string[],
  env: Readonly<Record<string, string>> = {},
  signal: AbortSignal = new AbortController().signal,
): Promise<CliRun> {
  const { runKclMigrate } = await import('../../src/cli/kcl-migrate.js');
  const { Readable } = await import('node:stream');
  let stdout = '';
  let stderr = '';
  const code = await runKclMigrate(
    ['node', 'kcl-migrate', ...args],
    {
      stdout: { write: (text: string) => (stdout += text) },
      stderr: { write: (text: string) => (stderr += text), isTTY: false },
      stdin: Readable.from([]),
      env: { ...env },
    },
    signal,
  );
  return { code, stdout, stderr };
}
