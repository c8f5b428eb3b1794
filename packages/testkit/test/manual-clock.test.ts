import { describe, expect, it } from 'vitest';
import { ManualClock } from '../src/index.js';

describe('ManualClock', () => {
  it('wakes sleepers in time order, only when time reaches them', async () => {
    const clock = new ManualClock({ monotonic: 0 });
    const woken: string[] = [];
    void clock.sleep(300).then(() => woken.push('300'));
    void clock.sleep(100).then(() => woken.push('100'));
    void clock.sleep(100).then(() => woken.push('100b'));
    await clock.advance(99);
    expect(woken).toEqual([]);
    await clock.advance(1);
    expect(woken).toEqual(['100', '100b']);
    await clock.advance(1_000);
    expect(woken).toEqual(['100', '100b', '300']);
    expect(clock.monotonicNow()).toBe(1_100);
  });

  it('runs a work-then-sleep loop exactly as often as the time allows', async () => {
    const clock = new ManualClock();
    const controller = new AbortController();
    let runs = 0;
    const loop = (async () => {
      while (!controller.signal.aborted) {
        runs += 1;
        await clock.sleep(1_000, controller.signal);
      }
    })();
    await clock.waitForSleepers(1);
    await clock.advance(10_500);
    expect(runs).toBe(11);
    controller.abort();
    await loop;
    expect(clock.pendingSleeps).toBe(0);
  });

  it('moves the wall clock with the monotonic one, and alone when set', async () => {
    const clock = new ManualClock({ now: 1_000, monotonic: 0 });
    await clock.advance(500);
    expect(clock.now()).toBe(1_500);
    clock.setWallClock(0);
    expect(clock.now()).toBe(0);
    expect(clock.monotonicNow()).toBe(500);
  });

  it('reports the next wake time', async () => {
    const clock = new ManualClock({ monotonic: 10 });
    expect(clock.nextWakeAt).toBeNull();
    void clock.sleep(5);
    expect(clock.nextWakeAt).toBe(15);
  });
});
