import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import type { WorkerSession } from '@kcl/core';
import { isKclError, LeaseStoreError } from '@kcl/core';
import type {
  ConformanceContext,
  ConformanceHolderCommand,
  ConformanceSessionHarness,
} from '../conformance-case.js';
import { caseGroup } from '../conformance-case.js';

/** How long the database may take to see a session end, on one machine: well under a second. */
const DETECTION_LIMIT_MS = 1_000;
/** How often the cases look whether a session ended, while they measure how soon. */
const POLL_MS = 5;
/** How long a holder process may take to start and attach (loading the driver, connecting). */
const HOLDER_START_MS = 30_000;

/** The session calls of the case's store; skips the case when the store has none. */
interface Sessions {
  attach(workerId: string): Promise<WorkerSession>;
  live(workerIds: readonly string[]): Promise<ReadonlySet<string>>;
}

/**
 * Runs `body` with the store's session calls, closing every session it attached afterwards (a session
 * holds a database connection: one left open by a failed case would starve the next ones).
 */
async function withSessions(
  context: ConformanceContext,
  body: (sessions: Sessions) => Promise<void>,
): Promise<void> {
  const { store, skip } = context;
  if (store.capabilities.sessionLiveness !== true) {
    skip('the store has no session liveness (capabilities.sessionLiveness is false)');
  }
  const { attachSession, liveSessions } = store.workers;
  if (attachSession === undefined || liveSessions === undefined) {
    throw new Error(`${store.description} declares sessionLiveness without attachSession and liveSessions`);
  }
  const opened: WorkerSession[] = [];
  try {
    await body({
      attach: async (workerId) => {
        const session = await attachSession.call(store.workers, workerId);
        opened.push(session);
        return session;
      },
      live: (workerIds) => liveSessions.call(store.workers, workerIds),
    });
  } finally {
    await Promise.allSettled(opened.map((session) => session.close()));
  }
}

function harnessSessions(context: ConformanceContext): ConformanceSessionHarness {
  const sessions = context.harness.sessions;
  if (sessions === undefined) context.skip('the harness cannot end sessions from outside the store');
  return sessions;
}

/** Polls `live` until `workerId` is no longer listed: the milliseconds it took. */
async function untilGone(
  sessions: Sessions,
  workerId: string,
  startedAt: number,
  limitMs: number,
): Promise<number> {
  for (;;) {
    const live = await sessions.live([workerId]);
    const elapsed = performance.now() - startedAt;
    if (!live.has(workerId)) return elapsed;
    if (elapsed > limitMs) {
      throw new Error(
        `liveSessions still listed ${workerId} ${Math.round(elapsed)} ms after its session ended`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
  }
}

/** Starts a holder process and resolves once it has attached; rejects with its output if it exits first. */
async function startHolder(command: ConformanceHolderCommand): Promise<ReturnType<typeof spawn>> {
  const child = spawn(command.command, [...command.args], {
    ...(command.cwd === undefined ? {} : { cwd: command.cwd }),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let errorOutput = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    errorOutput += chunk.toString();
  });
  const lines = createInterface({ input: child.stdout as NodeJS.ReadableStream });
  try {
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        reject(new Error(`the session holder did not attach within ${HOLDER_START_MS} ms: ${errorOutput}`));
      }, HOLDER_START_MS);
      lines.on('line', (line) => {
        if (line.trim() === 'attached') {
          clearTimeout(timer);
          resolve();
        }
      });
      child.once('exit', (code, signal) => {
        clearTimeout(timer);
        reject(new Error(`the session holder exited (${code ?? signal}) before it attached: ${errorOutput}`));
      });
    });
  } catch (error) {
    child.kill('SIGKILL');
    throw error;
  } finally {
    lines.close();
  }
  return child;
}

/**
 * Session liveness (`capabilities.sessionLiveness`): skipped, visibly, for stores without it. The
 * cases that end a session from outside need the harness's `sessions`; they report how soon the store
 * saw the session end.
 */
