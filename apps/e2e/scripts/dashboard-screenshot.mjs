#!/usr/bin/env node
// Takes the README's picture of the lease dashboard: runs the demo with --dashboard (its fleet, kill -9,
// join, split and merge), opens the page in Debian's Chromium through playwright-core once the split
// and the merge have happened, and writes docs/dashboard.png. Build first
// (npx pnpm@10.34.9 exec turbo run build --filter=@kcl/demo... --filter=@kcl/e2e...).
//
//   node apps/e2e/scripts/dashboard-screenshot.mjs [--out docs/dashboard.png] [--chromium /usr/bin/chromium]
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { chromium } from 'playwright-core';

const root = join(dirname(fileURLToPath(import.meta.url)), '../../..');
const { values } = parseArgs({
  options: {
    out: { type: 'string', default: join(root, 'docs/dashboard.png') },
    chromium: { type: 'string', default: process.env.KCL_CHROMIUM ?? '/usr/bin/chromium' },
  },
});
if (!existsSync(values.chromium)) {
  console.error(
    `dashboard-screenshot: no Chromium at ${values.chromium}: apt-get install -y chromium (or --chromium <path>)`,
  );
  process.exit(2);
}

const DURATION_S = 60;
// After the split (0.45) and the merge (0.6) of the run, before the graceful stop (0.75).
const SHOT_AT_S = DURATION_S * 0.66;

const demo = spawn(
  process.execPath,
  [
    join(root, 'apps/demo/dist/main.js'),
    '--dashboard',
    '--dashboard-port',
    '0',
    '--no-tty',
    '--duration',
    String(DURATION_S),
  ],
  { cwd: root, stdio: ['ignore', 'pipe', 'inherit'] },
);
const url = await new Promise((found, fail) => {
  const lines = createInterface({ input: demo.stdout });
  lines.on('line', (line) => {
    process.stdout.write(`${line}\n`);
    const match = /the lease dashboard: (http:\/\/\S+)/.exec(line);
    if (match) found(match[1]);
  });
  demo.once('exit', (code) => fail(new Error(`the demo exited (${code}) before serving the dashboard`)));
});
// The script starts with the producer, right after the dashboard is up.
await new Promise((done) => setTimeout(done, SHOT_AT_S * 1_000));

const browser = await chromium.launch({
  executablePath: values.chromium,
  args: ['--no-sandbox', '--disable-gpu'],
});
try {
  const page = await browser.newPage({ viewport: { width: 1360, height: 900 }, deviceScaleFactor: 1 });
  await page.goto(url);
  await page.waitForSelector('g[data-shard]');
  await page.waitForTimeout(1_500);
  await page.screenshot({ path: resolve(values.out), fullPage: true });
  console.log(`dashboard-screenshot: wrote ${resolve(values.out)}`);
} finally {
  await browser.close();
  demo.kill('SIGINT');
}
