import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { PROMETHEUS_METRIC_MAPPING } from './prometheus-metric-mapping.js';

// docs/metrics.md is the table users read; the mapping is what the sink does. They must agree.
const table = readFileSync(new URL('../../docs/metrics.md', import.meta.url), 'utf8')
  .split('\n')
  .filter((line) => line.startsWith('| `'));

describe('the Prometheus metric mapping', () => {
  it('has a row in docs/metrics.md for every mapped metric, with its Prometheus name and type', () => {
    const missing: string[] = [];
    for (const [key, mapping] of Object.entries(PROMETHEUS_METRIC_MAPPING)) {
      if (mapping === null) continue;
      const [operation, name] = key.split('/') as [string, string];
      const row = table.find(
        (line) =>
          line.startsWith(`| \`${name}\``) &&
          line.includes(`Operation=${operation}`) &&
          line.includes(`\`kcl_${mapping.name}`) &&
          line.includes(` ${mapping.type} |`),
      );
      if (row === undefined) missing.push(key);
    }
    expect(missing).toEqual([]);
  });
});
