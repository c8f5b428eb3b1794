import { startDynalite } from '@kcl/testkit';
import { describeFleetScenarios } from './support/fleet-scenarios.js';

describeFleetScenarios('dynamodb', async () => {
  const dynalite = await startDynalite({ separateProcess: true });
  return {
    config: {
      kind: 'dynamo',
      endpoint: dynalite.endpoint,
      region: dynalite.region,
      tableName: 'kcl-fleet-leases',
    },
    teardown: () => dynalite.stop(),
  };
});
