import type { ChildSignaller } from '../child-process-launcher.js';

/**
 * Signals a child's whole process group — it leads one, being started detached — so a program a
 * wrapper script started gets the signal too; falls back to the child alone.
 */
export const signalProcessGroup: ChildSignaller = (child, signal) => {
  if (child.pid !== undefined) {
    try {
      process.kill(-child.pid, signal);
      return;
    } catch {
      // The group is gone: signal the child itself.
    }
  }
  try {
    child.kill(signal);
  } catch {
    // Already gone.
  }
};
