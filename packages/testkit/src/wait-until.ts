/**
 * Polls `condition` every `intervalMs` (default 20 ms) until it holds; rejects naming `what` once
 * `timeoutMs` has passed. For integration tests that must wait on real processes; tests of timing
 * logic use `ManualClock` instead.
 */
export async function waitUntil(
  condition: () => boolean | Promise<boolean>,
  timeoutMs: number,
  what: string,
  intervalMs = 20,
): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    if (await condition()) return;
    if (performance.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}
