#!/usr/bin/env node
// Entry point for the two README commands. It needs only Node.js and npm: pnpm is fetched at the
// version package.json pins (through npx, without a global install), then the workspace is installed
// from the lockfile and the task runs.
import { spawn, spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const { packageManager } = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
const pnpmVersion = packageManager.split('@')[1];
const env = {
  ...process.env,
  TURBO_TELEMETRY_DISABLED: '1',
  DO_NOT_TRACK: '1',
  AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
};

/** Runs a command; returns its exit status (a command that cannot start at all ends this script). */
function status(command, args) {
  const result = spawnSync(command, args, { cwd: root, stdio: 'inherit', env });
  if (result.error) {
    console.error(`kcl: could not run ${command}: ${result.error.message}`);
    process.exit(1);
  }
  return result.status ?? 1;
}

function run(command, args) {
  const code = status(command, args);
  if (code !== 0) process.exit(code);
}

/** Runs `npx <args>` with its output on stderr; ends this script if it fails. */
function quiet(args) {
  const result = spawnSync('npx', args, { cwd: root, stdio: ['ignore', 2, 2], env });
  if (result.error || result.status !== 0) {
    console.error(`kcl: npx ${args.join(' ')} failed`);
    process.exit(result.status ?? 1);
  }
}

/** Every workspace package with a `bin`, and where it lives. */
function cliPackages() {
  return ['packages', 'apps'].flatMap((folder) =>
    readdirSync(join(root, folder)).flatMap((entry) => {
      const directory = join(root, folder, entry);
      try {
        const manifest = JSON.parse(readFileSync(join(directory, 'package.json'), 'utf8'));
        return manifest.bin === undefined ? [] : [{ name: manifest.name, directory, bin: manifest.bin }];
      } catch {
        return [];
      }
    }),
  );
}

const pnpmArgs = (args) => ['-y', `pnpm@${pnpmVersion}`, ...args];
const pnpm = (...args) => run('npx', pnpmArgs(args));

const [task = 'help', ...rest] = process.argv.slice(2);
switch (task) {
  case 'test': {
    pnpm('install', '--frozen-lockfile');
    // Every step runs even when an earlier one fails, so one run shows every failure.
    const steps = [
      // Two tasks at a time on two cores.
      [
        'exec',
        'turbo',
        'run',
        'build',
        'typecheck',
        'lint',
        'test',
        '--continue',
        '--concurrency=2',
        '--filter=!@kcl/e2e',
        ...rest,
      ],
      // The fleet tests last and alone: they measure failover times with workers as separate
      // processes and need the CPU to themselves.
      ['exec', 'turbo', 'run', 'test', '--filter=@kcl/e2e', ...rest],
      // The whole tree once more (root scripts and configs too), and the API docs, whose warnings fail.
      ['exec', 'biome', 'check', '.'],
      ['exec', 'typedoc', '--logLevel', 'Warn'],
    ];
    const failed = steps.filter((args) => status('npx', pnpmArgs(args)) !== 0);
    if (failed.length > 0) {
      console.error(
        `kcl: ${failed.length} step(s) failed: ${failed.map((args) => args.slice(1, 4).join(' ')).join('; ')}`,
      );
      process.exit(1);
    }
    break;
  }
  case 'demo':
    pnpm('install', '--frozen-lockfile');
    pnpm('exec', 'turbo', 'run', 'build', '--filter=@kcl/demo...', '--output-logs=errors-only');
    {
      // The demo cleans up after Ctrl-C (workers, emulators, temp files): wait for it instead of exiting first.
      const demo = spawn(process.execPath, [join(root, 'apps/demo/dist/main.js'), ...rest], {
        cwd: root,
        stdio: 'inherit',
        env,
      });
      for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) process.on(signal, () => {});
      demo.on('exit', (code, signal) => process.exit(code ?? (signal === null ? 1 : 130)));
    }
    break;
  case 'cli': {
    // `npm run kcl-migrate -- …` and friends: the workspace's own CLIs, built from this clone (npx
    // would fetch a published copy from the registry instead). Set-up output goes to stderr so a
    // CLI's stdout stays its own.
    const [name, ...args] = rest;
    const owner = cliPackages().find((entry) => entry.bin[name] !== undefined);
    if (owner === undefined) {
      console.error(`kcl: no workspace package has a CLI named ${JSON.stringify(name)}`);
      process.exit(2);
    }
    quiet(pnpmArgs(['install', '--frozen-lockfile', '--reporter=silent']));
    quiet(
      pnpmArgs(['exec', 'turbo', 'run', 'build', `--filter=${owner.name}...`, '--output-logs=errors-only']),
    );
    const cli = spawn(process.execPath, [join(owner.directory, owner.bin[name]), ...args], {
      // npm runs scripts in the repository root; relative paths the user gave are from where npm ran.
      // biome-ignore lint/suspicious/noUndeclaredEnvVars: set by npm, not a turbo task input
      cwd: process.env.INIT_CWD ?? process.cwd(),
      stdio: 'inherit',
      env,
    });
    // The CLI gets Ctrl-C itself (same process group) and decides how to stop; wait for it.
    for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
      process.on(signal, () => {
        if (signal !== 'SIGINT') cli.kill(signal);
      });
    }
    cli.on('exit', (code, signal) => process.exit(code ?? (signal === null ? 1 : 130)));
    break;
  }
  default:
    console.log('usage: npm test | npm run demo -- [demo options] | npm run <cli> -- [cli options]');
    process.exit(task === 'help' ? 0 : 2);
}
