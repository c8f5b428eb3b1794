import { execFileSync } from 'node:child_process';
import type { Checkpointer } from '@kcl/consumer';
import { createLineLogger, ExtendedSequenceNumber, LeaseLostError, systemClock } from '@kcl/core';
import { ManualClock } from '@kcl/testkit';
import { describe, expect, it } from 'vitest';
import { nodeChild } from '../test/support/inline-child.js';
import { ChildSession, type ChildSessionOptions } from './child-session.js';
import type { ExecutableCommand } from './executable-command.js';
import { MultiLangChildError } from './multilang-errors.js';

function sessionOptions(command: ExecutableCommand, overrides: Partial<ChildSessionOptions> = {}) {
  const logs: string[] = [];
  const logger = createLineLogger({ level: 'debug', write: (line) => logs.push(line) });
  const options: ChildSessionOptions = {
    shardId: 'shardId-000000000007',
    command,
    workingDirectory: process.cwd(),
    environment: process.env,
    logger: {
      debug: (message, fields) => logger.debug(message, { shardId: 'shardId-000000000007', ...fields }),
      info: (message, fields) => logger.info(message, { shardId: 'shardId-000000000007', ...fields }),
      warn: (message, fields) => logger.warn(message, { shardId: 'shardId-000000000007', ...fields }),
      error: (message, fields) => logger.error(message, { shardId: 'shardId-000000000007', ...fields }),
    },
    clock: systemClock,
    messageTimeoutMs: null,
    exitTimeoutMs: 5_000,
    killTimeoutMs: 5_000,
    ...overrides,
  };
  return { options, logs };
}

/** A checkpointer that records calls; a checkpoint at "lost" fails as after a lost lease. */
function recordingCheckpointer() {
  const calls: unknown[][] = [];
  const checkpointer: Checkpointer = {
    async checkpoint(sequenceNumber?: string, subSequenceNumber?: number) {
      calls.push([sequenceNumber, subSequenceNumber]);
      if (sequenceNumber === 'lost') throw new LeaseLostError('shardId-000000000007', 'taken');
    },
    async checkpointRecord() {},
    async prepareCheckpoint() {
      throw new Error('not used');
    },
    async transaction(): Promise<never> {
      throw new Error('not used');
    },
    lastCheckpoint: ExtendedSequenceNumber.TRIM_HORIZON,
  };
  return { checkpointer, calls };
}

