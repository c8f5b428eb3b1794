import { execFile } from 'node:child_process';
import { accessSync, chownSync, constants, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir, userInfo } from 'node:os';
import { delimiter, join } from 'node:path';
import { promisify } from 'node:util';
import { isCi } from '@kcl/testkit';

const run = promisify(execFile);

/**
 * A PostgreSQL server of a test's own, in a temporary directory on a free port (never the shared server
 * on 5432), which the test may stop and start again. Trust authentication, user `postgres`.
 */
export interface PrivatePostgres {
  /** `postgres://postgres@127.0.0.1:<port>/postgres` */
  readonly url: string;
  readonly port: number;
  /** Stops the server (`-m fast`: sessions are ended, as a restart ends them). */
  stop(): Promise<void>;
  /** Starts the stopped server again on the same port and data directory. */
  start(): Promise<void>;
  /** Stops the server if it runs and removes its directory. Idempotent. */
  destroy(): Promise<void>;
}

export type PrivatePostgresCheck =
  | { readonly available: true; readonly reason: null; readonly bin: string }
  | { readonly available: false; readonly reason: string; readonly bin: null };

const isExecutable = (file: string): boolean => {
  try {
    accessSync(file, constants.X_OK);
    return true;
  } catch {
    return false;
  }
};

/**
 * The directory holding `initdb` and `pg_ctl`: on PATH, or Debian's /usr/lib/postgresql/<version>/bin
 * (the newest), which is not on PATH by default.
 */
function findPostgresBin(): string | null {
  const onPath = (process.env.PATH ?? '').split(delimiter).filter((entry) => entry !== '');
  for (const directory of onPath) {
    if (isExecutable(join(directory, 'initdb')) && isExecutable(join(directory, 'pg_ctl'))) return directory;
  }
  const debian = '/usr/lib/postgresql';
  if (!existsSync(debian)) return null;
  const versions = readdirSync(debian)
    .filter((entry) => /^\d+(\.\d+)?$/.test(entry))
    .sort((a, b) => Number(b) - Number(a));
  for (const version of versions) {
    const directory = join(debian, version, 'bin');
    if (isExecutable(join(directory, 'initdb')) && isExecutable(join(directory, 'pg_ctl'))) return directory;
  }
  return null;
}

/**
 * Whether a private server can be run here. In CI a missing `initdb`/`pg_ctl` throws (the run fails);
 * locally it prints why the tests will be skipped.
 */
export function checkPrivatePostgres(): PrivatePostgresCheck {
  const bin = findPostgresBin();
  if (bin !== null) return { available: true, reason: null, bin };
  const reason =
    'initdb and pg_ctl were found neither on PATH nor in /usr/lib/postgresql/<version>/bin (install the PostgreSQL server package)';
  if (isCi()) {
    throw new Error(`e2e: a private PostgreSQL server cannot be run: ${reason}. CI must provide it.`);
  }
  process.stderr.write(`\n[skip] ${reason} — the tests with a private PostgreSQL server are skipped\n`);
  return { available: false, reason, bin: null };
}

const freePort = (): Promise<number> =>
  new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() =>
        typeof address === 'object' && address !== null
          ? resolve(address.port)
          : reject(new Error('no port')),
      );
    });
  });

/** The uid and gid of a system user, from /etc/passwd via `id`. */
async function idsOf(user: string): Promise<{ uid: number; gid: number }> {
  const [uid, gid] = await Promise.all([run('id', ['-u', user]), run('id', ['-g', user])]);
  return { uid: Number(uid.stdout.trim()), gid: Number(gid.stdout.trim()) };
}

/**
 * Creates a cluster in a temporary directory (`initdb -A trust -U postgres`) and starts it on a free
 * port, listening on 127.0.0.1 only, its socket in that directory. initdb and postgres refuse to run as
 * root: as root, they run as the `postgres` system user (through `runuser`), which owns the directory.
 */
export async function startPrivatePostgres(bin: string): Promise<PrivatePostgres> {
  const directory = mkdtempSync(join(tmpdir(), 'kcl-private-pg-'));
  const asRoot = userInfo().uid === 0;
  if (asRoot) {
    const { uid, gid } = await idsOf('postgres');
    chownSync(directory, uid, gid);
  }
  const pgRun = (program: string, args: readonly string[]) =>
    asRoot
      ? run('runuser', ['-u', 'postgres', '--', join(bin, program), ...args])
      : run(join(bin, program), [...args]);
  const data = join(directory, 'data');
  const log = join(directory, 'log');
  await pgRun('initdb', ['-D', data, '-A', 'trust', '-U', 'postgres', '--no-sync']);
  const port = await freePort();
  let running = false;
  const start = async (): Promise<void> => {
    await pgRun('pg_ctl', [
      '-D',
      data,
      '-w',
      '-l',
      log,
      '-o',
      `-p ${port} -k ${directory} -c listen_addresses=127.0.0.1 -c fsync=off`,
      'start',
    ]);
    running = true;
  };
  const stop = async (): Promise<void> => {
    await pgRun('pg_ctl', ['-D', data, '-w', '-m', 'fast', 'stop']);
    running = false;
  };
  let destroyed = false;
  try {
    await start();
  } catch (error) {
    rmSync(directory, { recursive: true, force: true });
    throw error;
  }
  return {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    port,
    start,
    stop,
    async destroy() {
      if (destroyed) return;
      destroyed = true;
      if (running)
        await pgRun('pg_ctl', ['-D', data, '-w', '-m', 'immediate', 'stop']).catch(() => undefined);
      rmSync(directory, { recursive: true, force: true });
    },
  };
}
