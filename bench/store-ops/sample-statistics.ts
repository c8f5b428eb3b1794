export interface SampleStatistics {
  readonly count: number;
  readonly min: number;
  readonly median: number;
  /** Nearest-rank 95th percentile: with fewer than 20 samples it is the largest. */
  readonly p95: number;
  readonly max: number;
}

export function sampleStatistics(values: readonly number[]): SampleStatistics {
  if (values.length === 0) throw new Error('bench: no samples to summarize');
  const sorted = [...values].sort((a, b) => a - b);
  const at = (index: number): number => sorted[Math.min(sorted.length - 1, Math.max(0, index))] as number;
  const middle = Math.floor(sorted.length / 2);
  return {
    count: sorted.length,
    min: at(0),
    median: sorted.length % 2 === 1 ? at(middle) : (at(middle - 1) + at(middle)) / 2,
    p95: at(Math.ceil(0.95 * sorted.length) - 1),
    max: at(sorted.length - 1),
  };
}
