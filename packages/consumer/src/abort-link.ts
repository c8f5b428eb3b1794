/** A signal that aborts when any of several does, and can be unhooked from them. */
export interface LinkedSignal {
  readonly signal: AbortSignal;
  /** Unhooks from the parents; call it once the linked signal is no longer needed. */
  dispose(): void;
}

/**
 * Like `AbortSignal.any`, but with an explicit `dispose`: on Node 20, `AbortSignal.any` keeps every
 * combined signal reachable from a long-lived parent (a consumer's stop signal, say) for as long as the
 * parent lives, so one per call leaks. Here the listeners are removed once the caller is done.
 */
export function linkSignals(...signals: ReadonlyArray<AbortSignal | undefined>): LinkedSignal {
  const controller = new AbortController();
  const parents = signals.filter((signal): signal is AbortSignal => signal !== undefined);
  const aborted = parents.find((signal) => signal.aborted);
  if (aborted !== undefined) {
    controller.abort(aborted.reason);
    return { signal: controller.signal, dispose: () => {} };
  }
  const listeners = parents.map((parent) => {
    const onAbort = (): void => {
      controller.abort(parent.reason);
      dispose();
    };
    parent.addEventListener('abort', onAbort, { once: true });
    return { parent, onAbort };
  });
  const dispose = (): void => {
    for (const { parent, onAbort } of listeners) parent.removeEventListener('abort', onAbort);
    listeners.length = 0;
  };
  return { signal: controller.signal, dispose };
}
