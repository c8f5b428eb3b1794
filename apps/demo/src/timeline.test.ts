import { describe, expect, it } from 'vitest';
import { END_RESERVE_MS, MIN_SCRIPT_MS, planTimeline, scriptLength } from './timeline.js';

describe('planTimeline', () => {
  it('spreads the steps over the script, and stops the producer just before its end for the drain', () => {
    expect(planTimeline(60_000).map((step) => [step.action, step.atMs])).toEqual([
      ['kill', 12_000],
      ['join', 18_000],
      ['split', 27_000],
      ['merge', 36_000],
      ['stop', 45_000],
      ['stop-producing', 60_000 - END_RESERVE_MS],
    ]);
  });

  it('scales with the script and keeps the order', () => {
    const short = planTimeline(20_000);
    expect(short.map((step) => step.atMs)).toEqual([4_000, 6_000, 9_000, 12_000, 15_000, 19_000]);
    expect(short.every((step) => step.label.length > 0)).toBe(true);
    // An hour: the producer runs until a second before the end, not 9 minutes less.
    expect(planTimeline(3_600_000).at(-1)).toMatchObject({ action: 'stop-producing', atMs: 3_599_000 });
  });
});

describe('scriptLength', () => {
  it('gives the script what the startup left of --duration, so the whole run lasts --duration', () => {
    expect(scriptLength(60_000, 4_700)).toBe(55_300);
    expect(scriptLength(20_000, 4_700)).toBe(15_300);
    // startup + script (whose last step leaves END_RESERVE_MS for the drain) = --duration
    const startupMs = 6_250;
    const scriptMs = scriptLength(25_000, startupMs);
    expect(startupMs + scriptMs).toBe(25_000);
    expect(startupMs + (planTimeline(scriptMs).at(-1)?.atMs ?? 0)).toBe(25_000 - END_RESERVE_MS);
  });

  it('keeps a script long enough to show a takeover after a slow startup', () => {
    expect(scriptLength(20_000, 15_000)).toBe(MIN_SCRIPT_MS);
  });
});
