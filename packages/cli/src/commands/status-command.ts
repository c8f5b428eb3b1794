import { toJson } from '../cli/cli-io.js';
import type { CommandContext } from '../cli/command-context.js';
import type { ExitCode } from '../cli/exit-codes.js';
import { EXIT_CODES } from '../cli/exit-codes.js';
import { readApplicationStatus } from '../status/read-application-status.js';
import { formatApplicationStatus } from '../status/status-text.js';
import { StreamPresenceCache } from '../status/stream-presence.js';

/** `kcl status`: once, or redrawn every `--interval-ms` with `--watch` until Ctrl-C. */
export async function runStatus(context: CommandContext): Promise<ExitCode> {
  const { io, raw, json, signal } = context;
  // Watching, each stream's presence is asked of Kinesis once a minute, not at every read.
  const kinesis =
    context.kinesis === undefined
      ? {}
      : raw.watch === true
        ? { streamPresence: new StreamPresenceCache(context.kinesis, () => performance.now()) }
        : { kinesis: context.kinesis };
  const options = {
    workerExpiryMs: raw.workerExpiryMs as number | undefined,
    now: context.now,
    ...kinesis,
  };
  if (raw.watch !== true) {
    const status = await readApplicationStatus(context.store, options);
    io.stdout.write(`${json ? toJson(status) : formatApplicationStatus(status)}\n`);
    return raw.check === true && status.problems.length > 0 ? EXIT_CODES.problems : EXIT_CODES.ok;
  }
  const redraw = io.stdout.isTTY === true && !json;
  while (!signal.aborted) {
    const status = await readApplicationStatus(context.store, options);
    if (json) io.stdout.write(`${toJson(status, 'line')}\n`);
    else io.stdout.write(`${redraw ? '\x1b[H\x1b[2J' : ''}${formatApplicationStatus(status)}\n\n`);
    await sleep(raw.intervalMs as number, signal);
  }
  return EXIT_CODES.ok;
}

/** Waits `ms`, or less when `signal` aborts (the CLI's own loop; runtime logic uses an injected clock). */
export function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done(): void {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });
}
