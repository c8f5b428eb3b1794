// The kcl CLI on a real fleet (worker processes on a SQLite store, the Kinesis emulator): status lists
// every shard with its owner and lag; reset refuses while the fleet runs, and with --force the new
// checkpoint holds (the owners drop their leases and replay from it); on the stopped application a
// reset to a time replays from there, skipping nothing; the dashboard, in a headless Chromium, shows
// every shard and its owner and follows a worker's kill -9.
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { Readable } from 'node:stream';
import { type ApplicationStatus, runKcl } from '@kcl/cli';
import { chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it, onTestFailed } from 'vitest';
import { findChromium } from './support/chromium.js';
import { FleetHarness, waitFor } from './support/harness.js';
import { startTestStream, type TestStream } from './support/stream.js';

const browser = findChromium();
const STREAM = 'orders';
const SHARDS = 3;
/** Heartbeats come every 300 ms (FLEET_TIMINGS.processes): a worker silent for 3 s is gone. */
const WORKER_EXPIRY_MS = '3000';
const KCL_MAIN = join(dirname(createRequire(import.meta.url).resolve('@kcl/cli')), 'main.js');

async function kcl(args: readonly string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  const code = await runKcl(
    ['node', 'kcl', ...args],
    {
      stdout: { write: (text: string) => (stdout += text) },
      stderr: { write: (text: string) => (stderr += text), isTTY: false },
      stdin: Readable.from([]),
      env: {},
    },
    new AbortController().signal,
  );
  return { code, stdout, stderr };
}

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('the kcl CLI on a running fleet', () => {
  let stream: TestStream | undefined;
  let fleet: FleetHarness | undefined;
  let dashboard: ChildProcess | undefined;
  const dir = mkdtempSync(join(tmpdir(), 'kcl-e2e-cli-'));
  const applicationName = `cli-${Date.now()}`;
  const storeUrl = `sqlite:${join(dir, 'leases.db')}`;
  const common = ['--app', applicationName, '--store', storeUrl, '--worker-expiry-ms', WORKER_EXPIRY_MS];

  beforeAll(async () => {
    stream = await startTestStream();
    await stream.create(STREAM, SHARDS);
  });
  afterAll(async () => {
    dashboard?.kill('SIGTERM');
    await fleet?.stopAll();
    await stream?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  /** How often each record's data was processed, over every worker. */
  const counts = (): Map<string, number> => {
    const seen = new Map<string, number>();
    for (const line of fleet?.processed() ?? []) seen.set(line.d, (seen.get(line.d) ?? 0) + 1);
    return seen;
  };
  const processedAtLeast = (records: readonly { data: string }[], times: number) => () => {
    const seen = counts();
    return records.every((record) => (seen.get(record.data) ?? 0) >= times);
  };

  it('status, reset (refused, forced, on the stopped application) and the dashboard', async () => {
    const running = stream;
    if (running === undefined) throw new Error('the setup did not run');
    const harness = new FleetHarness({
      dir,
      store: { kind: 'sqlite', file: join(dir, 'leases.db') },
      kinesisEndpoint: running.emulator.endpoint,
      streamName: STREAM,
      applicationName,
    });
    fleet = harness;
    onTestFailed(() => {
      for (const workerId of ['w1', 'w2', 'w3']) {
        const stderr = harness.stderrOf(workerId);
        if (stderr !== '') process.stderr.write(`${workerId} stderr:\n${stderr.slice(-3_000)}\n`);
      }
    });
    await harness.spawn('w1');
    await harness.spawn('w2');
    await running.produce(STREAM, 150, 150);
    const before = running.writtenTo(STREAM).slice();
    await waitFor(processedAtLeast(before, 1), 60_000, 'the first records processed');

    // status --json: every shard, its owner (a live worker) and its lag from the heartbeat figures.
    let status: ApplicationStatus | undefined;
    await waitFor(
      async () => {
        const run = await kcl(['status', ...common, '--json']);
        status = JSON.parse(run.stdout) as ApplicationStatus;
        return (
          status.shards.length === SHARDS &&
          status.shards.every((shard) => shard.owner !== null && shard.millisBehindLatest !== null)
        );
      },
      20_000,
      'kcl status listing every shard with an owner and a lag',
    );
    expect(status?.shards.map((shard) => shard.state)).toEqual(['owned', 'owned', 'owned']);
    expect(new Set(status?.shards.map((shard) => shard.owner))).toEqual(new Set(['w1', 'w2']));
    expect(status?.workers.filter((worker) => worker.alive).map((worker) => worker.workerId)).toEqual([
      'w1',
      'w2',
    ]);

    // A time between the first records and the next ones (arrival times are kept to the millisecond,
    // the gap leaves room for the emulator's clock).
    await pause(1_100);
    const resetTime = new Date().toISOString();
    await pause(1_100);
    await running.produce(STREAM, 90, 90);
    const after = running.writtenTo(STREAM).slice(before.length);
    await waitFor(processedAtLeast(after, 1), 60_000, 'the later records processed');

    // With the fleet live, a reset is refused and changes nothing.
    const refused = await kcl(['reset', ...common, '--to', resetTime, '--yes']);
    expect(refused.code).toBe(3);
    expect(refused.stderr).toMatch(/workers are live \(w1, w2\)/);
    await pause(1_000);
    expect(processedAtLeast(after, 2)()).toBe(false);

    // --force: fenced through the lease counter, the owners drop their leases and replay from the
    // time; the records before it are not processed again.
    const forced = await kcl(['reset', ...common, '--to', resetTime, '--force', '--yes', '--no-progress']);
    expect(forced.stderr).toBe('');
    expect(forced.code).toBe(0);
    await waitFor(processedAtLeast(after, 2), 60_000, 'the records after the reset time processed again');
    expect(before.filter((record) => (counts().get(record.data) ?? 0) > 1)).toEqual([]);

    // The stopped application: a reset to the same time, and records written while it is stopped;
    // a new worker replays from the time and skips nothing.
    await harness.stopAll();
    const stopped = await kcl(['reset', ...common, '--to', resetTime, '--yes', '--json']);
    expect(stopped.code).toBe(0);
    expect(JSON.parse(stopped.stdout).outcomes).toHaveLength(SHARDS);
    await running.produce(STREAM, 60, 60);
    const whileStopped = running.writtenTo(STREAM).slice(before.length + after.length);
    await harness.spawn('w3');
    await waitFor(
      processedAtLeast(after, 3),
      60_000,
      'the records after the reset time processed a third time',
    );
    await waitFor(processedAtLeast(whileStopped, 1), 60_000, 'the records written while stopped processed');
    expect(before.filter((record) => (counts().get(record.data) ?? 0) > 1)).toEqual([]);

    // The dashboard, in a headless Chromium: every shard with its owner, then a worker's kill -9.
    if (browser.executablePath === null) return;
    await harness.spawn('w4');
    const server = spawn(
      process.execPath,
      [KCL_MAIN, 'dashboard', ...common, '--port', '0', '--interval-ms', '300', '--json'],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    dashboard = server;
    const url = await new Promise<string>((resolve, reject) => {
      let output = '';
      server.stdout?.on('data', (chunk: Buffer) => {
        output += chunk.toString('utf8');
        const line = output.split('\n')[0];
        if (!output.includes('\n') || line === undefined) return;
        try {
          resolve((JSON.parse(line) as { url: string }).url);
        } catch (error) {
          reject(error);
        }
      });
      server.once('exit', (code) => reject(new Error(`kcl dashboard exited with ${code}`)));
    });
    const chrome = await chromium.launch({
      executablePath: browser.executablePath,
      args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
    });
    try {
      const page = await chrome.newPage();
      await page.goto(url);
      // What the page shows now: each shard's owner, and which workers it shows alive.
      const shown = async () => ({
        shards: await page.$$eval('g[data-shard]', (nodes) =>
          nodes.map((node) => [node.getAttribute('data-shard') ?? '', node.getAttribute('data-owner') ?? '']),
        ),
        alive: await page.$$eval('tr[data-worker]', (rows) =>
          rows
            .filter((row) => row.getAttribute('data-alive') === 'true')
            .map((row) => row.getAttribute('data-worker') ?? ''),
        ),
      });
      await waitFor(
        async () => {
          const view = await shown();
          return (
            view.shards.length === SHARDS &&
            view.alive.includes('w3') &&
            view.alive.includes('w4') &&
            view.shards.every(([, owner]) => owner === 'w3' || owner === 'w4') &&
            view.shards.some(([, owner]) => owner === 'w4')
          );
        },
        30_000,
        'the dashboard showing every shard owned by w3 or w4',
      );
      expect((await shown()).shards.map(([shard]) => shard)).toEqual(
        status?.shards.map((shard) => shard.leaseKey),
      );

      await harness.kill('w4');
      await waitFor(
        async () => {
          const view = await shown();
          return view.shards.every(([, owner]) => owner === 'w3') && !view.alive.includes('w4');
        },
        30_000,
        'the dashboard showing w4 gone and its shards taken by w3',
      );
      const events = await page.$$eval('li[data-event]', (items) =>
        items.map((item) => item.getAttribute('data-event')),
      );
      expect(events).toContain('taken');
    } finally {
      await chrome.close();
    }
  });
});
