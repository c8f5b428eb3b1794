import { describe, expect, it } from 'vitest';
import { Backoff } from './backoff.js';

describe('Backoff', () => {
  it('doubles its ceiling up to the maximum, with delays between half and all of it', () => {
    const low = new Backoff({ initialMs: 100, maxMs: 1_000, random: () => 0 });
    expect([low.next(), low.next(), low.next(), low.next(), low.next()]).toEqual([50, 100, 200, 400, 500]);
    const high = new Backoff({ initialMs: 100, maxMs: 1_000, random: () => 1 });
    expect([high.next(), high.next(), high.next(), high.next(), high.next()]).toEqual([
      100, 200, 400, 800, 1_000,
    ]);
  });

  it('starts over after a reset', () => {
    const backoff = new Backoff({ initialMs: 100, maxMs: 1_000, random: () => 1 });
    backoff.next();
    backoff.next();
    expect(backoff.attempts).toBe(2);
    backoff.reset();
    expect(backoff.next()).toBe(100);
  });
});
