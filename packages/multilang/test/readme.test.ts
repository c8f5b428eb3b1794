import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { PROPERTY_DEFINITIONS } from '../src/index.js';
import { NO_EFFECT_PREFIXES } from '../src/property-catalogue.js';
import { PACKAGE_DIR } from './support/daemon-harness.js';

describe('the README', () => {
  const readme = readFileSync(join(PACKAGE_DIR, 'README.md'), 'utf8');

  it('documents every properties key kcl-multilang knows', () => {
    const missing = PROPERTY_DEFINITIONS.map((definition) => definition.key).filter(
      (key) => !readme.includes(`\`${key}\``),
    );
    expect(missing).toEqual([]);
  });

  it('documents every key family that has no effect', () => {
    const missing = NO_EFFECT_PREFIXES.map((entry) => entry.prefix.replace(/\.$/, '.*')).filter(
      (prefix) => !readme.includes(prefix.endsWith('*') ? prefix : `\`${prefix}`),
    );
    expect(missing).toEqual([]);
  });
});
