/**
 * The packages as a user gets them: every published package is packed (`pnpm pack`, which turns
 * `workspace:` ranges into versions), the tarballs are installed with npm into a scratch project
 * outside the workspace, and the README's minimal consumer — taken from README.md, with only the
 * Kinesis client pointed at the local emulator — runs there: it prints the records, a SIGINT stops
 * it with its leases released, and a restart resumes after the checkpoint.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestStream, type TestStream } from './support/stream.js';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '../../..');
const STREAM = 'orders';
const INSTALL_TIMEOUT_MS = 600_000;
const USER_SDK_VERSION = '3.1140.0';

interface WorkspacePackage {
  readonly name: string;
  readonly directory: string;
  readonly private: boolean;
}

function workspacePackages(): WorkspacePackage[] {
  return readdirSync(join(ROOT, 'packages')).map((entry) => {
    const directory = join(ROOT, 'packages', entry);
    const manifest = JSON.parse(readFileSync(join(directory, 'package.json'), 'utf8')) as {
      name: string;
      private?: boolean;
    };
    return { name: manifest.name, directory, private: manifest.private === true };
  });
}

function pnpmVersion(): string {
  const manifest = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { packageManager: string };
  return manifest.packageManager.split('@')[1] ?? '';
}

function run(command: string, args: readonly string[], cwd: string): string {
  const result = spawnSync(command, args, {
    cwd,
    encoding: 'utf8',
    env: { ...process.env, npm_config_audit: 'false', npm_config_fund: 'false' },
    maxBuffer: 64 * 1024 * 1024,
  });
  if (result.status !== 0) {
    throw new Error(
      `${command} ${args.join(' ')} (in ${cwd}) exited with ${result.status}:\n${result.stdout}\n${result.stderr}`,
    );
  }
  return result.stdout;
}

/** The README's minimal consumer, with its Kinesis client pointed at the emulator. */
function readmeConsumer(emulator: { readonly endpoint: string; readonly region: string }): string {
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
  const section = readme.split('## A minimal consumer')[1];
  const block = section === undefined ? undefined : /```ts\n([\s\S]*?)```/.exec(section)?.[1];
  if (block === undefined)
    throw new Error('README.md has no "## A minimal consumer" section with a ts block');
  const client = "new KinesisClient({ region: 'eu-west-1' })";
  if (!block.includes(client)) throw new Error(`the README's minimal consumer no longer builds ${client}`);
  const local = `new KinesisClient({
    region: ${JSON.stringify(emulator.region)},
    endpoint: ${JSON.stringify(emulator.endpoint)},
    credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
    requestHandler: new NodeHttpHandler(), // the emulator speaks HTTP/1.1
  })`;
  return `import { NodeHttpHandler } from '@smithy/node-http-handler';\n${block.replace(client, local)}`;
}

interface Running {
  readonly child: ChildProcess;
  readonly output: () => string;
  readonly exited: Promise<number | null>;
}

