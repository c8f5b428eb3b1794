import { it } from 'vitest';
import { CI_MULTI_STREAM_SEEDS, runSeedRange } from './seeds.js';

it(`fleet simulation of ${CI_MULTI_STREAM_SEEDS.streams} streams, seeds ${CI_MULTI_STREAM_SEEDS.from}..${CI_MULTI_STREAM_SEEDS.to}: every invariant holds per stream`, async () => {
  await runSeedRange(0, 1, CI_MULTI_STREAM_SEEDS.streams);
});
