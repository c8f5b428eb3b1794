import { describe, expect, it } from 'vitest';
import { closestName, editDistance } from './closest-name.js';

describe('editDistance', () => {
  it.each([
    ['', '', 0],
    ['', 'abc', 3],
    ['abc', '', 3],
    ['kitten', 'sitting', 3],
    ['flaw', 'lawn', 2],
    ['leaseRenewalIntervalMs', 'leaseRenewIntervalMs', 2],
    ['same', 'same', 0],
  ])('%j → %j takes %i edits', (a, b, distance) => {
    expect(editDistance(a, b)).toBe(distance);
    expect(editDistance(b, a)).toBe(distance);
  });
});

describe('closestName', () => {
  const known = ['leaseRenewIntervalMs', 'leaseExpiryMs', 'pollIntervalMs', 'maxRecords', 'logger'];

  it('suggests the nearest known name, ignoring case', () => {
    expect(closestName('leaseRenewalIntervalMs', known)).toBe('leaseRenewIntervalMs');
    expect(closestName('leaseexpiryms', known)).toBe('leaseExpiryMs');
    expect(closestName('loger', known)).toBe('logger');
    expect(closestName('maxRecord', known)).toBe('maxRecords');
  });

  it('suggests nothing when no name is close', () => {
    expect(closestName('region', known)).toBeNull();
    expect(closestName('x', known)).toBeNull();
    expect(closestName('leaseRenewIntervalMs', [])).toBeNull();
  });

  it('prefers the closer of two candidates, and the first of equally close ones', () => {
    expect(closestName('pollIntervalM', ['pollIntervalMs', 'pollIntervalMs2'])).toBe('pollIntervalMs');
    expect(closestName('ab', ['ax', 'ay'])).toBe('ax');
  });

  it('allows more edits in a long name', () => {
    // 30 characters: up to 6 edits
    expect(closestName('abcdefghijklmnopqrstuvwxyz0123', ['abcdefghijklmnopqrstuvwxyzABCD'])).toBe(
      'abcdefghijklmnopqrstuvwxyzABCD',
    );
    expect(closestName('abcdefghij', ['abcdefgXYZ'])).toBeNull();
  });
});
