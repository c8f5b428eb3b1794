/**
 * Waits for `work` (rejecting with its error), or for `signal` to abort, whichever comes first. The
 * listener on the signal is removed either way, so a long-lived signal does not collect them.
 */
export async function answeredOrAborted(
  work: Promise<unknown>,
  signal: AbortSignal,
): Promise<'answered' | 'aborted'> {
  let onAbort: () => void = () => {};
  const aborted = new Promise<'aborted'>((resolve) => {
    onAbort = () => resolve('aborted');
    if (signal.aborted) resolve('aborted');
    else signal.addEventListener('abort', onAbort, { once: true });
  });
  try {
    return await Promise.race([work.then(() => 'answered' as const), aborted]);
  } finally {
    signal.removeEventListener('abort', onAbort);
  }
}