async function until(condition: () => boolean, what: string): Promise<void> {
  for (let waited = 0; !condition(); waited += 10) {
    if (waited > 20_000) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

describe('ChildSession', () => {
  it('answers checkpoint requests inside the exchange and echoes them, with Java exception names', async () => {
    const child = nodeChild(`
      const action = JSON.parse(await next());
      send({ action: 'checkpoint', sequenceNumber: '5' });
      console.error('reply ' + await next());
      send({ action: 'checkpoint', sequenceNumber: '6', subSequenceNumber: 2 });
      console.error('reply ' + await next());
      send({ action: 'checkpoint', sequenceNumber: null, subSequenceNumber: null });
      console.error('reply ' + await next());
      send({ action: 'checkpoint', sequenceNumber: 'lost' });
      console.error('reply ' + await next());
      send({ action: 'checkpoint', sequenceNumber: 7 });
      console.error('reply ' + await next());
      send({ action: 'status', responseFor: action.action });
      await next();
    `);
    const { options, logs } = sessionOptions(child);
    const session = await ChildSession.start(options);
    const { checkpointer, calls } = recordingCheckpointer();
    await session.exchange({ action: 'processRecords', records: [], millisBehindLatest: 0 }, checkpointer);
    expect(calls).toEqual([
      ['5', undefined],
      ['6', 2],
      [undefined, undefined],
      ['lost', undefined],
    ]);
    await session.close();
    const replies = logs
      .filter((line) => line.includes('child: reply'))
      .map((line) => JSON.parse(line.split('child: reply ')[1]?.split(' {"shardId"')[0] ?? ''));
    expect(replies).toEqual([
      { action: 'checkpoint', sequenceNumber: '5', subSequenceNumber: null, error: null },
      { action: 'checkpoint', sequenceNumber: '6', subSequenceNumber: 2, error: null },
      { action: 'checkpoint', sequenceNumber: null, subSequenceNumber: null, error: null },
      { action: 'checkpoint', sequenceNumber: 'lost', subSequenceNumber: null, error: 'ShutdownException' },
      { action: 'checkpoint', sequenceNumber: 7, subSequenceNumber: null, error: 'IllegalArgumentException' },
    ]);
    // The child's stderr is logged line by line with the shard id.
    expect(
      logs.some((line) => line.includes('child: reply') && line.includes('"shardId":"shardId-000000000007"')),
    ).toBe(true);
  });

  it('answers InvalidStateException when the action has no checkpointer', async () => {
    const child = nodeChild(`
      await next();
      send({ action: 'checkpoint', sequenceNumber: null });
      console.error('reply ' + await next());
      send({ action: 'status', responseFor: 'initialize' });
      await next();
    `);
    const { options, logs } = sessionOptions(child);
    const session = await ChildSession.start(options);
    await session.exchange(
      { action: 'initialize', shardId: 's', sequenceNumber: 'LATEST', subSequenceNumber: 0 },
      null,
    );
    await session.close();
    expect(logs.find((line) => line.includes('child: reply'))).toContain('"error":"InvalidStateException"');
    expect(
      logs.some((line) => line.includes('no checkpointer was provided for shard shardId-000000000007')),
    ).toBe(true);
  });

  it('skips stray lines, and handles a checkpoint sent between actions in the next exchange', async () => {
    const child = nodeChild(`
      await next();
      console.log('hello from console.log');
      console.log('{"not":"a message"}');
      send({ action: 'status', responseFor: 'initialize' });
      send({ action: 'checkpoint', sequenceNumber: '9' });
      await next();
      console.error('reply ' + await next());
      send({ action: 'status', responseFor: 'processRecords' });
      await next();
    `);
    const { options, logs } = sessionOptions(child);
    const session = await ChildSession.start(options);
    const { checkpointer, calls } = recordingCheckpointer();
    await session.exchange(
      { action: 'initialize', shardId: 's', sequenceNumber: 'LATEST', subSequenceNumber: 0 },
      checkpointer,
    );
    expect(calls).toEqual([]);
    await session.exchange({ action: 'processRecords', records: [], millisBehindLatest: 0 }, checkpointer);
    expect(calls).toEqual([['9', undefined]]);
    await session.close();
    expect(logs.filter((line) => line.includes('skipping unexpected line on the child stdout'))).toHaveLength(
      2,
    );
  });

  it('fails the exchange when the child answers another action’s status', async () => {
    const child = nodeChild(`
      await next();
      send({ action: 'status', responseFor: 'initialize' });
      await next();
    `);
    const { options } = sessionOptions(child);
    const session = await ChildSession.start(options);
    const failure = session.exchange({ action: 'leaseLost' }, null);
    await expect(failure).rejects.toThrow(MultiLangChildError);
    await expect(failure).rejects.toMatchObject({ reason: 'wrong-status', shardId: 'shardId-000000000007' });
    await session.terminate();
  });

  it('fails the exchange when the child exits instead of answering', async () => {
    const child = nodeChild(`
      await next();
      process.exit(4);
    `);
    const { options } = sessionOptions(child);
    const session = await ChildSession.start(options);
    await expect(session.exchange({ action: 'shardEnded' }, null)).rejects.toMatchObject({
      reason: 'exited',
    });
    expect(await session.exited()).toEqual({ code: 4, signal: null });
    expect(session.alive).toBe(false);
    // Writing to a dead child fails at once.
    await expect(session.exchange({ action: 'leaseLost' }, null)).rejects.toMatchObject({
      reason: 'write-failed',
    });
  });

  it('times out a silent child after timeoutInSeconds (on the injected clock)', async () => {
    const clock = new ManualClock();
    // The interval keeps the child alive whatever happens to its stdin: only a signal ends it.
    const child = nodeChild('await next(); setInterval(() => {}, 60_000); await new Promise(() => {});');
    const { options } = sessionOptions(child, { clock, messageTimeoutMs: 3_000, killTimeoutMs: 1_000 });
    const session = await ChildSession.start(options);
    const exchange = session.exchange({ action: 'shutdownRequested' }, null);
    exchange.catch(() => undefined);
    await until(() => clock.pendingSleeps === 1, 'the wait to start');
    await clock.advance(2_999);
    expect(session.busy).toBe(true);
    await clock.advance(1);
    await expect(exchange).rejects.toMatchObject({ reason: 'timeout' });
    const ended = session.terminate();
    expect(await ended).toEqual({ code: null, signal: 'SIGTERM' });
  });

  it('closes stdin and waits for the exit; escalates to SIGTERM and SIGKILL for a child that will not go', async () => {
    const polite = await ChildSession.start(
      sessionOptions(nodeChild('while ((await next()) !== null) {} process.exit(0);')).options,
    );
    expect(await polite.close()).toEqual({ code: 0, signal: null });

    const clock = new ManualClock();
    const stubborn = nodeChild(`
      process.on('SIGTERM', () => console.error('ignoring SIGTERM'));
      send({ action: 'ready' });
      setInterval(() => {}, 1000);
    `);
    const { options, logs } = sessionOptions(stubborn, { clock, exitTimeoutMs: 5_000, killTimeoutMs: 2_000 });
    const session = await ChildSession.start(options);
    await until(
      () => logs.some((line) => line.includes('unexpected action \\"ready\\"')),
      'the child to be ready',
    );
    const closing = session.close();
    await until(() => clock.pendingSleeps === 1, 'the exit wait');
    await clock.advance(5_000);
    await until(() => logs.some((line) => line.includes('ignoring SIGTERM')), 'SIGTERM to arrive');
    await until(() => clock.pendingSleeps === 1, 'the kill wait');
    await clock.advance(2_000);
    expect(await closing).toEqual({ code: null, signal: 'SIGKILL' });
    expect(logs.some((line) => line.includes('child did not exit after its stdin was closed'))).toBe(true);
    expect(logs.some((line) => line.includes('child ignored SIGTERM; killing it'))).toBe(true);
  });

  it('starts the child in its own process group, without a shell', async () => {
    const session = await ChildSession.start(sessionOptions(nodeChild('await next();')).options);
    const pgid = Number(
      execFileSync('ps', ['-o', 'pgid=', '-p', String(session.pid)], { encoding: 'utf8' }).trim(),
    );
    expect(pgid).toBe(session.pid);
    expect(pgid).not.toBe(
      Number(execFileSync('ps', ['-o', 'pgid=', '-p', String(process.pid)], { encoding: 'utf8' }).trim()),
    );
    await session.close();
  });

  it('reports an executable that cannot be started', async () => {
    const start = ChildSession.start(
      sessionOptions({ executable: '/nonexistent/child', args: [], text: '/nonexistent/child' }).options,
    );
    await expect(start).rejects.toMatchObject({ reason: 'start-failed' });
    await expect(start).rejects.toThrow(
      'could not be started ("/nonexistent/child"): spawn /nonexistent/child ENOENT',
    );
  });
});
