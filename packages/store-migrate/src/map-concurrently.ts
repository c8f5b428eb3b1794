/**
 * Runs `run` over `items` with at most `limit` calls in flight; results keep the input order. Stops
 * starting new calls once `signal` aborts (calls already running finish); the skipped items' results
 * are left undefined, so callers check `signal.aborted` afterwards.
 */
export async function mapConcurrently<T, R>(
  items: readonly T[],
  limit: number,
  run: (item: T, index: number) => Promise<R>,
  signal?: AbortSignal,
): Promise<R[]> {
  const results = new Array<R>(items.length);
  let next = 0;
  const lanes = Array.from({ length: Math.max(1, Math.min(limit, items.length)) }, async () => {
    while (next < items.length && signal?.aborted !== true) {
      const index = next++;
      results[index] = await run(items[index] as T, index);
    }
  });
  await Promise.all(lanes);
  return results;
}
