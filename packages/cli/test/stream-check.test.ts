/** kcl status with --kinesis-endpoint: leases of streams that no longer exist are reported. */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DescribeStreamSummaryCommand } from '@aws-sdk/client-kinesis';
import { ExtendedSequenceNumber } from '@kcl/core';
import { openLeaseStore } from '@kcl/stores';
import { type RunningEmulator, startKinesisLocal } from '@kcl/testkit';
import { createStream, localKinesisClient } from '@kcl/testkit/kinesis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ApplicationStatus } from '../src/index.js';
import { kcl } from './support/run-kcl.js';

const directory = mkdtempSync(join(tmpdir(), 'kcl-streams-'));
let emulator: RunningEmulator | undefined;
beforeAll(async () => {
  emulator = await startKinesisLocal();
});
afterAll(async () => {
  await emulator?.stop();
  rmSync(directory, { recursive: true, force: true });
});

describe('kcl status --kinesis-endpoint', () => {
  it('reports the leases of deleted (and deleted then recreated) streams, not those of live ones', async () => {
    if (emulator === undefined) throw new Error('the emulator did not start');
    const client = localKinesisClient(emulator);
    await createStream(client, 'orders', 1);
    const summary = await client.send(new DescribeStreamSummaryCommand({ StreamName: 'orders' }));
    client.destroy();
    const epoch = Math.floor(
      (summary.StreamDescriptionSummary?.StreamCreationTimestamp?.getTime() ?? 0) / 1_000,
    );
    const live = `123456789012:orders:${epoch}`;
    const older = `123456789012:orders:${epoch - 3_600}`;
    const gone = `123456789012:payments:${epoch}`;
    const url = `sqlite:${join(directory, 'leases.db')}`;
    const store = await openLeaseStore(url, { applicationName: 'billing' });
    await store.admin.ensureSchema();
    for (const stream of [live, older, gone]) {
      await store.leases.create({
        leaseKey: `${stream}:shardId-000000000000`,
        checkpoint: ExtendedSequenceNumber.TRIM_HORIZON,
        streamIdentifier: stream,
      });
    }
    await store.close();

    const run = await kcl([
      'status',
      '--app',
      'billing',
      '--store',
      url,
      '--kinesis-endpoint',
      emulator.endpoint,
      '--json',
    ]);
    expect(run.stderr).toBe('');
    const status = JSON.parse(run.stdout) as ApplicationStatus;
    const deleted = status.problems
      .filter((problem) => problem.kind === 'deleted-stream')
      .map((problem) => problem.message);
    expect(deleted).toHaveLength(2);
    expect(deleted.find((message) => message.includes(gone))).toMatch(
      /no longer exists; 1 of its leases remain: kcl forget-stream --stream/,
    );
    expect(deleted.find((message) => message.includes(older))).toMatch(
      /was deleted \(a stream of that name was created again since\)/,
    );
    expect(deleted.some((message) => message.includes(live))).toBe(false);
  });

  it('forget-stream: a name of several identifiers is refused; a stream that still exists needs --force', async () => {
    if (emulator === undefined) throw new Error('the emulator did not start');
    const client = localKinesisClient(emulator);
    await createStream(client, 'invoices', 1);
    const summary = await client.send(new DescribeStreamSummaryCommand({ StreamName: 'invoices' }));
    client.destroy();
    const epoch = Math.floor(
      (summary.StreamDescriptionSummary?.StreamCreationTimestamp?.getTime() ?? 0) / 1_000,
    );
    const live = `123456789012:invoices:${epoch}`;
    const older = `123456789012:invoices:${epoch - 3_600}`;
    const url = `sqlite:${join(directory, 'forget.db')}`;
    const store = await openLeaseStore(url, { applicationName: 'billing' });
    await store.admin.ensureSchema();
    for (const stream of [live, older]) {
      await store.leases.create({
        leaseKey: `${stream}:shardId-000000000000`,
        checkpoint: ExtendedSequenceNumber.TRIM_HORIZON,
        streamIdentifier: stream,
      });
    }
    const common = ['--app', 'billing', '--store', url, '--yes'];
    const kinesis = ['--kinesis-endpoint', emulator.endpoint];
    try {
      const ambiguous = await kcl(['forget-stream', ...common, '--stream', 'invoices']);
      expect(ambiguous.code).toBe(2);
      expect(ambiguous.stderr).toContain(`names 2 streams (${older}, ${live})`);
      const exists = await kcl(['forget-stream', ...common, ...kinesis, '--stream', live]);
      expect(exists.code).toBe(3);
      expect(exists.stderr).toMatch(/stream .*invoices.* still exists/);
      const recreated = await kcl(['forget-stream', ...common, ...kinesis, '--stream', older]);
      expect(recreated.code).toBe(0);
      expect((await store.leases.list()).map((lease) => lease.leaseKey)).toEqual([
        `${live}:shardId-000000000000`,
      ]);
      const forced = await kcl(['forget-stream', ...common, ...kinesis, '--stream', 'invoices', '--force']);
      expect(forced.code).toBe(0);
      expect(await store.leases.list()).toEqual([]);
    } finally {
      await store.close();
    }
  });
});
