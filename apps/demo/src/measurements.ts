import { type ShardRef, shardKey, shardLabel, shardOfLeaseKey } from './demo-stream.js';
import type { Fleet } from './fleet.js';
import { formatQuantity, formatSeconds, type StyledLine } from './terminal-view.js';
import {
  describeVerification,
  type KilledWorker,
  type LeaseLoss,
  type ProducedStream,
  type RunVerification,
  verificationPassed,
  verifyStreams,
} from './verification.js';
import type { DemoTiming, ProcessedLine } from './worker-protocol.js';

/** What the script did to the fleet, kept so the run can measure what followed. */
export interface ScriptRecord {
  /** The worker killed with kill -9, when, and the lease keys it held then. */
  readonly killed: {
    readonly workerId: string;
    readonly at: number;
    readonly held: readonly string[];
  } | null;
  /** The worker stopped gracefully (SIGTERM), and when. */
  readonly gracefullyStopped: { readonly workerId: string; readonly at: number } | null;
  /** The shard split, and when. */
  readonly split: { readonly at: number; readonly parent: ShardRef } | null;
}

/** What the measurements read of the fleet: its events and its lag reports. */
export type FleetReports = Pick<Fleet, 'events' | 'peakLag'>;

/** The killed worker with the last checkpoint it reported per lease before it died, for the verification. */
export function killedWorkerOf(fleet: FleetReports, script: ScriptRecord): KilledWorker | null {
  const killed = script.killed;
  if (killed === null) return null;
  const checkpoints = new Map<string, string>();
  for (const { at, event } of fleet.events) {
    if (event.workerId !== killed.workerId || event.type !== 'checkpoint-written') continue;
    if (at <= killed.at && event.leaseKey !== undefined && event.checkpoint !== undefined)
      checkpoints.set(event.leaseKey, event.checkpoint);
  }
  return { workerId: killed.workerId, at: killed.at, checkpoints };
}

/** Every lease a worker lost without releasing it, for the verification. */
export function leaseLossesOf(fleet: FleetReports): LeaseLoss[] {
  return fleet.events
    .filter(({ event }) => event.type === 'lease-lost' && event.leaseKey !== undefined)
    .map(({ at, event }) => ({
      workerId: event.workerId,
      leaseKey: event.leaseKey ?? '',
      at,
      reason: event.reason ?? 'unknown',
    }));
}

/** What the run measured, as lines: failover after the kill, hand-over after the graceful stop, the split. */
export function describeMeasurements(
  fleet: FleetReports,
  script: ScriptRecord,
  leaseExpiryMs: number,
): string[] {
  const lines: string[] = [];
  const takenAfter = (leaseKey: string, after: number, by?: (workerId: string) => boolean): number | null => {
    const taken = fleet.events.find(
      ({ at, event }) =>
        event.type === 'lease-taken' &&
        event.leaseKey === leaseKey &&
        at > after &&
        (by === undefined || by(event.workerId)),
    );
    return taken?.at ?? null;
  };
  const killed = script.killed;
  if (killed !== null && killed.held.length > 0) {
    const times = killed.held.map((leaseKey) =>
      takenAfter(leaseKey, killed.at, (workerId) => workerId !== killed.workerId),
    );
    const taken = times.filter((time): time is number => time !== null);
    if (taken.length > 0) {
      const lastTaken = Math.max(...taken);
      const peak = Math.max(...killed.held.map((leaseKey) => fleet.peakLag(leaseKey, killed.at)));
      lines.push(
        `failover: ${taken.length} of ${formatQuantity(killed.held.length, 'lease')} of the killed ${killed.workerId} taken over ` +
          `${formatSeconds(lastTaken - killed.at)} after the kill -9 (lease expiry ${leaseExpiryMs / 1000} s); ` +
          `their shards were up to ${formatSeconds(peak)} behind, then caught up`,
      );
    }
  }
  const stopped = script.gracefullyStopped;
  if (stopped !== null) {
    const released = fleet.events.filter(
      ({ at, event }) =>
        event.type === 'lease-released' && event.workerId === stopped.workerId && at >= stopped.at,
    );
    const gaps = released
      .map(({ at, event }) => {
        const taken = takenAfter(event.leaseKey ?? '', at - 1);
        return taken === null ? null : taken - at;
      })
      .filter((gap): gap is number => gap !== null);
    if (gaps.length > 0)
      lines.push(
        `graceful stop: ${stopped.workerId} released ${formatQuantity(released.length, 'lease')}; the others took ${gaps.length} of ` +
          `them within ${formatSeconds(Math.max(...gaps))} (no expiry wait)`,
      );
  }
  const split = script.split;
  if (split !== null) {
    const parent = shardKey(split.parent);
    const ended = fleet.events.find(
      ({ at, event }) =>
        event.type === 'shard-ended' &&
        event.leaseKey !== undefined &&
        shardKey(shardOfLeaseKey(event.leaseKey)) === parent &&
        at > split.at,
    );
    if (ended !== undefined)
      lines.push(
        `split: ${shardLabel(split.parent)} was processed to its end ${formatSeconds(ended.at - split.at)} after the split; its children started then`,
      );
  }
  return lines;
}

