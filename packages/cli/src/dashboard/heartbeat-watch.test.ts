import { describe, expect, it } from 'vitest';
import type { WorkerStatus } from '../status/application-status.js';
import { HeartbeatWatch } from './heartbeat-watch.js';

const worker = (workerId: string, heartbeat: number, alive = true): WorkerStatus => ({
  workerId,
  lastHeartbeatAt: '2026-01-01T00:00:00.000Z',
  heartbeatAgeMs: 0,
  heartbeat,
  alive,
  expiryMs: 45_001,
  startedAt: null,
  leases: [],
  recordsPerSecond: 0,
  bytesPerSecond: 0,
  figuresOmitted: 0,
  publishesLeaseFigures: true,
});

describe('HeartbeatWatch', () => {
  it('judges a worker gone once its counter is still for longer than its usual gap, on the observer clock', () => {
    const watch = new HeartbeatWatch(100);
    watch.observe([worker('a', 1, false)], 0);
    // Before two changes were seen, the registry's judgement stands.
    expect(watch.alive('a')).toBe(false);
    watch.observe([worker('a', 2)], 300);
    watch.observe([worker('a', 3)], 600);
    watch.observe([worker('a', 3)], 900);
    expect(watch.alive('a')).toBe(true);
    watch.observe([worker('a', 3)], 1_001);
    expect(watch.alive('a')).toBe(false);
    watch.observe([worker('a', 4)], 1_100);
    expect(watch.alive('a')).toBe(true);
    watch.observe([], 1_200);
    expect(watch.alive('a')).toBe(false);
  });

  it('does not take the gap from its first observation to the first change as the heartbeat interval', () => {
    const watch = new HeartbeatWatch(100);
    // First seen just before a heartbeat: the counter moves one read later, then not for a while.
    watch.observe([worker('a', 1)], 0);
    watch.observe([worker('a', 2)], 100);
    watch.observe([worker('a', 2)], 400);
    expect(watch.alive('a')).toBe(true);
    watch.observe([worker('a', 3)], 1_100);
    watch.observe([worker('a', 3)], 2_000);
    expect(watch.alive('a')).toBe(true);
    watch.observe([worker('a', 3)], 2_201);
    expect(watch.alive('a')).toBe(false);
  });
});
