import { expect } from 'vitest';
import { runFleetSimulation } from '../src/fleet-simulation.js';
import type { ProcessorKind } from '../src/simulated-processors.js';

/** The seeds CI runs (`KCL_SIM_SEEDS=from-to` overrides the range of every part). */
export const CI_SEEDS = { from: 1, to: 500 } as const;
/**
 * The seeds CI runs with the exactly-once processor (`KCL_SIM_EXACTLY_ONCE_SEEDS=from-to` overrides
 * them): no seed draws it, so its runs are their own.
 */
export const CI_EXACTLY_ONCE_SEEDS = { from: 1, to: 40 } as const;
/** The seeds of a three-stream application CI runs (`KCL_SIM_MULTI_STREAM_SEEDS=from-to` overrides them). */
export const CI_MULTI_STREAM_SEEDS = { from: 1, to: 40, streams: 3 } as const;

/**
 * Runs the seeds of part `part` of `parts` and fails with the story of each failing seed; with
 * `streams`, of an application reading that many streams.
 */
export async function runSeedRange(
  part: number,
  parts: number,
  streams = 1,
  processor?: ProcessorKind,
): Promise<void> {
  const range =
    processor === 'exactly-once' || processor === 'exactly-once-pipeline'
      ? (process.env.KCL_SIM_EXACTLY_ONCE_SEEDS ??
        `${CI_EXACTLY_ONCE_SEEDS.from}-${CI_EXACTLY_ONCE_SEEDS.to}`)
      : streams === 1
        ? (process.env.KCL_SIM_SEEDS ?? `${CI_SEEDS.from}-${CI_SEEDS.to}`)
        : (process.env.KCL_SIM_MULTI_STREAM_SEEDS ??
          `${CI_MULTI_STREAM_SEEDS.from}-${CI_MULTI_STREAM_SEEDS.to}`);
  const [from, to] = range.split('-').map(Number) as [number, number];
  const size = Math.ceil((to - from + 1) / parts);
  const first = from + part * size;
  const last = Math.min(to, first + size - 1);
  const failures: string[] = [];
  for (let seed = first; seed <= last; seed++) {
    const result = await runFleetSimulation({
      seed,
      ...(streams === 1 ? {} : { streams }),
      ...(processor === undefined ? {} : { processor }),
    });
    if (result.violations.length === 0) continue;
    failures.push(
      [
        `seed ${seed} (${result.processor}) — re-run alone: npx pnpm@10.34.9 --filter @kcl/simulation sim --seed ${seed}${streams === 1 ? '' : ` --streams ${streams}`}${processor === undefined ? '' : ` --processor ${processor}`}`,
        ...result.story,
        ...result.violations.map(
          (violation) => `  ✗ ${violation.invariant} at ${violation.at} ms: ${violation.message}`,
        ),
      ].join('\n'),
    );
  }
  expect(failures, failures.join('\n\n')).toEqual([]);
}
