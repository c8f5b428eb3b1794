import { startDynalite } from '@kcl/testkit';
import { describeFleetScenarios } from './support/fleet-scenarios.js';

describeFleetScenarios('dynamodb', async () => {
  const dynalite = await startDynalite({ separateProcess: true });
  return {
    // Each test's application gets its own table, named after it (the Java layout's default).
    config: { kind: 'dynamo', endpoint: dynalite.endpoint, region: dynalite.region },
    teardown: () => dynalite.stop(),
  };
});