/** How long each part of the run took. */
export interface RunDurations {
  readonly startupMs: number;
  readonly scriptMs: number;
  readonly drainMs: number;
  readonly stopMs: number;
  readonly totalMs: number;
  /** What `--duration` asked for. */
  readonly plannedMs: number;
}

export interface RunReport {
  readonly verification: RunVerification;
  readonly passed: boolean;
  /** What the demo prints at the end. */
  readonly lines: readonly StyledLine[];
}

/**
 * The end of a run: the verification of what the workers processed, and the lines that say what was
 * measured, how long each part took, which workers died on their own, and whether the run passed.
 */
export function reportRun(input: {
  readonly fleet: Fleet;
  readonly script: ScriptRecord;
  /** What the producers wrote, per stream. */
  readonly streams: readonly ProducedStream[];
  readonly keys: number;
  readonly timing: Pick<DemoTiming, 'leaseExpiryMs' | 'checkpointIntervalMs'>;
  readonly durations: RunDurations;
  /**
   * With --exactly-once: the rows of the output table, which the verification counts instead of the
   * workers' files.
   */
  readonly committed?: readonly ProcessedLine[];
}): RunReport {
  const { fleet, script, timing, durations } = input;
  const verification = verifyStreams({
    streams: input.streams,
    keys: input.keys,
    lines: input.committed ?? fleet.processedLines(),
    killed: killedWorkerOf(fleet, script),
    leaseLosses: leaseLossesOf(fleet),
  });
  const lines: StyledLine[] = [{ text: '', style: null }];
  for (const text of describeMeasurements(fleet, script, timing.leaseExpiryMs))
    lines.push({ text, style: null });
  lines.push({
    text:
      `durations: startup ${formatSeconds(durations.startupMs)}, script ${formatSeconds(durations.scriptMs)}, ` +
      `drain ${formatSeconds(durations.drainMs)}, final stop ${formatSeconds(durations.stopMs)}, total ${formatSeconds(durations.totalMs)} (--duration ${formatSeconds(durations.plannedMs)})`,
    style: null,
  });
  for (const worker of fleet.workers.values()) {
    if (worker.lifecycle !== 'exited') continue;
    lines.push({
      text: `${worker.workerId} exited on its own (${worker.exitSignal ?? worker.exitCode}): ${worker.stderrTail.slice(-3).join(' | ')}`,
      style: 'problem',
    });
  }
  lines.push({ text: '', style: null });
  // Exactly-once promises more: not a record twice in the output table.
  const passed =
    verificationPassed(verification.total) &&
    (input.committed === undefined || verification.total.duplicates === 0);
  describeVerification(verification, {
    killedWorkerId: script.killed?.workerId ?? null,
    checkpointIntervalMs: timing.checkpointIntervalMs,
    exactlyOnce: input.committed !== undefined,
  }).forEach((text, index) => {
    lines.push({ text, style: index === 0 ? (passed ? 'title' : 'problem') : null });
  });
  lines.push(
    passed
      ? {
          text:
            verification.streams.length === 0
              ? `verified: no record lost, every partition key processed in write order${input.committed === undefined ? '' : ', none twice'}`
              : `verified: no record lost on any of the ${verification.streams.length} streams, every partition key processed in write order${input.committed === undefined ? '' : ', none twice'}`,
          style: 'title',
        }
      : {
          text:
            input.committed === undefined
              ? 'FAILED: records were lost or processed out of order'
              : 'FAILED: records were lost, processed out of order or committed twice',
          style: 'problem',
        },
  );
  return { verification, passed, lines };
}
