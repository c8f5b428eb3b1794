import { describe, expect, it } from 'vitest';
import {
  markerTag,
  markerTarget,
  pendingMarkerText,
  phaseMarkerText,
  readSourceMarker,
} from './migration-phase.js';

const at = new Date(0);
const TARGET = 'PostgreSQL table "kcl_leases" (application "billing")';

describe('migration markers', () => {
  it('tags each phase in a text that still names the target', () => {
    const text = phaseMarkerText(`${TARGET} at postgres://db/kcl`, 'cutover');
    expect(text).toBe(`${TARGET} at postgres://db/kcl [kcl-migrate live migration: cutover]`);
    expect(markerTag(text)).toBe('cutover');
    expect(markerTarget(text)).toBe(`${TARGET} at postgres://db/kcl`);
    expect(markerTag(pendingMarkerText('the source'))).toBe('pending');
    expect(markerTag(TARGET)).toBeNull();
    expect(markerTag('x [kcl-migrate live migration: sideways]')).toBeNull();
  });

  it.each([
    ['no marker', null, { kind: 'phase', phase: 'mirroring' }],
    ['a phase marker', phaseMarkerText('anything', 'target'), { kind: 'phase', phase: 'target' }],
    [
      'an offline copy to this target',
      `${TARGET} at postgres://db/kcl`,
      { kind: 'phase', phase: 'complete' },
    ],
  ] as const)('reads %s', (_name, text, reading) => {
    expect(readSourceMarker(text === null ? null : { migratedTo: text, migratedAt: at }, TARGET)).toEqual(
      reading,
    );
  });

  it('reads a marker naming another store, or a target guard, as foreign', () => {
    for (const migratedTo of ['DynamoDB table "elsewhere"', pendingMarkerText('x')]) {
      expect(readSourceMarker({ migratedTo, migratedAt: at }, TARGET).kind).toBe('foreign');
    }
  });
});
