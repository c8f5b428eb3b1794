import { toJson } from '../cli/cli-io.js';
import type { CommandContext } from '../cli/command-context.js';
import { say } from '../cli/command-context.js';
import type { ExitCode } from '../cli/exit-codes.js';
import { EXIT_CODES } from '../cli/exit-codes.js';
import { startDashboard } from '../dashboard/dashboard-server.js';

/** `kcl dashboard`: serves the live lease page until Ctrl-C. */
export async function runDashboard(context: CommandContext): Promise<ExitCode> {
  const { raw, io, json } = context;
  const dashboard = await startDashboard({
    store: context.store,
    port: raw.port as number,
    host: raw.host as string,
    intervalMs: raw.intervalMs as number,
    ...(raw.workerExpiryMs === undefined ? {} : { workerExpiryMs: raw.workerExpiryMs as number }),
    signal: context.signal,
    ...(context.kinesis === undefined ? {} : { kinesis: context.kinesis }),
  });
  if (json) io.stdout.write(`${toJson({ command: 'dashboard', url: dashboard.url }, 'line')}\n`);
  say(context, `kcl dashboard for ${context.applicationName}: ${dashboard.url} (Ctrl-C to stop)`);
  await new Promise<void>((resolve) => {
    if (context.signal.aborted) resolve();
    context.signal.addEventListener('abort', () => resolve(), { once: true });
  });
  await dashboard.stop();
  return EXIT_CODES.ok;
}
