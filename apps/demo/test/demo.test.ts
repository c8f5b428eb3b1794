import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync } from 'node:fs';
import { connect } from 'node:net';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const main = join(dirname(fileURLToPath(import.meta.url)), '../dist/main.js');

interface Run {
  readonly child: ChildProcess;
  readonly output: () => string;
  readonly exit: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

function startDemo(args: readonly string[]): Run {
  const child = spawn(process.execPath, [main, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout?.on('data', (chunk: Buffer) => {
    output += chunk.toString();
  });
  child.stderr?.on('data', (chunk: Buffer) => {
    output += chunk.toString();
  });
  const exit = once(child, 'exit').then(([code, signal]) => ({
    code: code as number | null,
    signal: signal as NodeJS.Signals | null,
  }));
  return { child, output: () => output, exit };
}

async function waitForOutput(run: Run, pattern: RegExp, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!pattern.test(run.output())) {
    if (Date.now() > deadline)
      throw new Error(`no ${pattern} within ${timeoutMs} ms; output:\n${run.output()}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

/** Processes whose command line mentions `text` (the worker processes carry the run directory in theirs). */
function processesMentioning(text: string): string[] {
  return execFileSync('ps', ['-eo', 'pid=,args='], { encoding: 'utf8' })
    .split('\n')
    .filter((line) => line.includes(text) && !line.includes('ps -eo'));
}

describe('the demo, as a user runs it', () => {
  it('runs the whole script and verifies: nothing lost, every key in order', {
    timeout: 150_000,
  }, async () => {
    const run = startDemo(['--duration', '25', '--no-tty']);
    const { code } = await run.exit;
    const output = run.output();
    expect(output, output).toMatch(
      /^produced (\d+), processed \1, lost 0, per-key order violations 0, duplicates \d+$/m,
    );
    expect(code, output).toBe(0);
    // Every step of the script happened and showed up as it happened.
    expect(output).toMatch(/^\[00:0\d\.\d\] kill -9 w\d/m);
    expect(output).toMatch(/\] w4 joins/);
    expect(output).toMatch(/\] split shard-\d+/);
    expect(output).toMatch(/\] merge shard-\d+ \+ shard-\d+/);
    expect(output).toMatch(/\] stop w\d gracefully/);
    expect(output).toMatch(/^failover: \d of \d leases? of the killed w\d taken over/m);
    expect(output).toMatch(/^verified: no record lost/m);
    // Every duplicate has a cause the demo can name.
    expect(output, output).not.toMatch(/unexpected/);
    // The plain mode never moves the cursor.
    expect(output).not.toContain('\x1b[');
    // --duration is the whole run: the script gets what the startup left, and the producer stops a
    // second before the end for the drain and the final stop.
    const durations =
      /^durations: startup ([\d.]+) s, script ([\d.]+) s, drain ([\d.]+) s, final stop ([\d.]+) s, total ([\d.]+) s \(--duration 25\.0 s\)$/m.exec(
        output,
      );
    expect(durations, output).not.toBeNull();
    const [startup, script, , , total] = durations!.slice(1).map(Number) as [
      number,
      number,
      number,
      number,
      number,
    ];
    expect(startup + script, output).toBeGreaterThan(23.5);
    expect(startup + script, output).toBeLessThan(25);
    // The drain and the final stop take well under a second here; a loaded machine may take longer.
    expect(total, output).toBeLessThan(25 + 5);
    const produced = Number(/^produced (\d+)/m.exec(output)?.[1]);
    expect(produced).toBeGreaterThan(script * 200 * 0.6);
    // The SQLite file and the worker outputs are gone.
    const runDirectory = /lease store: sqlite:(\S+)\/leases\.db/.exec(output)?.[1] ?? '';
    expect(runDirectory).not.toBe('');
    expect(existsSync(runDirectory)).toBe(false);
  });

  it('reads several streams as one application and verifies each stream and the total', {
    timeout: 150_000,
  }, async () => {
    const run = startDemo(['--duration', '20', '--streams', '2', '--shards', '2', '--no-tty']);
    const { code } = await run.exit;
    const output = run.output();
    const total =
      /^2 streams: produced (\d+), processed \1, lost 0, per-key order violations 0, duplicates (\d+)$/m.exec(
        output,
      );
    expect(total, output).not.toBeNull();
    const perStream = ['kcl-demo-1', 'kcl-demo-2'].map((stream) => {
      const match = new RegExp(
        `^  ${stream}: produced (\\d+), processed \\1, lost 0, per-key order violations 0, duplicates (\\d+)$`,
        'm',
      ).exec(output);
      expect(match, output).not.toBeNull();
      return { produced: Number(match?.[1]), duplicates: Number(match?.[2]) };
    });
    // The total is the sum of the streams, and each stream got its share of the records.
    expect(perStream[0]!.produced + perStream[1]!.produced).toBe(Number(total?.[1]));
    expect(perStream[0]!.duplicates + perStream[1]!.duplicates).toBe(Number(total?.[2]));
    const script = Number(/^durations: startup [\d.]+ s, script ([\d.]+) s/m.exec(output)?.[1]);
    for (const stream of perStream) expect(stream.produced).toBeGreaterThan(script * 100 * 0.6);
    expect(code, output).toBe(0);
    expect(output).toMatch(/^verified: no record lost on any of the 2 streams/m);
    // Both streams got leases keyed by their stream, and the shards show which stream they belong to.
    expect(output).toMatch(/created the initial leases .*demo-1\/shard-\d/);
    expect(output).toMatch(/created the initial leases .*demo-2\/shard-\d/);
    expect(output).toMatch(/^\[\d\d:\d\d\.\d\] shards: demo-1\/shard-0 /m);
    // The split happens on the first stream, the merge on the last.
    expect(output).toMatch(/\] split demo-1\/shard-\d+/);
    expect(output).toMatch(/\] merge demo-2\/shard-\d+ \+ demo-2\/shard-\d+/);
    expect(output, output).not.toMatch(/unexpected/);
  });

  it('cleans up on Ctrl-C: workers and emulator stopped, the run directory removed', {
    timeout: 90_000,
  }, async () => {
    const run = startDemo(['--no-tty', '--workers', '2']);
    await waitForOutput(run, /^\[00:0\d\.\d\] producing:/m, 75_000);
    const runDirectory = /lease store: sqlite:(\S+)\/leases\.db/.exec(run.output())?.[1] ?? '';
    expect(runDirectory).not.toBe('');
    expect(processesMentioning(runDirectory)).toHaveLength(2);
    const emulatorPort = Number(
      /kinesis-local listens on http:\/\/127\.0\.0\.1:(\d+)/.exec(run.output())?.[1],
    );
    expect(await accepts(emulatorPort)).toBe(true);
    run.child.kill('SIGINT');
    const { code } = await run.exit;
    expect(code).toBe(130);
    expect(run.output()).toMatch(/SIGINT — stopping the workers and emulators/);
    expect(processesMentioning(runDirectory)).toEqual([]);
    expect(existsSync(runDirectory)).toBe(false);
    expect(await accepts(emulatorPort)).toBe(false);
  });

  it('rejects invalid options with every problem and exit status 2', async () => {
    const run = startDemo(['--workers', '0', '--streams', '0', '--store', 'redis', '--fast']);
    const { code } = await run.exit;
    expect(code).toBe(2);
    expect(run.output()).toContain('kcl demo: invalid options:');
    expect(run.output()).toContain('  - unknown option --fast');
    expect(run.output()).toContain('  - --workers must be a whole number from 2 to 10 (got "0")');
    expect(run.output()).toContain('  - --streams must be a whole number from 1 to 8 (got "0")');
    expect(run.output()).toContain('  - --store must be one of sqlite, postgres, dynamo-local (got "redis")');
  });
});
