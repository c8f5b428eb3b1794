import type { Clock, LeaseFigures } from '@kcl/core';
import { encodeLeaseFigures } from '@kcl/core';

interface Tally {
  records: number;
  bytes: number;
  millisBehindLatest: number | null;
  lastCheckpointAt: Date | null;
}

/**
 * The per-lease figures a worker publishes with its heartbeat (`LeaseFigures` of @kcl/core): fed by
 * the same batch reports as the metrics, and by checkpoint writes; `publish` turns the counts since
 * the previous heartbeat into rates.
 */
export class LeaseFigureTracker {
  readonly #clock: Clock;
  readonly #tallies = new Map<string, Tally>();
  #since: number;

  constructor(clock: Clock) {
    this.#clock = clock;
    this.#since = clock.monotonicNow();
  }

  batch(report: {
    readonly leaseKey: string;
    readonly records: number;
    readonly bytes: number;
    readonly millisBehindLatest: number;
  }): void {
    const tally = this.#tally(report.leaseKey);
    tally.records += report.records;
    tally.bytes += report.bytes;
    tally.millisBehindLatest = report.millisBehindLatest;
  }

  checkpointed(leaseKey: string): void {
    this.#tally(leaseKey).lastCheckpointAt = new Date(this.#clock.now());
  }

  /**
   * The figures of the leases held now, as the metadata value (rates since the previous call); the
   * counts start again, and leases no longer held are forgotten.
   */
  publish(heldLeaseKeys: readonly string[]): string {
    const now = this.#clock.monotonicNow();
    const seconds = Math.max(0.001, (now - this.#since) / 1_000);
    this.#since = now;
    const figures: LeaseFigures[] = [];
    const held = new Set(heldLeaseKeys);
    for (const leaseKey of [...held].sort()) {
      const tally = this.#tallies.get(leaseKey);
      figures.push({
        leaseKey,
        recordsPerSecond: (tally?.records ?? 0) / seconds,
        bytesPerSecond: (tally?.bytes ?? 0) / seconds,
        millisBehindLatest: tally?.millisBehindLatest ?? null,
        lastCheckpointAt: tally?.lastCheckpointAt ?? null,
      });
      if (tally !== undefined) {
        tally.records = 0;
        tally.bytes = 0;
      }
    }
    for (const leaseKey of this.#tallies.keys()) if (!held.has(leaseKey)) this.#tallies.delete(leaseKey);
    return encodeLeaseFigures(figures);
  }

  #tally(leaseKey: string): Tally {
    let tally = this.#tallies.get(leaseKey);
    if (tally === undefined) {
      tally = { records: 0, bytes: 0, millisBehindLatest: null, lastCheckpointAt: null };
      this.#tallies.set(leaseKey, tally);
    }
    return tally;
  }
}