function startConsumer(directory: string): Running {
  const child = spawn(process.execPath, ['consumer.mjs'], {
    cwd: directory,
    env: { ...process.env, AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout?.on('data', (chunk: Buffer) => {
    output += chunk.toString('utf8');
  });
  child.stderr?.on('data', (chunk: Buffer) => {
    output += chunk.toString('utf8');
  });
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return { child, output: () => output, exited };
}

async function waitFor(
  condition: () => boolean,
  what: string,
  running: Running,
  timeoutMs = 60_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (running.child.exitCode !== null) {
      throw new Error(`the consumer exited (${running.child.exitCode}) before ${what}:\n${running.output()}`);
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}:\n${running.output()}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** The data of every record line the consumer printed (`<shardId> <partitionKey> <data>`). */
function printedData(output: string): string[] {
  return output
    .split('\n')
    .map((line) => /^shardId-\d+ \S+ (\S+)$/.exec(line.trim())?.[1])
    .filter((data): data is string => data !== undefined);
}

describe('the published packages, installed with npm outside the workspace', () => {
  let workspace = '';
  let tarballs = '';
  let published: WorkspacePackage[] = [];
  let scratch = '';
  let stream: TestStream | undefined;

  beforeAll(async () => {
    workspace = mkdtempSync(join(tmpdir(), 'kcl-install-'));
    tarballs = join(workspace, 'tarballs');
    published = workspacePackages().filter((entry) => !entry.private);
    run(
      'npx',
      [
        '-y',
        `pnpm@${pnpmVersion()}`,
        '-r',
        ...published.flatMap((entry) => ['--filter', entry.name]),
        'pack',
        '--pack-destination',
        tarballs,
      ],
      ROOT,
    );
    const tarballOf = new Map(
      readdirSync(tarballs).map((file) => [
        `@kcl/${file.replace(/^kcl-/, '').replace(/-\d+\.\d+\.\d+.*\.tgz$/, '')}`,
        file,
      ]),
    );
    for (const entry of published) {
      if (!tarballOf.has(entry.name)) throw new Error(`pnpm pack made no tarball for ${entry.name}`);
    }
    const kcl = Object.fromEntries(
      published.map((entry) => [entry.name, `file:tarballs/${tarballOf.get(entry.name)}`]),
    );
    scratch = join(workspace, 'app');
    mkdirSync(scratch);
    writeFileSync(
      join(scratch, 'package.json'),
      JSON.stringify(
        {
          name: 'kcl-install-check',
          private: true,
          type: 'module',
          dependencies: {
            ...Object.fromEntries(
              Object.entries(kcl).map(([name, spec]) => [name, spec.replace('file:', 'file:../')]),
            ),
            // What the README's minimal consumer imports besides kcl: the user's own choices.
            // An application that already uses an older SDK than kcl's lockfile.
            '@aws-sdk/client-kinesis': USER_SDK_VERSION,
            '@smithy/node-http-handler': '^4.0.0',
            'better-sqlite3': '12.11.1',
            kysely: '0.28.19',
          },
          // kcl packages depend on each other by version; these are the tarballs of that version.
          overrides: Object.fromEntries(published.map((entry) => [entry.name, `$${entry.name}`])),
        },
        null,
        2,
      ),
    );
    run('npm', ['install', '--no-audit', '--no-fund', '--loglevel=error'], scratch);

    stream = await startTestStream();
    await stream.create(STREAM, 2);
    writeFileSync(join(scratch, 'consumer.mjs'), readmeConsumer(stream.emulator));
  }, INSTALL_TIMEOUT_MS);

  afterAll(async () => {
    await stream?.stop();
    if (workspace !== '') rmSync(workspace, { recursive: true, force: true });
  });

  it('packs every published package with a LICENSE, its repository, and versions for workspace ranges', () => {
    for (const file of readdirSync(tarballs)) {
      const listing = run('tar', ['-tzf', file], tarballs).split('\n');
      expect(listing, file).toContain('package/LICENSE');
      expect(listing, file).toContain('package/README.md');
      expect(
        listing.filter((entry) => entry.endsWith('.test.js')),
        file,
      ).toEqual([]);
      const manifest = JSON.parse(run('tar', ['-xOzf', file, 'package/package.json'], tarballs)) as Record<
        string,
        unknown
      >;
      expect(manifest.license, file).toBe('Apache-2.0');
      expect(manifest.repository, file).toMatchObject({
        type: 'git',
        directory: expect.stringMatching(/^packages\//),
      });
      expect(manifest.homepage, file).toMatch(/^https:\/\//);
      expect(manifest.bugs, file).toMatchObject({ url: expect.stringMatching(/^https:\/\//) });
      expect(JSON.stringify(manifest), file).not.toContain('workspace:');
    }
    expect(readdirSync(tarballs)).toHaveLength(published.length);
  });

  it('installs one copy of the AWS SDK client the user also depends on', () => {
    const tree = JSON.parse(
      run('npm', ['ls', '@aws-sdk/client-kinesis', '--all', '--json'], scratch),
    ) as unknown;
    const versions = new Set<string>();
    const walk = (node: unknown): void => {
      const dependencies =
        (node as { dependencies?: Record<string, { version?: string }> }).dependencies ?? {};
      for (const [name, child] of Object.entries(dependencies)) {
        if (name === '@aws-sdk/client-kinesis' && child.version !== undefined) versions.add(child.version);
        walk(child);
      }
    };
    walk(tree);
    expect([...versions]).toEqual([USER_SDK_VERSION]);
  });

  it("runs the README's minimal consumer: records printed, SIGINT releases, a restart resumes", async () => {
    if (stream === undefined) throw new Error('the emulator did not start');
    await stream.produce(STREAM, 40, 8);
    const first = startConsumer(scratch);
    const firstBatch = stream.written.map((record) => record.data);
    await waitFor(
      () => firstBatch.every((data) => printedData(first.output()).includes(data)),
      'every record of the first batch to be printed',
      first,
    );

    first.child.kill('SIGINT');
    expect(await first.exited).toBe(0);
    const leases = new Database(join(scratch, 'leases.db'), { readonly: true });
    const rows = leases
      .prepare(
        'select lease_key, lease_owner, checkpoint_sequence_number as checkpoint from kcl_leases where application_name = ?',
      )
      .all('billing') as Array<{ lease_key: string; lease_owner: string | null; checkpoint: string }>;
    leases.close();
    expect(rows.map((row) => row.lease_key).sort()).toEqual(['shardId-000000000000', 'shardId-000000000001']);
    for (const row of rows) {
      expect(row.lease_owner).toBeNull();
      expect(row.checkpoint).toMatch(/^\d+$/);
    }

    await stream.produce(STREAM, 20, 8);
    const secondBatch = stream.written.slice(firstBatch.length).map((record) => record.data);
    const second = startConsumer(scratch);
    await waitFor(
      () => secondBatch.every((data) => printedData(second.output()).includes(data)),
      'every record of the second batch to be printed after the restart',
      second,
    );
    second.child.kill('SIGINT');
    expect(await second.exited).toBe(0);
    // The restart began after the checkpoints: nothing of the first batch came again.
    expect(printedData(second.output()).filter((data) => firstBatch.includes(data))).toEqual([]);
    expect(printedData(second.output()).sort()).toEqual([...secondBatch].sort());

    // The installed kcl binary (@kcl/cli) reads the lease table the consumer left.
    const status = JSON.parse(
      run(
        join(scratch, 'node_modules/.bin/kcl'),
        ['status', '--app', 'billing', '--store', 'sqlite:leases.db', '--json'],
        scratch,
      ),
    ) as { shards: Array<{ leaseKey: string; owner: string | null }> };
    expect(status.shards.map((shard) => [shard.leaseKey, shard.owner])).toEqual([
      ['shardId-000000000000', null],
      ['shardId-000000000001', null],
    ]);
  });
});
