import type { Consumer } from './create-consumer.js';

export interface ProcessSignalOptions {
  /** Signals to handle. Default SIGTERM and SIGINT. */
  readonly signals?: readonly NodeJS.Signals[];
  /** Called when a signal arrives, e.g. to log it. */
  readonly onSignal?: (signal: NodeJS.Signals, mode: 'graceful' | 'forced') => void;
  /** Exit the process after the stop finishes (default true). */
  readonly exit?: boolean;
}

/**
 * For applications (libraries never touch the process): the first SIGTERM or SIGINT stops the
 * consumer gracefully — processors checkpoint, leases are released — and the second forces the stop.
 * Returns a function that removes the handlers.
 */
export function stopOnSignals(consumer: Consumer, options: ProcessSignalOptions = {}): () => void {
  const signals = options.signals ?? ['SIGTERM', 'SIGINT'];
  const exit = options.exit ?? true;
  let received = 0;
  const handler = (signal: NodeJS.Signals): void => {
    received += 1;
    const mode = received === 1 ? 'graceful' : 'forced';
    options.onSignal?.(signal, mode);
    const stopping = consumer.stop({ graceful: mode === 'graceful' });
    if (!exit) return;
    if (mode === 'forced') {
      process.exit(130);
    }
    void stopping.then(() => process.exit(0));
  };
  for (const signal of signals) process.on(signal, handler);
  return () => {
    for (const signal of signals) process.off(signal, handler);
  };
}
