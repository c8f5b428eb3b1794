import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describeFleetScenarios } from './support/fleet-scenarios.js';

describeFleetScenarios('sqlite', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'kcl-fleet-sqlite-'));
  return {
    config: { kind: 'sqlite', file: join(dir, 'leases.db') },
    teardown: async () => rmSync(dir, { recursive: true, force: true }),
  };
});
