import { describe, expect, it } from 'vitest';
import { runFleetSimulation } from '../src/fleet-simulation.js';

describe('the fleet simulation', () => {
  it('is deterministic: a seed gives the same story every time', async () => {
    const first = await runFleetSimulation({ seed: 42 });
    const second = await runFleetSimulation({ seed: 42 });
    expect(second.story).toEqual(first.story);
    expect(second.stats).toEqual(first.stats);
    expect(first.story.length).toBeGreaterThan(20);
  });

  it('covers every kind of event over the CI seeds it samples', async () => {
    const totals = { crashes: 0, gracefulStops: 0, splits: 0, merges: 0, produced: 0 };
    for (let seed = 1; seed <= 20; seed++) {
      const { stats } = await runFleetSimulation({ seed });
      totals.crashes += stats.crashes;
      totals.gracefulStops += stats.gracefulStops;
      totals.splits += stats.splits;
      totals.merges += stats.merges;
      totals.produced += stats.produced;
    }
    expect(totals.crashes).toBeGreaterThan(0);
    expect(totals.gracefulStops).toBeGreaterThan(0);
    expect(totals.splits).toBeGreaterThan(0);
    expect(totals.merges).toBeGreaterThan(0);
    expect(totals.produced).toBeGreaterThan(20 * 300);
  });

  it('is deterministic with several streams too, and their list changes in every way over the seeds it samples', async () => {
    const first = await runFleetSimulation({ seed: 42, streams: 3 });
    const second = await runFleetSimulation({ seed: 42, streams: 3 });
    expect(second.story).toEqual(first.story);
    expect(second.streams).toEqual(first.streams);
    const totals = { added: 0, removed: 0, deleted: 0 };
    for (let seed = 1; seed <= 10; seed++) {
      const { streams } = await runFleetSimulation({ seed, streams: 3 });
      totals.added += streams?.added ?? 0;
      totals.removed += streams?.removed ?? 0;
      totals.deleted += streams?.deleted ?? 0;
    }
    expect(totals.added).toBeGreaterThan(0);
    expect(totals.removed).toBeGreaterThan(0);
    expect(totals.deleted).toBeGreaterThan(0);
  });

  it('is deterministic with session liveness too, and its sessions end in every way over the seeds it samples', async () => {
    const first = await runFleetSimulation({ seed: 42, sessions: true });
    const second = await runFleetSimulation({ seed: 42, sessions: true });
    expect(second.story).toEqual(first.story);
    expect(second.sessions).toEqual(first.sessions);
    const totals = { restarts: 0, cuts: 0, deadOwnerTakes: 0, processDeaths: 0, vanished: 0 };
    for (let seed = 1; seed <= 10; seed++) {
      const { sessions, story } = await runFleetSimulation({ seed, sessions: true });
      totals.restarts += sessions?.restarts ?? 0;
      totals.cuts += sessions?.cuts ?? 0;
      totals.deadOwnerTakes += sessions?.deadOwnerTakes ?? 0;
      totals.processDeaths += story.filter((line) => line.includes('ends its session at once')).length;
      totals.vanished += story.filter((line) => line.includes('machine vanishes')).length;
    }
    expect(totals.restarts).toBeGreaterThan(0);
    expect(totals.cuts).toBeGreaterThan(0);
    expect(totals.deadOwnerTakes).toBeGreaterThan(0);
    expect(totals.processDeaths).toBeGreaterThan(0);
    expect(totals.vanished).toBeGreaterThan(0);
  });
});
