/** What the script does to the running fleet. */
export type TimelineAction = 'kill' | 'join' | 'split' | 'merge' | 'stop' | 'stop-producing';

export interface TimelineStep {
  readonly action: TimelineAction;
  /** Milliseconds after the producer started. */
  readonly atMs: number;
  /** What the step does, for the view. */
  readonly label: string;
}

/**
 * When each step happens, as a fraction of the script. The producer stops `END_RESERVE_MS` before the
 * script's end instead (at 85% at the latest): the drain and the final stop fill that time.
 */
export const TIMELINE_FRACTIONS: Readonly<Record<Exclude<TimelineAction, 'stop-producing'>, number>> = {
  kill: 0.2,
  join: 0.3,
  split: 0.45,
  merge: 0.6,
  stop: 0.75,
};

/**
 * Kept at the end for the drain and the workers' graceful stop, so that the run ends at `--duration`:
 * both take well under a second on a quiet machine (the demo's timings: polls every 200 ms).
 */
export const END_RESERVE_MS = 1_000;

/** The shortest script, however long the startup took: time for a kill -9 to be taken over and the rest. */
export const MIN_SCRIPT_MS = 12_000;

/**
 * How long the script (from the producer's start) runs so that the whole demo, startup included,
 * lasts `durationMs`: what the startup left, but at least `MIN_SCRIPT_MS`.
 */
export function scriptLength(durationMs: number, startupMs: number): number {
  return Math.max(MIN_SCRIPT_MS, Math.round(durationMs - startupMs));
}

const LABELS: Readonly<Record<TimelineAction, string>> = {
  kill: 'kill -9 a worker',
  join: 'a new worker joins',
  split: 'split a shard',
  merge: 'merge two adjacent shards',
  stop: 'stop a worker gracefully',
  'stop-producing': 'stop producing, then drain',
};

/** The script's steps for a script of `scriptMs` (see `scriptLength`), in time order. */
export function planTimeline(scriptMs: number): TimelineStep[] {
  const steps = (Object.keys(TIMELINE_FRACTIONS) as Array<keyof typeof TIMELINE_FRACTIONS>).map(
    (action): TimelineStep => ({
      action,
      atMs: Math.round(TIMELINE_FRACTIONS[action] * scriptMs),
      label: LABELS[action],
    }),
  );
  steps.push({
    action: 'stop-producing',
    atMs: Math.round(Math.max(0.85 * scriptMs, scriptMs - END_RESERVE_MS)),
    label: LABELS['stop-producing'],
  });
  return steps.sort((a, b) => a.atMs - b.atMs);
}
