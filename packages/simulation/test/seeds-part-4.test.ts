import { it } from 'vitest';
import { CI_SEEDS, runSeedRange } from './seeds.js';

it(`fleet simulation, part 4 of 4 of seeds ${CI_SEEDS.from}..${CI_SEEDS.to}: every invariant holds`, async () => {
  await runSeedRange(3, 4);
});
