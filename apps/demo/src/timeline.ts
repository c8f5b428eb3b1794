/** What the script does to the running fleet. */
export type TimelineAction = 'kill' | 'join' | 'split' | 'merge' | 'stop' | 'stop-producing';

export interface TimelineStep {
  readonly action: TimelineAction;
  /** Milliseconds after the producer started. */
  readonly atMs: number;
  /** What the step does, for the view. */
  readonly label: string;
}

/** When each step happens, as a fraction of the run. */
export const TIMELINE_FRACTIONS: Readonly<Record<TimelineAction, number>> = {
  kill: 0.2,
  join: 0.3,
  split: 0.45,
  merge: 0.6,
  stop: 0.75,
  'stop-producing': 0.85,
};

const LABELS: Readonly<Record<TimelineAction, string>> = {
  kill: 'kill -9 a worker',
  join: 'a new worker joins',
  split: 'split a shard',
  merge: 'merge two adjacent shards',
  stop: 'stop a worker gracefully',
  'stop-producing': 'stop producing, then drain',
};

/** The script's steps for a run of `durationMs`, in time order. */
export function planTimeline(durationMs: number): TimelineStep[] {
  return (Object.keys(TIMELINE_FRACTIONS) as TimelineAction[])
    .map((action) => ({
      action,
      atMs: Math.round(TIMELINE_FRACTIONS[action] * durationMs),
      label: LABELS[action],
    }))
    .sort((a, b) => a.atMs - b.atMs);
}
