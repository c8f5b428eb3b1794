import { interceptLeaseStore, noopLogger } from '@kcl/core';
import { createMemoryLeaseStore, MemoryLeaseTable } from '@kcl/testkit';
import { describe, expect, it } from 'vitest';
import { ownSessionCheckEvery, SessionLiveness } from './session-liveness.js';

function setup() {
  const table = new MemoryLeaseTable();
  const store = (): ReturnType<typeof createMemoryLeaseStore> =>
    createMemoryLeaseStore({ applicationName: 'app', table, sessions: true });
  const found: string[][] = [];
  const mine = store();
  const liveness = new SessionLiveness({
    store: mine,
    workerId: 'me',
    checkIntervalMs: 1_000,
    logger: noopLogger,
    onDead: (workerIds) => found.push([...workerIds]),
  });
  return { table, store, mine, liveness, found };
}

describe('SessionLiveness', () => {
  it('judges a worker dead only after it was seen holding its session', async () => {
    const { store, liveness, found, mine } = setup();
    await liveness.attach();
    // "late" never attached: absent, but not dead (a worker of a release without sessions, say).
    await liveness.check(['late', 'other']);
    expect(liveness.dead()).toEqual(new Set());
    const other = await store().workers.attachSession?.('other');
    await liveness.check(['late', 'other']);
    expect(liveness.dead()).toEqual(new Set());
    mine.dropWorkerSession('other');
    await liveness.check(['late', 'other']);
    expect(liveness.dead()).toEqual(new Set(['other']));
    expect(found).toEqual([['other']]);
    // Reported once, not at every check.
    await liveness.check(['late', 'other']);
    expect(found).toEqual([['other']]);
    await other?.close();
    // Back with a new session: alive again.
    await store().workers.attachSession?.('other');
    await liveness.check(['other']);
    expect(liveness.dead()).toEqual(new Set());
  });

  it('judges nobody while its own session is gone, and starts over once attached again', async () => {
    const { store, liveness, found, mine } = setup();
    await liveness.attach();
    await store().workers.attachSession?.('other');
    await liveness.check(['other']);
    // A database restart: every session ends at once.
    mine.dropWorkerSession('me');
    mine.dropWorkerSession('other');
    await liveness.check(['other']);
    // Attached again at once (the database is back); "other" has not re-attached yet, and it was not
    // seen since: not judged.
    expect(liveness.attached).toBe(true);
    expect(liveness.dead()).toEqual(new Set());
    await liveness.check(['other']);
    await liveness.check(['other']);
    expect(liveness.dead()).toEqual(new Set());
    expect(found).toEqual([]);
  });

  it('keeps running without a session it cannot attach, and attaches at a later check', async () => {
    const { store, liveness } = setup();
    const earlier = await store().workers.attachSession?.('me');
    expect(await liveness.attach()).toBe(false);
    await liveness.check(['other']);
    expect(liveness.attached).toBe(false);
    await earlier?.close();
    await liveness.check(['other']);
    expect(liveness.attached).toBe(true);
  });

  it('forgets a dead judgement for a worker that writes after all', async () => {
    const { store, liveness, mine } = setup();
    await liveness.attach();
    await store().workers.attachSession?.('other');
    await liveness.check(['other']);
    mine.dropWorkerSession('other');
    await liveness.check(['other']);
    expect(liveness.dead()).toEqual(new Set(['other']));
    liveness.revive('other');
    expect(liveness.dead()).toEqual(new Set());
    // Not judged again while it has no session: it was not seen holding one since.
    await liveness.check(['other']);
    expect(liveness.dead()).toEqual(new Set());
  });

  it('runs a statement on its own session at every tenth check, and notices a lost lock in between from the listing', async () => {
    const { store, mine } = setup();
    const calls: string[] = [];
    const counted = interceptLeaseStore(mine, (operation, options, call) => {
      calls.push(operation);
      return call(options);
    });
    const liveness = new SessionLiveness({
      store: counted,
      workerId: 'me',
      checkIntervalMs: 1_000,
      logger: noopLogger,
      onDead: () => undefined,
    });
    const every = ownSessionCheckEvery(1_000);
    expect(every).toBe(10);
    await liveness.attach();
    await store().workers.attachSession?.('other');
    for (let check = 0; check < 2 * every; check++) await liveness.check(['other']);
    expect(calls.filter((operation) => operation === 'session.check')).toHaveLength(2);
    expect(calls.filter((operation) => operation === 'workers.liveSessions')).toHaveLength(2 * every);
    // Lost between two statements on the session: the next listing shows it, and it attaches again.
    await liveness.check(['other']);
    calls.length = 0;
    mine.dropWorkerSession('me');
    await liveness.check(['other']);
    expect(calls).toEqual(['workers.liveSessions', 'session.close', 'workers.attachSession']);
    expect(liveness.attached).toBe(true);
  });

  it('runs the statement on its own session at least every 10 s, whatever the interval', () => {
    expect(ownSessionCheckEvery(100)).toBe(100);
    expect(ownSessionCheckEvery(5_000)).toBe(2);
    expect(ownSessionCheckEvery(30_000)).toBe(1);
  });

  it('judges nobody when its lock is held by another process under its worker id', async () => {
    const { store, liveness, found, mine } = setup();
    await liveness.attach();
    await store().workers.attachSession?.('other');
    await liveness.check(['other']);
    await liveness.check(['other']);
    // A database restart ends both sessions; another process running as "me" attaches first.
    mine.dropWorkerSession('me');
    mine.dropWorkerSession('other');
    const impostor = await store().workers.attachSession?.('me');
    expect(impostor).toBeDefined();
    // The listing shows "me" live (the impostor's lock) and "other" gone: the check on its own
    // session finds its lock lost, and nobody is judged.
    await liveness.check(['other']);
    expect(found).toEqual([]);
    expect(liveness.dead()).toEqual(new Set());
    expect(liveness.attached).toBe(false);
  });

  it('closes its session: the others no longer see it', async () => {
    const { store, liveness } = setup();
    await liveness.attach();
    const observer = store();
    expect(await observer.workers.liveSessions?.(['me'])).toEqual(new Set(['me']));
    await liveness.close();
    await liveness.close();
    expect(await observer.workers.liveSessions?.(['me'])).toEqual(new Set());
  });
});
