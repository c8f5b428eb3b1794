/**
 * Every command against real stores (SQLite on disk, PostgreSQL): a lease table and worker registry
 * written through the store contract as workers write them, read and changed by `kcl`.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { LeaseStore } from '@kcl/core';
import {
  ExtendedSequenceNumber,
  encodeLeaseFigures,
  hashKeyRange,
  LEASE_FIGURES_METADATA_KEY,
  MAX_HASH_KEY,
} from '@kcl/core';
import { openLeaseStore } from '@kcl/stores';
import { checkService, startDynalite } from '@kcl/testkit';
import pg from 'pg';
import { afterAll, beforeEach, describe, expect, it } from 'vitest';
import type { ApplicationStatus } from '../src/index.js';
import { kcl, kclProcess } from './support/run-kcl.js';

const POSTGRES_URL = process.env.KCL_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const postgres = await checkService(
  `PostgreSQL at ${POSTGRES_URL}`,
  async () => {
    const client = new pg.Client({ connectionString: POSTGRES_URL, connectionTimeoutMillis: 3_000 });
    await client.connect();
    await client.end();
  },
  { timeoutMs: 5_000 },
);

const directory = mkdtempSync(join(tmpdir(), 'kcl-cli-'));
const dynalite = await startDynalite();
const postgresTable = `kcl_cli_${randomBytes(4).toString('hex')}`;
afterAll(async () => {
  rmSync(directory, { recursive: true, force: true });
  await dynalite.stop();
  if (postgres.available) {
    const client = new pg.Client({ connectionString: POSTGRES_URL });
    await client.connect();
    await client.query(`drop table if exists ${postgresTable}`);
    await client.query(`drop table if exists ${postgresTable}_workers`).catch(() => undefined);
    await client.end();
  }
});

const STORES = [
  { name: 'SQLite', url: `sqlite:${join(directory, 'leases.db')}`, available: true },
  { name: 'PostgreSQL', url: `${POSTGRES_URL}?table=${postgresTable}`, available: postgres.available },
  {
    name: 'DynamoDB (dynalite)',
    url: `dynamo://kcl-cli-leases?layout=shared&region=${dynalite.region}&endpoint=${encodeURIComponent(dynalite.endpoint)}`,
    available: true,
  },
];

const HALF = MAX_HASH_KEY / 2n;
const MINUTE_AGO = '2026-01-01T00:00:00.000Z';

/** A resharded application: a finished parent, its child, and an untouched shard; two live workers. */
async function seed(url: string, applicationName: string): Promise<LeaseStore> {
  const store = await openLeaseStore(url, { applicationName });
  await store.admin.ensureSchema();
  await store.leases.create({
    leaseKey: 'shardId-000',
    checkpoint: ExtendedSequenceNumber.SHARD_END,
    childShardIds: ['shardId-002'],
    hashKeyRange: hashKeyRange(0n, HALF),
  });
  await store.leases.create({
    leaseKey: 'shardId-001',
    checkpoint: ExtendedSequenceNumber.of('100'),
    hashKeyRange: hashKeyRange(HALF + 1n, MAX_HASH_KEY),
    owner: 'worker-1',
    leaseCounter: 5,
  });
  await store.leases.create({
    leaseKey: 'shardId-002',
    checkpoint: ExtendedSequenceNumber.of('200'),
    parentShardIds: ['shardId-000'],
    hashKeyRange: hashKeyRange(0n, HALF),
    owner: 'worker-2',
    leaseCounter: 7,
  });
  const figures = (leaseKey: string, millisBehindLatest: number) =>
    encodeLeaseFigures([
      {
        leaseKey,
        recordsPerSecond: 42,
        bytesPerSecond: 4_200,
        millisBehindLatest,
        lastCheckpointAt: new Date(MINUTE_AGO),
      },
    ]);
  await store.workers.heartbeat('worker-1', { [LEASE_FIGURES_METADATA_KEY]: figures('shardId-001', 1_500) });
  await store.workers.heartbeat('worker-2', { [LEASE_FIGURES_METADATA_KEY]: figures('shardId-002', 250) });
  return store;
}

