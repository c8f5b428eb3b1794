import { describe, expect, it } from 'vitest';
import { maxRecordsFor } from './worker-protocol.js';

describe('maxRecordsFor', () => {
  it('keeps GetRecords small, but reads at least twice what a shard receives', () => {
    expect(maxRecordsFor(200, 4)).toBe(100);
    expect(maxRecordsFor(4_000, 4)).toBe(400);
    // 5 calls per second of 400 records: 2 000 records/s for a shard written at 1 000/s.
    expect(maxRecordsFor(1_000, 1) * 5).toBeGreaterThanOrEqual(2 * 1_000);
  });
});
