import { checkPostgres, createPostgresDatabase } from './support/databases.js';
import { describeFleetScenarios } from './support/fleet-scenarios.js';

const postgres = await checkPostgres();

describeFleetScenarios(
  'postgres',
  async () => {
    const database = await createPostgresDatabase();
    return { config: { kind: 'postgres', url: database.url }, teardown: database.drop };
  },
  { skip: postgres.reason },
);
