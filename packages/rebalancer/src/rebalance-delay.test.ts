import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { nextRebalanceDelay } from './rebalance-delay.js';

describe('nextRebalanceDelay', () => {
  it.each([
    [0, 4_500],
    [0.5, 6_000],
    [0.999_999, 7_499.997],
  ])('with random() = %d waits %d ms of a 6 s base', (value, delay) => {
    expect(nextRebalanceDelay(6_000, () => value)).toBeCloseTo(delay, 6);
  });

  it('stays within ±25% of the base', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 600_000 }),
        fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }),
        (base, value) => {
          const delay = nextRebalanceDelay(base, () => value);
          expect(delay).toBeGreaterThanOrEqual(base * 0.75);
          expect(delay).toBeLessThanOrEqual(base * 1.25);
        },
      ),
    );
  });
});
