import { describe, expect, it } from 'vitest';
import { untilAborted } from './until-aborted.js';

const stopped = (): Error => new Error('stopped');

describe('untilAborted', () => {
  it('settles as the work does while the signal stays quiet', async () => {
    const controller = new AbortController();
    await expect(untilAborted(Promise.resolve(7), controller.signal, stopped)).resolves.toBe(7);
    await expect(
      untilAborted(Promise.reject(new Error('failed')), controller.signal, stopped),
    ).rejects.toThrow('failed');
  });

  it('rejects with the stop error as soon as the signal aborts, leaving the work to go on', async () => {
    const controller = new AbortController();
    let finish: (value: number) => void = () => {};
    const work = new Promise<number>((resolve) => {
      finish = resolve;
    });
    const waiting = untilAborted(work, controller.signal, stopped);
    controller.abort();
    await expect(waiting).rejects.toThrow('stopped');
    finish(3);
    await expect(work).resolves.toBe(3);
  });

  it('rejects at once on a signal that has already aborted, without an unhandled rejection from the work', async () => {
    const controller = new AbortController();
    controller.abort();
    const work = Promise.reject(new Error('ignored'));
    await expect(untilAborted(work, controller.signal, stopped)).rejects.toThrow('stopped');
  });
});
