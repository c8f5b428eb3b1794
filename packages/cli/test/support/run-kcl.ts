import { spawn } from 'node:child_process';
import { Readable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { runKcl } from '../../src/kcl.js';

const MAIN = fileURLToPath(new URL('../../bin/kcl.js', import.meta.url));

export interface KclRun {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/**
 * Runs `kcl` inside the test process with these arguments, no terminal. `until` sees the output so far
 * after each write and ends the run (as Ctrl-C does) when it returns true.
 */
export async function kcl(
  args: readonly string[],
  env: Readonly<Record<string, string>> = {},
  until?: (stdout: string) => boolean,
): Promise<KclRun> {
  let stdout = '';
  let stderr = '';
  const interrupt = new AbortController();
  const code = await runKcl(
    ['node', 'kcl', ...args],
    {
      stdout: {
        write: (text: string) => {
          stdout += text;
          if (until?.(stdout) === true) interrupt.abort();
        },
      },
      stderr: { write: (text: string) => (stderr += text), isTTY: false },
      stdin: Readable.from([]),
      env: { ...env },
    },
    interrupt.signal,
  );
  return { code, stdout, stderr };
}

/** Runs the built `kcl` as a user would: `node bin/kcl.js …`, no terminal. */
export function kclProcess(args: readonly string[]): Promise<KclRun> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [MAIN, ...args], {
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '' },
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
