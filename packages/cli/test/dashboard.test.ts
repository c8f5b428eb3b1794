/** The dashboard server on a SQLite store: the page, and the state it polls, following the store. */
import { mkdtempSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ExtendedSequenceNumber } from '@kcl/core';
import { openLeaseStore } from '@kcl/stores';
import { waitUntil } from '@kcl/testkit';
import { afterAll, describe, expect, it } from 'vitest';
import { type DashboardState, startDashboard } from '../src/index.js';

const directory = mkdtempSync(join(tmpdir(), 'kcl-dashboard-'));
afterAll(() => rmSync(directory, { recursive: true, force: true }));

describe('the dashboard server', () => {
  it('serves the page and a state that follows the lease table, with lease events', async () => {
    const store = await openLeaseStore(`sqlite:${join(directory, 'leases.db')}`, {
      applicationName: 'billing',
    });
    await store.admin.ensureSchema();
    const created = await store.leases.create({
      leaseKey: 'shardId-0',
      checkpoint: ExtendedSequenceNumber.TRIM_HORIZON,
    });
    await store.workers.heartbeat('worker-1');
    const dashboard = await startDashboard({ store, port: 0, intervalMs: 100 });
    try {
      const page = await fetch(dashboard.url);
      expect(page.headers.get('content-type')).toMatch(/text\/html/);
      expect(await page.text()).toContain('/api/state');
      const state = async () => (await (await fetch(`${dashboard.url}api/state`)).json()) as DashboardState;
      expect((await state()).status?.shards.map((shard) => [shard.leaseKey, shard.state])).toEqual([
        ['shardId-0', 'unowned'],
      ]);
      if (!created.ok) throw new Error('lease not created');
      await store.leases.take('shardId-0', created.lease.leaseCounter, 'worker-1');
      await waitUntil(
        async () => (await state()).events.some((event) => event.kind === 'taken'),
        5_000,
        'the taken event',
      );
      const latest = await state();
      expect(latest.status?.shards[0]?.owner).toBe('worker-1');
      expect(latest.events.at(-1)).toMatchObject({ kind: 'taken', leaseKey: 'shardId-0', to: 'worker-1' });
      expect(latest.history.length).toBeGreaterThan(1);
      expect((await fetch(`${dashboard.url}nothing`)).status).toBe(404);

      // A deleted lease (a finished parent after cleanup) stays in the lineage graph, faded.
      await store.leases.delete('shardId-0');
      await waitUntil(async () => (await state()).retiredShards.length === 1, 5_000, 'the retired shard');
      expect((await state()).retiredShards[0]).toMatchObject({ leaseKey: 'shardId-0', owner: 'worker-1' });
      expect((await state()).events.at(-1)).toMatchObject({ kind: 'deleted', leaseKey: 'shardId-0' });
    } finally {
      await dashboard.stop();
      await store.close();
    }
  });

  it('bound to loopback, answers only requests naming this machine (DNS rebinding)', async () => {
    const store = await openLeaseStore(`sqlite:${join(directory, 'hosts.db')}`, {
      applicationName: 'billing',
    });
    await store.admin.ensureSchema();
    const dashboard = await startDashboard({ store, port: 0, intervalMs: 60_000 });
    const port = Number(new URL(dashboard.url).port);
    const statusFor = (host: string) =>
      new Promise<number>((resolve, reject) => {
        const sent = request(
          { host: '127.0.0.1', port, path: '/api/state', headers: { host } },
          (response) => {
            response.resume();
            resolve(response.statusCode ?? 0);
          },
        );
        sent.on('error', reject);
        sent.end();
      });
    try {
      expect(await statusFor(`localhost:${port}`)).toBe(200);
      expect(await statusFor(`127.0.0.1:${port}`)).toBe(200);
      expect(await statusFor(`[::1]:${port}`)).toBe(200);
      expect(await statusFor(`attacker.example:${port}`)).toBe(421);
      expect(await statusFor('localhost')).toBe(421);
    } finally {
      await dashboard.stop();
      await store.close();
    }
  });

  it('asks Kinesis about each stream once a minute, not at every read', async () => {
    const store = await openLeaseStore(`sqlite:${join(directory, 'streams.db')}`, {
      applicationName: 'billing',
    });
    await store.admin.ensureSchema();
    const stream = '123456789012:orders:1700000000';
    await store.leases.create({
      leaseKey: `${stream}:shardId-0`,
      checkpoint: ExtendedSequenceNumber.TRIM_HORIZON,
      streamIdentifier: stream,
    });
    let described = 0;
    const kinesis = {
      send: async () => {
        described += 1;
        return { StreamDescriptionSummary: { StreamCreationTimestamp: new Date(1_700_000_000_000) } };
      },
    } as never;
    const dashboard = await startDashboard({ store, port: 0, intervalMs: 20, kinesis });
    try {
      await waitUntil(async () => dashboard.state().history.length >= 5, 5_000, 'five reads');
      expect(described).toBe(1);
    } finally {
      await dashboard.stop();
      await store.close();
    }
  });
});
