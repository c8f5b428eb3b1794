import { describe, expect, it } from 'vitest';
import { planTimeline } from './timeline.js';

describe('planTimeline', () => {
  it('spreads the steps over the run: kill, join, split, merge, graceful stop, then the producer stops', () => {
    expect(planTimeline(60_000).map((step) => [step.action, step.atMs])).toEqual([
      ['kill', 12_000],
      ['join', 18_000],
      ['split', 27_000],
      ['merge', 36_000],
      ['stop', 45_000],
      ['stop-producing', 51_000],
    ]);
  });

  it('scales with the duration and keeps the order', () => {
    const short = planTimeline(20_000);
    expect(short.map((step) => step.atMs)).toEqual([4_000, 6_000, 9_000, 12_000, 15_000, 17_000]);
    expect(short.every((step) => step.label.length > 0)).toBe(true);
  });
});
