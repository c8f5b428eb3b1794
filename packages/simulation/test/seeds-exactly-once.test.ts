import { it } from 'vitest';
import { CI_EXACTLY_ONCE_SEEDS, runSeedRange } from './seeds.js';

it(`fleet simulation with the exactly-once processor, seeds ${CI_EXACTLY_ONCE_SEEDS.from}..${CI_EXACTLY_ONCE_SEEDS.to}: no record committed twice, every invariant holds`, async () => {
  await runSeedRange(0, 1, 1, 'exactly-once');
});

it(`fleet simulation with the exactly-once pipeline, seeds ${CI_EXACTLY_ONCE_SEEDS.from}..${CI_EXACTLY_ONCE_SEEDS.to}: no record committed twice, every invariant holds`, async () => {
  await runSeedRange(0, 1, 1, 'exactly-once-pipeline');
});