export const sessionCases = caseGroup('session liveness', {
  'an attached session is live until it is closed, and the worker can attach again': async (context) => {
    const { assert } = context;
    await withSessions(context, async (sessions) => {
      assert.equal([...(await sessions.live(['worker-a', 'worker-b']))], [], 'nobody attached yet');
      const session = await sessions.attach('worker-a');
      assert.equal(session.workerId, 'worker-a');
      assert.equal(await session.check(), true, 'check() of a held session');
      assert.equal([...(await sessions.live(['worker-a', 'worker-b']))], ['worker-a']);
      await session.close();
      await session.close();
      assert.equal([...(await sessions.live(['worker-a', 'worker-b']))], [], 'closed: not live');
      assert.equal(await session.check(), false, 'check() of a closed session');
      const again = await sessions.attach('worker-a');
      assert.equal(await again.check(), true, 'attached again after closing');
      assert.equal([...(await sessions.live(['worker-a']))], ['worker-a']);
    });
  },

  'a second session of the same worker id is refused, retryably, while the first holds it': async (
    context,
  ) => {
    const { assert, harness, applicationName } = context;
    await withSessions(context, async (sessions) => {
      const first = await sessions.attach('worker-a');
      const refused = await sessions.attach('worker-a').then(
        () => 'attached twice',
        (error: unknown) => error,
      );
      assert.ok(LeaseStoreError.is(refused), `a LeaseStoreError, got ${String(refused)}`);
      assert.equal(
        [isKclError(refused, 'WORKER_SESSION_HELD'), (refused as LeaseStoreError).retryable],
        [true, true],
        'code WORKER_SESSION_HELD, retryable',
      );
      // Another store object of the same application (another process, say) is refused the same way.
      const twin = await harness.createStore(applicationName);
      try {
        const fromTwin = await twin.workers.attachSession?.('worker-a').then(
          async (session) => {
            await session.close();
            return 'attached twice';
          },
          (error: unknown) => error,
        );
        assert.ok(isKclError(fromTwin, 'WORKER_SESSION_HELD'), 'refused through another store object');
      } finally {
        await twin.close();
      }
      assert.equal(await first.check(), true, 'the first session is unharmed');
      const other = await sessions.attach('worker-b');
      assert.equal(await other.check(), true, 'another worker attaches meanwhile');
      assert.equal([...(await sessions.live(['worker-a', 'worker-b', 'worker-c']))].sort(), [
        'worker-a',
        'worker-b',
      ]);
    });
  },

  'sessions belong to their application': async (context) => {
    const { assert } = context;
    await withSessions(context, async (sessions) => {
      await sessions.attach('worker-a');
      const other = await context.otherStore();
      try {
        assert.equal([...((await other.workers.liveSessions?.(['worker-a'])) ?? [])], []);
        const theirs = await other.workers.attachSession?.('worker-a');
        assert.equal(await theirs?.check(), true, 'the same worker id attaches in another application');
        await theirs?.close();
      } finally {
        await other.close();
      }
      assert.equal([...(await sessions.live(['worker-a']))], ['worker-a']);
    });
  },

  'liveSessions answers for many workers at once, and for none': async (context) => {
    const { assert } = context;
    await withSessions(context, async (sessions) => {
      const workerIds = Array.from({ length: 40 }, (_, index) => `worker-${String(index).padStart(2, '0')}`);
      const attached = workerIds.filter((_, index) => index % 7 === 3);
      for (const workerId of attached) await sessions.attach(workerId);
      assert.equal([...(await sessions.live(workerIds))].sort(), attached);
      assert.equal([...(await sessions.live([]))], []);
      assert.equal([...(await sessions.live([attached[0] ?? '', attached[0] ?? '']))], [attached[0]]);
    });
  },

  'closing the store closes the sessions it attached': async (context) => {
    const { assert, harness, applicationName } = context;
    await withSessions(context, async (sessions) => {
      const second = await harness.createStore(applicationName);
      const session = await second.workers.attachSession?.('worker-a');
      assert.equal([...(await sessions.live(['worker-a']))], ['worker-a']);
      await second.close();
      assert.equal([...(await sessions.live(['worker-a']))], [], 'gone with the store');
      assert.equal(await session?.check(), false, 'check() after the store closed');
      await session?.close();
    });
  },

  'a session ended from outside is seen gone at once, and the worker attaches again': async (context) => {
    const { assert, applicationName, note } = context;
    const outside = harnessSessions(context);
    await withSessions(context, async (sessions) => {
      const session = await sessions.attach('worker-a');
      const bystander = await sessions.attach('worker-b');
      const startedAt = performance.now();
      await outside.killSession(applicationName, 'worker-a');
      const gone = await untilGone(sessions, 'worker-a', startedAt, DETECTION_LIMIT_MS);
      const checked = await session.check();
      const checkedAfter = performance.now() - startedAt;
      assert.equal(checked, false, 'check() of a session ended from outside');
      assert.equal(await session.check(), false, 'and it stays false');
      note(
        `session ended from outside: liveSessions dropped it after ${gone.toFixed(1)} ms, check() was false after ${checkedAfter.toFixed(1)} ms`,
      );
      assert.ok(gone < DETECTION_LIMIT_MS, `seen gone within ${DETECTION_LIMIT_MS} ms`);
      assert.equal(await bystander.check(), true, "another worker's session is unharmed");
      await session.close();
      const again = await sessions.attach('worker-a');
      assert.equal(await again.check(), true, 'attached again');
      assert.equal([...(await sessions.live(['worker-a', 'worker-b']))].sort(), ['worker-a', 'worker-b']);
    });
  },

  'the session of a process killed with SIGKILL ends within a second': async (context) => {
    const { assert, applicationName, note } = context;
    const outside = harnessSessions(context);
    if (outside.holderProcess === undefined) {
      return context.skip('sessions of this store live in the test process');
    }
    const holderCommand = outside.holderProcess(applicationName, 'worker-a');
    await withSessions(context, async (sessions) => {
      const holder = await startHolder(holderCommand);
      try {
        assert.equal([...(await sessions.live(['worker-a']))], ['worker-a'], "the holder's session is live");
        const refused = await sessions.attach('worker-a').then(
          () => null,
          (error: unknown) => error,
        );
        assert.ok(isKclError(refused, 'WORKER_SESSION_HELD'), 'held by the other process');
        const exited = new Promise((resolve) => holder.once('exit', resolve));
        const startedAt = performance.now();
        holder.kill('SIGKILL');
        const gone = await untilGone(sessions, 'worker-a', startedAt, DETECTION_LIMIT_MS);
        await exited;
        note(`SIGKILL to the holder process: liveSessions dropped its session after ${gone.toFixed(1)} ms`);
        assert.ok(gone < DETECTION_LIMIT_MS, `seen gone within ${DETECTION_LIMIT_MS} ms`);
        const mine = await sessions.attach('worker-a');
        assert.equal(await mine.check(), true, 'attached here once the holder died');
      } finally {
        if (holder.exitCode === null && holder.signalCode === null) holder.kill('SIGKILL');
      }
    });
  },
});
