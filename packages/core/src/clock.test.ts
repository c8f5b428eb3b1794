import { describe, expect, it } from 'vitest';
import { jitter, systemClock } from './clock.js';

describe('systemClock', () => {
  it('resolves sleep early, without rejecting, when the signal aborts', async () => {
    const controller = new AbortController();
    const started = performance.now();
    const sleeping = systemClock.sleep(60_000, controller.signal);
    controller.abort();
    await expect(sleeping).resolves.toBeUndefined();
    expect(performance.now() - started).toBeLessThan(1_000);
  });

  it('resolves at once for an already aborted signal', async () => {
    await expect(systemClock.sleep(60_000, AbortSignal.abort())).resolves.toBeUndefined();
  });

  it('has a monotonic clock that never goes back', () => {
    const a = systemClock.monotonicNow();
    const b = systemClock.monotonicNow();
    expect(b).toBeGreaterThanOrEqual(a);
  });
});

describe('jitter', () => {
  it('spans base ± fraction', () => {
    expect(jitter(1000, 0.25, () => 0)).toBe(750);
    expect(jitter(1000, 0.25, () => 0.5)).toBe(1000);
    expect(jitter(1000, 0.25, () => 0.999999)).toBeCloseTo(1250, 2);
  });
});
