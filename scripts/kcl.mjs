#!/usr/bin/env node
// Entry point for the two README commands. It needs only Node.js and npm: pnpm is fetched at the
// version package.json pins (through npx, without a global install), then the workspace is installed
// from the lockfile and the task runs.
import { spawn, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
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

function run(command, args) {
  const result = spawnSync(command, args, { cwd: root, stdio: 'inherit', env });
  if (result.error) {
    console.error(`kcl: could not run ${command}: ${result.error.message}`);
    process.exit(1);
  }
  if (result.status !== 0) process.exit(result.status ?? 1);
}

const pnpm = (...args) => run('npx', ['-y', `pnpm@${pnpmVersion}`, ...args]);

const [task = 'help', ...rest] = process.argv.slice(2);
switch (task) {
  case 'test':
    pnpm('install', '--frozen-lockfile');
    pnpm('exec', 'turbo', 'run', 'build', 'typecheck', 'lint', 'test', '--continue', ...rest);
    // The whole tree once more (root scripts and configs too), and the API docs, whose warnings fail.
    pnpm('exec', 'biome', 'check', '.');
    pnpm('exec', 'typedoc', '--logLevel', 'Warn');
    break;
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
  default:
    console.log('usage: npm test | npm run demo -- [demo options]');
    process.exit(task === 'help' ? 0 : 2);
}
