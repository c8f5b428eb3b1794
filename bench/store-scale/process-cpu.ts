import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';

/** Clock ticks per second of /proc's CPU times (`getconf CLK_TCK`, 100 on Linux). */
const TICKS_PER_SECOND = (() => {
  try {
    const ticks = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim());
    return Number.isFinite(ticks) && ticks > 0 ? ticks : 100;
  } catch {
    return 100;
  }
})();

/**
 * User + system CPU seconds of a process (`/proc/<pid>/stat`) or of one of its threads
 * (`/proc/<pid>/task/<tid>/stat`); null when it is gone or not readable.
 */
export function cpuSecondsOf(pid: number, tid?: number): number | null {
  const path = tid === undefined ? `/proc/${pid}/stat` : `/proc/${pid}/task/${tid}/stat`;
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch {
    return null;
  }
  // The command name (field 2) is in parentheses and may hold spaces: count fields after the last ')'.
  const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
  const user = Number(fields[11]);
  const system = Number(fields[12]);
  if (!Number.isFinite(user) || !Number.isFinite(system)) return null;
  return (user + system) / TICKS_PER_SECOND;
}

/** Process ids whose command name (`/proc/<pid>/comm`) is one of `names`. */
export function processesNamed(names: readonly string[]): number[] {
  return listPids().filter((pid) => names.includes(readText(`/proc/${pid}/comm`)?.trim() ?? ''));
}

/** Child processes of `parent` whose command line contains `fragment`. */
export function childProcesses(parent: number, fragment: string): number[] {
  return listPids().filter((pid) => {
    const stat = readText(`/proc/${pid}/stat`);
    if (stat === null) return false;
    const parentPid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    return parentPid === parent && (readText(`/proc/${pid}/cmdline`) ?? '').includes(fragment);
  });
}

function listPids(): number[] {
  try {
    return readdirSync('/proc')
      .filter((entry) => /^\d+$/.test(entry))
      .map(Number);
  } catch {
    return [];
  }
}

function readText(path: string): string | null {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return null;
  }
}