describe.each(STORES)('kcl on $name', ({ url, available }) => {
  const it_ = it.skipIf(!available);
  let applicationName = '';
  let store: LeaseStore;
  const common = () => ['--app', applicationName, '--store', url];

  beforeEach(async (context) => {
    if (!available) return;
    applicationName = `billing-${randomBytes(4).toString('hex')}`;
    store = await seed(url, applicationName);
    context.onTestFinished(() => store.close());
  });

  it_('status --json lists every shard with its owner, lag and lineage, and the workers', async () => {
    const run = await kcl(['status', ...common(), '--json']);
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    const status = JSON.parse(run.stdout) as ApplicationStatus;
    expect(
      status.shards.map((shard) => [shard.leaseKey, shard.state, shard.owner, shard.millisBehindLatest]),
    ).toEqual([
      ['shardId-000', 'finished', null, 0],
      ['shardId-001', 'owned', 'worker-1', 1_500],
      ['shardId-002', 'owned', 'worker-2', 250],
    ]);
    expect(status.shards[0]?.childLeaseKeys).toEqual(['shardId-002']);
    expect(status.shards[2]?.parentLeaseKeys).toEqual(['shardId-000']);
    expect(status.shards[1]?.lastCheckpointAt).toBe(MINUTE_AGO);
    expect(
      status.workers.map((worker) => [worker.workerId, worker.alive, worker.leases, worker.recordsPerSecond]),
    ).toEqual([
      ['worker-1', true, ['shardId-001'], 42],
      ['worker-2', true, ['shardId-002'], 42],
    ]);
    expect(status.problems).toEqual([]);
  });

  it_('status --watch --json prints one JSON line per read until interrupted', async () => {
    const run = await kcl(
      ['status', ...common(), '--watch', '--json', '--interval-ms', '100'],
      {},
      (stdout) => stdout.split('\n').length > 3,
    );
    expect(run.code).toBe(0);
    const lines = run.stdout.trim().split('\n');
    expect(lines.length).toBeGreaterThanOrEqual(3);
    for (const line of lines) expect((JSON.parse(line) as ApplicationStatus).shards).toHaveLength(3);
  });

  it_('status reports problems: owners gone, shards without owner, holes in the hash key range', async () => {
    await store.leases.delete('shardId-001');
    await store.leases.create({
      leaseKey: 'shardId-003',
      checkpoint: ExtendedSequenceNumber.TRIM_HORIZON,
      hashKeyRange: hashKeyRange(HALF + 1n, HALF + 10n),
    });
    await new Promise((resolve) => setTimeout(resolve, 20));
    const run = await kcl(['status', ...common(), '--worker-expiry-ms', '5', '--check']);
    expect(run.code).toBe(4);
    expect(run.stdout).toMatch(/shardId-002 +expired +worker-2/);
    expect(run.stdout).toMatch(/lease shardId-002 is held by worker-2, whose heartbeat is old/);
    expect(run.stdout).toMatch(/shard shardId-003 has no owner/);
    expect(run.stdout).toMatch(/no unfinished lease covers hash keys/);
  });

  it_(
    'reset refuses while workers are live, plans with --dry-run, and --force fences the change',
    async () => {
      const refused = await kcl(['reset', ...common(), '--to', MINUTE_AGO, '--yes']);
      expect(refused.code).toBe(3);
      expect(refused.stderr).toMatch(/kcl reset refused:\n {2}- workers are live \(worker-1, worker-2\)/);
      expect((await store.leases.get('shardId-001'))?.checkpoint.toString()).toBe('100');

      const plan = await kcl(['reset', ...common(), '--to', MINUTE_AGO, '--dry-run', '--json']);
      expect(plan.code).toBe(0);
      const planned = JSON.parse(plan.stdout) as {
        leases: { leaseKey: string; action: string; to: string }[];
      };
      expect(planned.leases.map((entry) => [entry.leaseKey, entry.action])).toEqual([
        ['shardId-000', 'reset'],
        ['shardId-001', 'reset'],
        ['shardId-002', 'reset'],
      ]);
      expect((await store.leases.get('shardId-002'))?.checkpoint.toString()).toBe('200');

      const before = await store.leases.get('shardId-001');
      const forced = await kcl([
        'reset',
        ...common(),
        '--to',
        MINUTE_AGO,
        '--force',
        '--yes',
        '--no-progress',
      ]);
      expect(forced.stderr).toBe('');
      expect(forced.code).toBe(0);
      for (const leaseKey of ['shardId-000', 'shardId-001', 'shardId-002']) {
        const lease = await store.leases.get(leaseKey);
        expect(lease?.checkpoint.timestamp?.toISOString()).toBe(MINUTE_AGO);
        expect(lease?.owner).toBeNull();
      }
      // The running owner's next renewal (and checkpoint) on the counter it knew is refused; the stored
      // lease is not its own, so it drops it instead of adopting the new counter.
      const renewal = await store.leases.renew('shardId-001', before?.leaseCounter ?? 0);
      expect(renewal).toEqual({ ok: false, reason: 'counter-mismatch' });
      const late = await store.leases.checkpoint('shardId-001', before?.leaseCounter ?? 0, {
        checkpoint: ExtendedSequenceNumber.of('150'),
      });
      expect(late.ok).toBe(false);
      expect((await store.leases.get('shardId-001'))?.checkpoint.timestamp?.toISOString()).toBe(MINUTE_AGO);
    },
  );

  it_('reset to a sequence number needs one shard; bad positions are usage errors', async () => {
    const noShard = await kcl(['reset', ...common(), '--to', '12345', '--yes']);
    expect(noShard.code).toBe(2);
    expect(noShard.stderr).toMatch(/give exactly one --shard/);
    const bad = await kcl(['reset', ...common(), '--to', 'yesterday', '--yes']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/--to "yesterday" is not a position/);
    const local = await kcl(['reset', ...common(), '--to', '2026-01-01T00:00:00', '--yes']);
    expect(local.code).toBe(2);
    expect(local.stderr).toMatch(/--to "2026-01-01T00:00:00" has no offset from UTC: add Z/);
    const future = await kcl(['reset', ...common(), '--to', '2999-01-01T00:00:00+01:00', '--yes']);
    expect(future.code).toBe(2);
    expect(future.stderr).toMatch(/is in the future/);
    const unconfirmed = await kcl(['reset', ...common(), '--to', 'LATEST']);
    expect(unconfirmed.code).toBe(2);
    expect(unconfirmed.stderr).toMatch(/pass --yes/);
    const one = await kcl([
      'reset',
      ...common(),
      '--to',
      '150',
      '--shard',
      'shardId-001',
      '--force',
      '--yes',
      '--json',
    ]);
    expect(one.code).toBe(0);
    expect((await store.leases.get('shardId-001'))?.checkpoint.toString()).toBe('150');
    expect((await store.leases.get('shardId-002'))?.checkpoint.toString()).toBe('200');
  });

  it_("release hands a dead worker's leases back and removes it from the registry", async () => {
    const alive = await kcl(['release', ...common(), '--worker', 'worker-2', '--yes']);
    expect(alive.code).toBe(3);
    expect(alive.stderr).toMatch(/worker-2 is alive/);
    await new Promise((resolve) => setTimeout(resolve, 20));
    const run = await kcl([
      'release',
      ...common(),
      '--worker',
      'worker-2',
      '--worker-expiry-ms',
      '5',
      '--yes',
      '--json',
    ]);
    expect(run.code).toBe(0);
    expect(JSON.parse(run.stdout)).toMatchObject({
      outcomes: [{ leaseKey: 'shardId-002', result: 'released' }],
      removedFromRegistry: true,
    });
    expect((await store.leases.get('shardId-002'))?.owner).toBeNull();
    expect((await store.leases.get('shardId-001'))?.owner).toBe('worker-1');
    expect((await store.workers.list()).map((worker) => worker.workerId)).toEqual(['worker-1']);
  });

  it_(
    'a reset to a time is refused, even with --force, while a live worker runs a previous version',
    async () => {
      await store.workers.heartbeat('worker-old', { startedAt: MINUTE_AGO });
      const refused = await kcl(['reset', ...common(), '--to', MINUTE_AGO, '--force', '--yes']);
      expect(refused.code).toBe(3);
      expect(refused.stderr).toMatch(/live workers of a previous kcl version \(worker-old: /);
      expect((await store.leases.get('shardId-001'))?.checkpoint.toString()).toBe('100');
      // Other targets are readable by every version.
      const latest = await kcl(['reset', ...common(), '--to', 'LATEST', '--force', '--yes']);
      expect(latest.code).toBe(0);
    },
  );

  it_('an owner not in the registry (a Java KCL worker) is taken as live unless --force', async () => {
    await store.leases.create({
      leaseKey: 'shardId-009',
      checkpoint: ExtendedSequenceNumber.of('9'),
      owner: 'java-worker',
    });
    const refused = await kcl(['release', ...common(), '--worker', 'java-worker', '--yes']);
    expect(refused.code).toBe(3);
    expect(refused.stderr).toMatch(/java-worker holds leases but is not in the worker registry/);
    const reset = await kcl(['reset', ...common(), '--to', 'LATEST', '--worker-expiry-ms', '1', '--yes']);
    expect(reset.code).toBe(3);
    expect(reset.stderr).toMatch(/workers are live \(java-worker\)/);
    const forced = await kcl([
      'release',
      ...common(),
      '--worker',
      'java-worker',
      '--force',
      '--yes',
      '--json',
    ]);
    expect(forced.code).toBe(0);
    expect((await store.leases.get('shardId-009'))?.owner).toBeNull();
  });

  it_('forget-stream deletes the leases of one stream only', async () => {
    const orders = '123456789012:orders:1700000000';
    const payments = '123456789012:payments:1700000000';
    for (const stream of [orders, payments]) {
      await store.leases.create({
        leaseKey: `${stream}:shardId-000`,
        checkpoint: ExtendedSequenceNumber.TRIM_HORIZON,
        streamIdentifier: stream,
      });
    }
    const dry = await kcl(['forget-stream', ...common(), '--stream', 'orders', '--dry-run']);
    expect(dry.code).toBe(0);
    expect(dry.stdout).toContain(`${orders}:shardId-000`);
    const run = await kcl(['forget-stream', ...common(), '--stream', 'orders', '--yes']);
    expect(run.code).toBe(0);
    const keys = (await store.leases.list()).map((lease) => lease.leaseKey);
    expect(keys).toContain(`${payments}:shardId-000`);
    expect(keys).not.toContain(`${orders}:shardId-000`);
    const none = await kcl(['forget-stream', ...common(), '--stream', 'orders', '--yes']);
    expect(none.code).toBe(3);
  });
});

describe('the kcl binary', () => {
  it('prints its help, and names every missing option at once', async () => {
    const help = await kclProcess(['--help']);
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/kcl status --app billing/);
    const run = await kclProcess(['status', '--json']);
    expect(run.code).toBe(2);
    expect(JSON.parse(run.stdout)).toMatchObject({ command: 'status', exitCode: 2 });
    expect(run.stderr).toMatch(/--app is required[\s\S]*--store is required/);
  });
});
