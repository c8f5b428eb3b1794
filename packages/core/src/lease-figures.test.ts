import { describe, expect, it } from 'vitest';
import { decodeLeaseFigures, encodeLeaseFigures, type LeaseFigures } from './lease-figures.js';

const figure = (leaseKey: string): LeaseFigures => ({
  leaseKey,
  recordsPerSecond: 12.34,
  bytesPerSecond: 1_024,
  millisBehindLatest: 250,
  lastCheckpointAt: new Date('2026-01-02T03:04:05.000Z'),
});

describe('lease figures', () => {
  it('round-trips through the metadata string', () => {
    const decoded = decodeLeaseFigures(
      encodeLeaseFigures([
        figure('shardId-1'),
        { ...figure('shardId-2'), millisBehindLatest: null, lastCheckpointAt: null },
      ]),
    );
    expect(decoded).toEqual({
      leases: [
        { ...figure('shardId-1'), recordsPerSecond: 12.3 },
        {
          ...figure('shardId-2'),
          recordsPerSecond: 12.3,
          millisBehindLatest: null,
          lastCheckpointAt: null,
        },
      ],
      omitted: 0,
    });
  });

  it('stays within its bound and counts the leases left out', () => {
    const many = Array.from({ length: 1_000 }, (_, index) =>
      figure(`shardId-${String(index).padStart(12, '0')}`),
    );
    const encoded = encodeLeaseFigures(many, 2_000);
    expect(encoded.length).toBeLessThanOrEqual(2_000);
    const decoded = decodeLeaseFigures(encoded);
    expect(decoded?.leases.length).toBeGreaterThan(10);
    expect((decoded?.leases.length ?? 0) + (decoded?.omitted ?? 0)).toBe(1_000);
  });

  it('reads anything else as absent', () => {
    expect(decodeLeaseFigures(undefined)).toBeNull();
    expect(decodeLeaseFigures('not json')).toBeNull();
    expect(decodeLeaseFigures('{"v":2,"l":[]}')).toBeNull();
  });
});
