import { ManualClock } from '@kcl/testkit';
import { describe, expect, it } from 'vitest';
import { WorkerLivenessTracker } from './worker-liveness-tracker.js';

describe('WorkerLivenessTracker', () => {
  it('keeps a worker live while its heartbeat changes, and drops it after the expiry', async () => {
    const clock = new ManualClock({ monotonic: 0 });
    const tracker = new WorkerLivenessTracker({ workerExpiryMs: 45_000 });
    tracker.observe(
      [
        { workerId: 'a', heartbeat: 1 },
        { workerId: 'b', heartbeat: 1 },
      ],
      clock.monotonicNow(),
    );
    // First sight is fresh, whatever the heartbeat value.
    expect(tracker.liveWorkerIds(clock.monotonicNow())).toEqual(['a', 'b']);
    await clock.advance(30_000);
    tracker.observe(
      [
        { workerId: 'a', heartbeat: 2 },
        { workerId: 'b', heartbeat: 1 },
      ],
      clock.monotonicNow(),
    );
    await clock.advance(15_000);
    tracker.observe(
      [
        { workerId: 'a', heartbeat: 2 },
        { workerId: 'b', heartbeat: 1 },
      ],
      clock.monotonicNow(),
    );
    expect(tracker.isLive('b', clock.monotonicNow())).toBe(true);
    await clock.advance(1);
    expect(tracker.liveWorkerIds(clock.monotonicNow())).toEqual(['a']);
    expect(tracker.lastChangeAt('a')).toBe(30_000);
  });

  it('forgets workers that left the registry; unknown workers are not live', () => {
    const tracker = new WorkerLivenessTracker({ workerExpiryMs: 10 });
    tracker.observe([{ workerId: 'a', heartbeat: 1 }], 0);
    tracker.observe([], 1);
    expect(tracker.isLive('a', 1)).toBe(false);
    expect(tracker.liveWorkerIds(1)).toEqual([]);
  });
});
