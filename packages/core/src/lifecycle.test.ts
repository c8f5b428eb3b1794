import { describe, expect, it } from 'vitest';
import { KclError } from './errors.js';
import { Lifecycle } from './lifecycle.js';

interface Gate {
  readonly promise: Promise<void>;
  open(): void;
  fail(error: unknown): void;
}

function gate(): Gate {
  let open: () => void = () => {};
  let fail: (error: unknown) => void = () => {};
  const promise = new Promise<void>((resolve, reject) => {
    open = resolve;
    fail = reject;
  });
  return { promise, open, fail };
}

function lifecycle(steps: Partial<ConstructorParameters<typeof Lifecycle>[0]> = {}) {
  const calls: string[] = [];
  const subject = new Lifecycle({
    component: '@kcl/test',
    stoppedCode: 'TEST_STOPPED',
    start: async () => {
      calls.push('start');
    },
    stop: async (graceful) => {
      calls.push(`stop(${graceful})`);
    },
    interrupt: () => calls.push('interrupt'),
    escalate: () => calls.push('escalate'),
    ...steps,
  });
  return { subject, calls };
}

describe('Lifecycle', () => {
  it('starts once, stops once, and says where it is', async () => {
    const { subject, calls } = lifecycle();
    expect(subject.state).toBe('created');
    const first = subject.start();
    expect(subject.start()).toBe(first);
    expect(subject.state).toBe('starting');
    await first;
    expect(subject.state).toBe('running');
    const stopping = subject.stop();
    expect(subject.stop()).toBe(stopping);
    await stopping;
    await expect(subject.stopped()).resolves.toBeUndefined();
    expect(subject.state).toBe('stopped');
    expect(calls).toEqual(['start', 'interrupt', 'stop(true)']);
  });

  it('refuses a start after a stop with the configured code', async () => {
    const { subject } = lifecycle();
    await subject.stop();
    const refusal = await subject.start().catch((error: unknown) => error);
    expect(KclError.is(refusal) && refusal.code).toBe('TEST_STOPPED');
  });

  it('lets a stop during a start wait for the start, after interrupting it', async () => {
    const starting = gate();
    const { subject, calls } = lifecycle({
      start: async () => {
        calls.push('start');
        await starting.promise;
      },
    });
    const started = subject.start();
    const stopped = subject.stop();
    await Promise.resolve();
    expect(calls).toEqual(['start', 'interrupt']);
    starting.open();
    await started;
    await stopped;
    expect(calls).toEqual(['start', 'interrupt', 'stop(true)']);
    expect(subject.state).toBe('stopped');
  });

  it('takes the object down after a failed start and rejects stopped() with the failure', async () => {
    const failure = new Error('no stream');
    const { subject, calls } = lifecycle({
      start: async () => {
        throw failure;
      },
    });
    await expect(subject.start()).rejects.toBe(failure);
    await expect(subject.stopped()).rejects.toBe(failure);
    expect(subject.state).toBe('failed');
    expect(calls).toEqual(['stop(false)']);
    await expect(subject.stop()).resolves.toBeUndefined();
  });

  it('escalates a forced stop that arrives during a graceful one', async () => {
    const stopping = gate();
    const { subject, calls } = lifecycle({
      stop: async (graceful) => {
        calls.push(`stop(${graceful})`);
        await stopping.promise;
      },
    });
    await subject.start();
    const graceful = subject.stop(true);
    await Promise.resolve();
    await Promise.resolve();
    const forced = subject.stop(false);
    expect(calls).toEqual(['start', 'interrupt', 'stop(true)', 'escalate']);
    stopping.open();
    await Promise.all([graceful, forced]);
  });

  it('forces the stop when a forced stop is asked for while the stop waits for a start', async () => {
    const starting = gate();
    const { subject, calls } = lifecycle({
      start: async () => {
        calls.push('start');
        await starting.promise;
      },
    });
    const started = subject.start();
    const graceful = subject.stop(true);
    const forced = subject.stop(false);
    starting.open();
    await Promise.all([started, graceful, forced]);
    expect(calls).toEqual(['start', 'interrupt', 'stop(false)']);
  });

  it('fails with the first recorded failure, and with a stop step that throws', async () => {
    const first = new Error('first');
    const { subject } = lifecycle();
    await subject.start();
    subject.fail(first);
    subject.fail(new Error('second'));
    await subject.stop();
    await expect(subject.stopped()).rejects.toBe(first);

    const broken = new Error('close failed');
    const other = lifecycle({
      stop: async () => {
        throw broken;
      },
    }).subject;
    await other.start();
    await expect(other.stop()).resolves.toBeUndefined();
    await expect(other.stopped()).rejects.toBe(broken);
    expect(other.state).toBe('failed');
  });
});
