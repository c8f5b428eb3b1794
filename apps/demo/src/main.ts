#!/usr/bin/env node
// The kcl demo: `npm run demo -- [options]` from the repository root, or `node apps/demo/dist/main.js`.
import { Cleanup } from './cleanup.js';
import { DEMO_USAGE, parseDemoOptions } from './demo-options.js';
import { DemoSetupError } from './prepare-lease-store.js';
import { runDemo } from './run-demo.js';

async function main(): Promise<number> {
  // The AWS SDK warns on Node 20 about releases years away; it would only clutter the view.
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
  const parsed = parseDemoOptions(process.argv.slice(2));
  if (!parsed.ok) {
    console.error(
      `kcl demo: invalid options:\n${parsed.problems.map((problem) => `  - ${problem}`).join('\n')}\n\n${DEMO_USAGE}`,
    );
    return 2;
  }
  if (parsed.options.help) {
    console.log(DEMO_USAGE);
    return 0;
  }
  const options = parsed.options;
  const tty = options.tty ?? process.stdout.isTTY === true;
  const color = tty && process.env.NO_COLOR === undefined;
  const cleanup = new Cleanup((name, error) =>
    console.error(`kcl demo: could not ${name}: ${error instanceof Error ? error.message : String(error)}`),
  );

  // A closed terminal (or pipe) must not stop the cleanup half-way with EIO or EPIPE.
  process.stdout.on('error', () => undefined);
  process.stderr.on('error', () => undefined);
  let interrupted = false;
  const onSignal = (signal: NodeJS.Signals): void => {
    if (interrupted) {
      // A second Ctrl-C: leave now. Emulators die with this process; workers when their stdin closes.
      // A hang-up during the cleanup (the terminal closed after the first Ctrl-C) lets it finish.
      if (signal !== 'SIGHUP') process.exit(130);
      return;
    }
    interrupted = true;
    if (signal !== 'SIGHUP')
      console.log(`\nkcl demo: ${signal} — stopping the workers and emulators, removing temporary files…`);
    void cleanup.run().then(() => process.exit(130));
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  // The terminal closed: clean up all the same.
  process.on('SIGHUP', onSignal);
  // However the process ends, leave the cursor visible.
  process.on('exit', () => {
    if (tty) process.stdout.write('\x1b[?25h');
  });

  try {
    const outcome = await runDemo(options, { out: process.stdout, tty, color }, cleanup);
    return interrupted ? 130 : outcome.exitCode;
  } catch (error) {
    if (interrupted) return 130;
    console.error(
      `kcl demo failed: ${error instanceof DemoSetupError ? error.message : error instanceof Error ? (error.stack ?? error.message) : String(error)}`,
    );
    return 1;
  } finally {
    // After an interrupt this waits for the cleanup the signal started.
    await cleanup.run();
  }
}

main().then(
  (code) => {
    // A second interrupt may be waiting on the cleanup: it exits itself.
    process.exit(code);
  },
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
