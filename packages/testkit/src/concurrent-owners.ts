/** One `processRecords` call a fleet test recorded: which worker processed which shard, and when. */
export interface ProcessingSpan {
  readonly workerId: string;
  readonly shardId: string;
  /** When the call began (any clock, the same for every span). */
  readonly startedAt: number;
  /** When it returned or threw. */
  readonly endedAt: number;
}

/**
 * The times two workers processed one shard at once, one line each: per shard, the spans in time
 * order are grouped into runs by worker, and each run must end before the next one starts. A fleet
 * that hands shards over cleanly returns `[]`.
 */
export function concurrentOwners(spans: readonly ProcessingSpan[]): string[] {
  const problems: string[] = [];
  const byShard = new Map<string, ProcessingSpan[]>();
  for (const span of spans) {
    const list = byShard.get(span.shardId);
    if (list === undefined) byShard.set(span.shardId, [span]);
    else list.push(span);
  }
  for (const [shardId, shardSpans] of byShard) {
    const sorted = [...shardSpans].sort((a, b) => a.startedAt - b.startedAt);
    const runs: Array<{ workerId: string; start: number; end: number }> = [];
    for (const span of sorted) {
      const last = runs.at(-1);
      if (last !== undefined && last.workerId === span.workerId) last.end = Math.max(last.end, span.endedAt);
      else runs.push({ workerId: span.workerId, start: span.startedAt, end: span.endedAt });
    }
    for (let index = 1; index < runs.length; index++) {
      const before = runs[index - 1] as (typeof runs)[number];
      const after = runs[index] as (typeof runs)[number];
      if (before.end > after.start) {
        problems.push(
          `${shardId}: ${before.workerId} until ${before.end.toFixed(0)} ms, ${after.workerId} from ${after.start.toFixed(0)} ms`,
        );
      }
    }
  }
  return problems;
}
